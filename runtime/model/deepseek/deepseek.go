// Package deepseek is a model.Provider for DeepSeek's OpenAI-compatible
// chat completions API (and other servers speaking the same streaming
// dialect). It POSTs {BaseURL}/chat/completions with stream: true and maps
// the server-sent events to model.Chunks: one block per reasoning, text and
// tool call, block-ends once the stream is done, then usage and finish.
//
// It talks HTTP and SSE itself rather than through
// github.com/openai/openai-go. That SDK can carry DeepSeek's extra fields
// (SetExtraFields on requests, JSON.ExtraFields on chunks), but every field
// this provider needs beyond the OpenAI shape — reasoning_content both ways,
// thinking, the cache hit/miss usage — would travel as untyped extras, while
// the parts that matter most here are out of reach: its SSE decoder treats
// EOF without [DONE] as a clean end and silently drops a truncated last
// event (a cut stream must be reported), its JSON errors cannot name the
// offending line, and its retry loop (sleep, Retry-After cap, retry on
// 408/409 and x-should-retry) cannot be driven by an injected clock or
// limited to the cases this provider retries. The wire protocol is small
// enough that a careful client of our own is the simpler dependency.
package deepseek

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/dsh-wasm/dsh-wasm/runtime/model"
)

// Defaults.
const (
	DefaultBaseURL       = "https://api.deepseek.com"
	DefaultAPIKeyEnv     = "DEEPSEEK_API_KEY"
	DefaultModel         = "deepseek-chat"
	DefaultMaxRetries    = 3
	DefaultRetryBase     = 500 * time.Millisecond
	DefaultRetryMax      = 30 * time.Second
	DefaultMaxRetryAfter = 2 * time.Minute
	DefaultHeaderTimeout = 2 * time.Minute
	DefaultIdleTimeout   = 5 * time.Minute
)

// Errors of New.
var (
	// ErrNoAPIKey: the environment variable that should hold the key is
	// unset or empty.
	ErrNoAPIKey = errors.New("deepseek: no API key")
	// ErrInvalidOptions: an Options field has an unusable value.
	ErrInvalidOptions = errors.New("deepseek: invalid options")
)

// Provider streams chat completions. It is safe for concurrent use.
type Provider struct {
	opts     Options
	endpoint string
	apiKey   string
	client   *http.Client
}

var _ model.Provider = (*Provider)(nil)

// New checks opts, fills its defaults and reads the API key from the
// environment.
func New(opts Options) (*Provider, error) {
	if opts.BaseURL == "" {
		opts.BaseURL = DefaultBaseURL
	}
	u, err := url.Parse(opts.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: base URL %q is not an http(s) URL", ErrInvalidOptions, opts.BaseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: base URL %q has a query or fragment", ErrInvalidOptions, opts.BaseURL)
	}
	if err := opts.Thinking.validate(); err != nil {
		return nil, err
	}
	if opts.APIKeyEnv == "" {
		opts.APIKeyEnv = DefaultAPIKeyEnv
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.Model == "" {
		opts.Model = DefaultModel
	}
	switch {
	case opts.MaxRetries == 0:
		opts.MaxRetries = DefaultMaxRetries
	case opts.MaxRetries < 0:
		opts.MaxRetries = 0
	}
	for _, d := range []struct {
		name string
		val  *time.Duration
		def  time.Duration
	}{
		{"retry base delay", &opts.RetryBaseDelay, DefaultRetryBase},
		{"retry max delay", &opts.RetryMaxDelay, DefaultRetryMax},
		{"max Retry-After", &opts.MaxRetryAfter, DefaultMaxRetryAfter},
		{"header timeout", &opts.HeaderTimeout, DefaultHeaderTimeout},
		{"idle timeout", &opts.IdleTimeout, DefaultIdleTimeout},
	} {
		if *d.val < 0 {
			return nil, fmt.Errorf("%w: negative %s %s", ErrInvalidOptions, d.name, *d.val)
		}
		if *d.val == 0 {
			*d.val = d.def
		}
	}
	if opts.RetryMaxDelay < opts.RetryBaseDelay {
		opts.RetryMaxDelay = opts.RetryBaseDelay
	}
	if opts.Sleep == nil {
		opts.Sleep = sleep
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	key, ok := opts.LookupEnv(opts.APIKeyEnv)
	if !ok || key == "" {
		return nil, fmt.Errorf("%w: $%s is not set", ErrNoAPIKey, opts.APIKeyEnv)
	}
	client := opts.HTTPClient
	if client == nil {
		client = defaultClient()
	}
	return &Provider{
		opts:     opts,
		endpoint: u.JoinPath("chat", "completions").String(),
		apiKey:   key,
		client:   client,
	}, nil
}

// Model is the model used when a request names none.
func (p *Provider) Model() string { return p.opts.Model }

// Generate sends req and streams the answer to emit. Failures before the
// stream began are retried as Options say; once a chunk has been read,
// nothing is retried. A stream that ends before its finish returns an
// error wrapping model.ErrStreamCut, an undecodable event one wrapping
// model.ErrMalformedStream, an API failure a *model.APIError (wrapped).
func (p *Provider) Generate(ctx context.Context, req *model.Request, emit func(model.Chunk) error) error {
	if req == nil {
		return errors.New("deepseek: nil request")
	}
	body, err := p.encodeRequest(req)
	if err != nil {
		return fmt.Errorf("deepseek: encoding request: %w", err)
	}
	s, err := p.connect(ctx, body)
	if err != nil {
		return err
	}
	defer s.close()
	return s.run(ctx, emit)
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
