package deploy_test

import (
	"context"
	"errors"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/guests"
	"github.com/dsh-wasm/dsh-wasm/internal/deploytest"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/deepseek"
)

// A deployment file opens with one module under two names, in order, and
// a live session without the key fails naming the variable.
func TestOpenDeploymentFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "dsh.yml")
	src := `model: m1
provider: {api_key_env: DSH_TEST_NO_SUCH_KEY}
persona: "Persona of {{model}} on {{platform}}."
plugins:
  - {name: facts-a, source: builtin:facts}
  - {name: facts-b, source: builtin:facts, config: {timezone: UTC}}
sessions: state
`
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, err := deploy.Open(ctx, file, deploy.Options{Cache: deploytest.Cache(t), Builtins: guests.All()})
	if err == nil {
		d.Close(ctx)
		t.Fatal("two plugins registering the same variables opened")
	}
	if !strings.Contains(err.Error(), "facts-b") || !strings.Contains(err.Error(), "duplicate variable name") {
		t.Errorf("error %v does not name the second plugin and the clash", err)
	}

	src = strings.Replace(src, "  - {name: facts-b, source: builtin:facts, config: {timezone: UTC}}\n", "", 1)
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err = deploy.Open(ctx, file, deploy.Options{Cache: deploytest.Cache(t), Builtins: guests.All()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(ctx)
	if plugin.HostOf(d).Plugin("facts-a") == nil {
		t.Errorf("plugins = %v", plugin.HostOf(d).Plugins())
	}
	p, err := d.SystemPrompt(ctx, deploy.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.System, "Persona of m1 on ") || strings.Contains(p.System, "{{") {
		t.Errorf("system = %q", p.System)
	}
	_, err = d.NewSession(ctx, deploy.SessionOptions{})
	if !errors.Is(err, deepseek.ErrNoAPIKey) || !strings.Contains(err.Error(), "$DSH_TEST_NO_SUCH_KEY") {
		t.Errorf("live session without a key = %v", err)
	}
	if _, err := deploy.Open(ctx, filepath.Join(dir, "missing.yml"), deploy.Options{}); !errors.Is(err, config.ErrInvalidConfig) {
		t.Errorf("missing file = %v", err)
	}
}
