package deploy

import (
	"fmt"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/deepseek"
)

// The provider section of a deployment file is translated once, here,
// into the provider's Go options: a max_retries of 0 disables retries,
// an absent one keeps the default.
func TestProviderOptions(t *testing.T) {
	cfg, err := config.DecodeDeployment("d.yaml", "/srv", []byte(`model: deepseek-v4-flash
provider:
  base_url: https://example.test/v1
  api_key_env: MY_KEY
  thinking: true
  reasoning_effort: high
  max_retries: 0
  header_timeout: 30s
  idle_timeout: 2m
`))
	if err != nil {
		t.Fatal(err)
	}
	want := deepseek.Options{
		BaseURL: "https://example.test/v1", APIKeyEnv: "MY_KEY", Model: "deepseek-v4-flash",
		Thinking: deepseek.ThinkingEnabled, ReasoningEffort: "high", MaxRetries: -1,
		HeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
	}
	if got := providerOptions(cfg); fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Errorf("providerOptions = %+v, want %+v", got, want)
	}

	cfg, err = config.DecodeDeployment("d.yaml", "/srv", []byte("model: m\n"))
	if err != nil {
		t.Fatal(err)
	}
	want = deepseek.Options{APIKeyEnv: config.DefaultAPIKeyEnv, Model: "m"}
	if got := providerOptions(cfg); fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Errorf("defaults: providerOptions = %+v, want %+v", got, want)
	}

	cfg, err = config.DecodeDeployment("d.yaml", "/srv", []byte("model: m\nprovider: {max_retries: 5, thinking: disabled}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := providerOptions(cfg); got.MaxRetries != 5 || got.Thinking != deepseek.ThinkingDisabled {
		t.Errorf("max_retries 5, thinking disabled: %+v", got)
	}
}
