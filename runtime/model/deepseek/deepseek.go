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
	// ErrInvalidConfig: a Config field has an unusable value.
	ErrInvalidConfig = errors.New("deepseek: invalid config")
)

// Config configures a Provider. The zero value talks to DeepSeek with the
// key from $DEEPSEEK_API_KEY.
type Config struct {
	// BaseURL is the API root; the provider POSTs BaseURL/chat/completions.
	BaseURL string
	// APIKeyEnv names the environment variable holding the bearer key.
	APIKeyEnv string
	// LookupEnv reads the environment; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Model is used when a Request names none.
	Model string
	// Thinking switches DeepSeek's thinking mode; empty leaves the
	// server's default and sends no thinking field.
	Thinking ThinkingMode
	// ReasoningEffort, when set, is sent as reasoning_effort.
	ReasoningEffort string
	// HTTPClient sends the requests; nil means a client over a transport
	// shared by every Provider of the process, sized for many concurrent
	// sessions (see transport.go). The provider never modifies it.
	// Its Timeout, if any, bounds whole streams: prefer HeaderTimeout and
	// IdleTimeout.
	HTTPClient *http.Client
	// MaxRetries is how many times a request is retried after a 429, a
	// 5xx or a connection failure before the stream began. Zero means
	// DefaultMaxRetries; a negative value disables retries.
	MaxRetries int
	// RetryBaseDelay and RetryMaxDelay bound the exponential backoff
	// (with jitter) between attempts when the server sends no Retry-After.
	RetryBaseDelay time.Duration
	RetryMaxDelay  time.Duration
	// MaxRetryAfter is the longest Retry-After the provider waits for; a
	// server asking for longer gets its error returned instead.
	MaxRetryAfter time.Duration
	// HeaderTimeout bounds each attempt from sending the request to the
	// first byte of the stream.
	HeaderTimeout time.Duration
	// IdleTimeout bounds the silence between two reads of the stream
	// (DeepSeek sends keep-alive comments while it is busy).
	IdleTimeout time.Duration
	// Sleep waits between attempts; nil means a timer that gives up when
	// ctx is done. Tests inject a fake.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock for Retry-After dates; nil means time.Now.
	Now func() time.Time
}

// Provider streams chat completions. It is safe for concurrent use.
type Provider struct {
	cfg      Config
	endpoint string
	apiKey   string
	client   *http.Client
}

var _ model.Provider = (*Provider)(nil)

// New checks cfg, fills its defaults and reads the API key from the
// environment.
func New(cfg Config) (*Provider, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: base URL %q is not an http(s) URL", ErrInvalidConfig, cfg.BaseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: base URL %q has a query or fragment", ErrInvalidConfig, cfg.BaseURL)
	}
	if err := cfg.Thinking.validate(); err != nil {
		return nil, err
	}
	if cfg.APIKeyEnv == "" {
		cfg.APIKeyEnv = DefaultAPIKeyEnv
	}
	if cfg.LookupEnv == nil {
		cfg.LookupEnv = os.LookupEnv
	}
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = DefaultMaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	for _, d := range []struct {
		name string
		val  *time.Duration
		def  time.Duration
	}{
		{"retry base delay", &cfg.RetryBaseDelay, DefaultRetryBase},
		{"retry max delay", &cfg.RetryMaxDelay, DefaultRetryMax},
		{"max Retry-After", &cfg.MaxRetryAfter, DefaultMaxRetryAfter},
		{"header timeout", &cfg.HeaderTimeout, DefaultHeaderTimeout},
		{"idle timeout", &cfg.IdleTimeout, DefaultIdleTimeout},
	} {
		if *d.val < 0 {
			return nil, fmt.Errorf("%w: negative %s %s", ErrInvalidConfig, d.name, *d.val)
		}
		if *d.val == 0 {
			*d.val = d.def
		}
	}
	if cfg.RetryMaxDelay < cfg.RetryBaseDelay {
		cfg.RetryMaxDelay = cfg.RetryBaseDelay
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	key, ok := cfg.LookupEnv(cfg.APIKeyEnv)
	if !ok || key == "" {
		return nil, fmt.Errorf("%w: $%s is not set", ErrNoAPIKey, cfg.APIKeyEnv)
	}
	client := cfg.HTTPClient
	if client == nil {
		client = defaultClient()
	}
	return &Provider{
		cfg:      cfg,
		endpoint: u.JoinPath("chat", "completions").String(),
		apiKey:   key,
		client:   client,
	}, nil
}

// Model is the model used when a request names none.
func (p *Provider) Model() string { return p.cfg.Model }

// Generate sends req and streams the answer to emit. Failures before the
// stream began are retried as Config says; once a chunk has been read,
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
