package deepseek

import (
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func decodeOptions(t *testing.T, src string) (Options, error) {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	var o Options
	err := dec.Decode(&o)
	return o, err
}

func TestOptionsDecode(t *testing.T) {
	o, err := decodeOptions(t, `
base_url: https://example.test/v1
api_key_env: MY_KEY
model: deepseek-v4-flash
thinking: true
reasoning_effort: high
max_retries: 0
header_timeout: 30s
idle_timeout: 2m
`)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	cfg := o.Config()
	want := Config{
		BaseURL: "https://example.test/v1", APIKeyEnv: "MY_KEY", Model: "deepseek-v4-flash",
		Thinking: ThinkingEnabled, ReasoningEffort: "high", MaxRetries: -1,
		HeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
	}
	if cfg.BaseURL != want.BaseURL || cfg.APIKeyEnv != want.APIKeyEnv || cfg.Model != want.Model ||
		cfg.Thinking != want.Thinking || cfg.ReasoningEffort != want.ReasoningEffort ||
		cfg.MaxRetries != want.MaxRetries || cfg.HeaderTimeout != want.HeaderTimeout || cfg.IdleTimeout != want.IdleTimeout {
		t.Fatalf("Config = %+v, want %+v", cfg, want)
	}
	p, err := New(withKey(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if p.cfg.MaxRetries != 0 {
		t.Errorf("max_retries: 0 left %d retries", p.cfg.MaxRetries)
	}
}

func withKey(cfg Config) Config {
	cfg.LookupEnv = func(string) (string, bool) { return "k", true }
	return cfg
}

func TestOptionsThinking(t *testing.T) {
	for src, want := range map[string]ThinkingMode{
		"thinking: false":    ThinkingDisabled,
		"thinking: enabled":  ThinkingEnabled,
		"thinking: disabled": ThinkingDisabled,
		"model: x":           ThinkingDefault,
	} {
		o, err := decodeOptions(t, src)
		if err != nil || o.Thinking != want {
			t.Errorf("%q: thinking %q, %v; want %q", src, o.Thinking, err, want)
		}
	}
	for _, src := range []string{"thinking: maybe", "thinking: ''", "thinking: [enabled]"} {
		if _, err := decodeOptions(t, src); err == nil {
			t.Errorf("%q accepted", src)
		}
	}
}

func TestOptionsUnknownFieldRejected(t *testing.T) {
	if _, err := decodeOptions(t, "modle: typo"); err == nil {
		t.Fatal("unknown field accepted under KnownFields")
	}
}

func TestOptionsDefaultRetries(t *testing.T) {
	o, err := decodeOptions(t, "model: m")
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(withKey(o.Config()))
	if err != nil {
		t.Fatal(err)
	}
	if p.cfg.MaxRetries != DefaultMaxRetries {
		t.Errorf("MaxRetries = %d, want the default %d", p.cfg.MaxRetries, DefaultMaxRetries)
	}
}
