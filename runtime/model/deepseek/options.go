package deepseek

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// ThinkingMode is DeepSeek's thinking switch.
type ThinkingMode string

// Thinking modes. ThinkingDefault sends no thinking field.
const (
	ThinkingDefault  ThinkingMode = ""
	ThinkingEnabled  ThinkingMode = "enabled"
	ThinkingDisabled ThinkingMode = "disabled"
)

func (m ThinkingMode) validate() error {
	switch m {
	case ThinkingDefault, ThinkingEnabled, ThinkingDisabled:
		return nil
	}
	return fmt.Errorf("%w: thinking %q is not %q or %q", ErrInvalidOptions, string(m), ThinkingEnabled, ThinkingDisabled)
}

// Options configures a Provider. The zero value talks to DeepSeek with the
// key from $DEEPSEEK_API_KEY.
type Options struct {
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
