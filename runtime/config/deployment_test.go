package config

import (
	"errors"
	"strings"
	"testing"
)

// The provider's key is never in the file: the decoded deployment names
// only the variable, defaulting to DEEPSEEK_API_KEY.
func TestDeploymentKeyComesFromTheEnvironment(t *testing.T) {
	dep, err := DecodeDeployment("d.yaml", "/srv", []byte("model: m\n"))
	if err != nil {
		t.Fatal(err)
	}
	if dep.Provider.APIKeyEnv != DefaultAPIKeyEnv {
		t.Errorf("api_key_env = %q", dep.Provider.APIKeyEnv)
	}
	if _, err := DecodeDeployment("d.yaml", "/srv", []byte("model: m\nprovider: {api_key: sk-123}\n")); err == nil ||
		!strings.Contains(err.Error(), "d.yaml:2: provider.api_key: unknown field") {
		t.Errorf("api_key in the file = %v", err)
	}
}

// provider.thinking takes enabled, disabled or a boolean; anything else,
// the empty string included, is refused. (Moved from the deepseek
// package, which no longer decodes YAML.)
func TestDeploymentProviderThinking(t *testing.T) {
	for src, want := range map[string]string{
		"thinking: false":     "disabled",
		"thinking: true":      "enabled",
		"thinking: enabled":   "enabled",
		"thinking: disabled":  "disabled",
		"base_url: https://x": "",
	} {
		dep, err := DecodeDeployment("d.yaml", "/srv", []byte("model: m\nprovider:\n  "+src+"\n"))
		if err != nil {
			t.Errorf("%q: %v", src, err)
		} else if dep.Provider.Thinking != want {
			t.Errorf("%q: thinking %q, want %q", src, dep.Provider.Thinking, want)
		}
	}
	for _, src := range []string{"thinking: maybe", "thinking: ''", "thinking: [enabled]", "modle: typo"} {
		if _, err := DecodeDeployment("d.yaml", "/srv", []byte("model: m\nprovider:\n  "+src+"\n")); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%q: %v, want ErrInvalidConfig", src, err)
		}
	}
}
