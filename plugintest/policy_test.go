package plugintest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/plugintest"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
)

// policyYAML is policyGrants as a deployment file writes them.
const policyYAML = `model: test-model
plugins:
  - name: kit
    source: %q
    config: {tools: [getenv]}
    grants:
      env: [DSH_POLICY_GRANTED]
      exec: {allowed: true, max_timeout: 20m}
      net: {allowed_hosts: [example.com]}
      limits: {memory: 64MiB, call_timeout: 5s}
`

// policyGrants set some fields and leave the rest to the defaults.
func policyGrants() config.Grants {
	return config.Grants{
		Env:    []string{"DSH_POLICY_GRANTED"},
		Exec:   config.ExecGrant{Allowed: true, MaxTimeout: 20 * time.Minute},
		Net:    config.NetGrant{AllowedHosts: []string{"example.com"}},
		Limits: config.Limits{Memory: 64 * config.MiB, CallTimeout: 5 * time.Second},
	}
}

// TestOnePolicyThreeWays loads the same grants through the Go API (as
// examples/embed does), through a deployment file and through plugintest,
// and requires the same effective bounds and environment from all three:
// the values written, and the documented defaults for the rest.
func TestOnePolicyThreeWays(t *testing.T) {
	t.Setenv("DSH_POLICY_GRANTED", "yes")
	t.Setenv("DSH_POLICY_SECRET", "no")
	kit, err := guestbuild.Build("testdata/guests/testkit")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := plugin.Bounds{
		MemoryBytes: 64 << 20, CallTimeout: "5s", InitTimeout: "10s",
		WallTimeout: "21m0s", // exec.max_timeout + a minute of slack
		NetTimeout:  "30s", HostBytesPerCall: 256 << 20, PromptBytes: 64 << 10,
		PromptBytesUsed: 42, LogBytesPerMinute: 1 << 20, Registrations: 1, MaxRegistrations: 1024,
		StateBytesPerSession: 16 << 20, SmallRequestBytes: 4 << 10,
	}

	type way struct {
		bounds plugin.Bounds
		getenv func(name string) string
	}
	fromDeployment := func(d *deploy.Deployment) way {
		t.Cleanup(func() { d.Close(ctx) })
		p := plugin.HostOf(d).Plugin("kit")
		if p == nil {
			t.Fatal("the deployment has no plugin kit")
		}
		facts := &prompt.AgentFacts{ID: "policy-agent", Model: "test-model"}
		return way{p.Bounds(), func(name string) string {
			r, err := plugin.HostOf(d).CallTool(ctx, facts, "getenv", []byte(name))
			if err != nil {
				t.Fatal(err)
			}
			return r.Text
		}}
	}

	ways := map[string]func() way{
		"go api": func() way {
			cfg, _ := json.Marshal(map[string]any{"tools": []string{"getenv"}})
			g := policyGrants()
			d, err := deploy.New(ctx, deploy.Options{Model: "test-model", SessionsDir: t.TempDir(),
				Plugins: []deploy.PluginSpec{{Name: "kit", Source: kit, Config: cfg, Grants: &g}}})
			if err != nil {
				t.Fatal(err)
			}
			return fromDeployment(d)
		},
		"yaml": func() way {
			file := filepath.Join(t.TempDir(), "deploy.yaml")
			if err := os.WriteFile(file, fmt.Appendf(nil, policyYAML, kit), 0o600); err != nil {
				t.Fatal(err)
			}
			d, err := deploy.Open(ctx, file, deploy.Options{SessionsDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			return fromDeployment(d)
		},
		"plugintest": func() way {
			h := plugintest.New(t)
			h.Load(kit, plugintest.Name("kit"), plugintest.Config(map[string]any{"tools": []string{"getenv"}}),
				plugintest.Grants(policyGrants()))
			return way{plugintest.HostOf(h).Plugin("kit").Bounds(), func(name string) string { return h.Call("getenv", json.RawMessage(name)).Text }}
		},
	}
	for name, load := range ways {
		t.Run(name, func(t *testing.T) {
			w := load()
			if !reflect.DeepEqual(w.bounds, want) {
				t.Errorf("bounds\n%+v\nwant\n%+v", w.bounds, want)
			}
			if got := w.getenv("DSH_POLICY_GRANTED"); got != "true:yes" {
				t.Errorf("granted variable: %q, want true:yes", got)
			}
			if got := w.getenv("DSH_POLICY_SECRET"); got == "true:no" {
				t.Errorf("ungranted variable read: %q", got)
			}
		})
	}
}
