package deepseek

import (
	"testing"
	"time"
)

func withKey(opts Options) Options {
	opts.LookupEnv = func(string) (string, bool) { return "k", true }
	return opts
}

// The deployment file's provider section is decoded in runtime/config and
// translated in runtime/deploy; these are the Go options it lands on.
func TestOptionsKeptByNew(t *testing.T) {
	opts := Options{
		BaseURL: "https://example.test/v1", APIKeyEnv: "MY_KEY", Model: "deepseek-v4-flash",
		Thinking: ThinkingEnabled, ReasoningEffort: "high", MaxRetries: -1,
		HeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
	}
	p, err := New(withKey(opts))
	if err != nil {
		t.Fatal(err)
	}
	got := p.opts
	if got.BaseURL != opts.BaseURL || got.APIKeyEnv != opts.APIKeyEnv || got.Model != opts.Model ||
		got.Thinking != opts.Thinking || got.ReasoningEffort != opts.ReasoningEffort ||
		got.HeaderTimeout != opts.HeaderTimeout || got.IdleTimeout != opts.IdleTimeout {
		t.Fatalf("New kept %+v, want %+v", got, opts)
	}
	if p.endpoint != "https://example.test/v1/chat/completions" {
		t.Errorf("endpoint = %q", p.endpoint)
	}
	if got.MaxRetries != 0 {
		t.Errorf("MaxRetries -1 left %d retries", got.MaxRetries)
	}
}

func TestOptionsThinking(t *testing.T) {
	for _, mode := range []ThinkingMode{ThinkingDefault, ThinkingEnabled, ThinkingDisabled} {
		if _, err := New(withKey(Options{Thinking: mode})); err != nil {
			t.Errorf("thinking %q: %v", mode, err)
		}
	}
	for _, mode := range []ThinkingMode{"maybe", "true", "Enabled"} {
		if _, err := New(withKey(Options{Thinking: mode})); err == nil {
			t.Errorf("thinking %q accepted", mode)
		}
	}
}

func TestOptionsDefaultRetries(t *testing.T) {
	p, err := New(withKey(Options{Model: "m"}))
	if err != nil {
		t.Fatal(err)
	}
	if p.opts.MaxRetries != DefaultMaxRetries {
		t.Errorf("MaxRetries = %d, want the default %d", p.opts.MaxRetries, DefaultMaxRetries)
	}
}
