package deploy_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/guests"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
)

// A deployment opened a second time registers its plugins from the
// manifests the first recorded, compiling only what it needs: the same
// prompt, the same tools (the subagent tools, which their plugins
// register when the providers arrive, included), and a tool that works.
func TestLazyDeploymentMatchesEager(t *testing.T) {
	// Fresh names make fresh manifest keys in the shared test cache.
	var nonce [4]byte
	rand.Read(nonce[:])
	sfx := "-" + hex.EncodeToString(nonce[:])
	facts, _ := json.Marshal(guests.HostFacts())
	specs := []deploy.PluginSpec{
		{Name: "facts" + sfx, Source: "builtin:facts", Config: facts},
		{Name: "fs" + sfx, Source: "builtin:tool-fs", Grants: &config.Grants{FS: []config.FSGrant{{Path: config.Workspace, Mode: config.ModeRW}}}},
		{Name: "sub" + sfx, Source: "builtin:subagent", Config: json.RawMessage(`{"provider":"spawn","tool_name":"subagent"}`),
			Grants: &config.Grants{Subagents: []string{"spawn"}}},
	}
	ctx := context.Background()
	cwd := t.TempDir()
	type view struct {
		System string
		Tools  any
	}
	look := func(d *deploy.Deployment) view {
		t.Helper()
		p, err := d.SystemPrompt(ctx, deploy.PromptOptions{Cwd: cwd})
		if err != nil {
			t.Fatal(err)
		}
		return view{p.System, p.Tools}
	}
	eager := open(t, deploy.Options{Model: "m", Persona: "On {{model}}.", Plugins: specs})
	want := look(eager)
	wantOwner := eager.Owner("tool", "subagent")
	for _, s := range specs {
		if n := plugin.HostOf(eager).Plugin(s.Name).Instances(); n == 0 {
			t.Fatalf("%s: no instance after the first open; it loaded lazily from an old manifest", s.Name)
		}
	}
	if err := eager.Close(ctx); err != nil {
		t.Fatal(err)
	}

	lazy := open(t, deploy.Options{Model: "m", Persona: "On {{model}}.", Plugins: specs})
	for _, s := range specs[1:] {
		if n := plugin.HostOf(lazy).Plugin(s.Name).Instances(); n != 0 {
			t.Errorf("%s: %d instances after the second open, want a lazy load", s.Name, n)
		}
	}
	if got := look(lazy); !reflect.DeepEqual(got, want) {
		t.Errorf("lazy deployment\n got %+v\nwant %+v", got, want)
	}
	if n := plugin.HostOf(lazy).Plugin("sub" + sfx).Instances(); n != 0 {
		t.Errorf("subagent plugin: %d instances after the prompt, want none", n)
	}
	if got := lazy.Owner("tool", "subagent"); got != wantOwner || got == "" {
		t.Errorf("owner of the subagent tool: lazy %q, eager %q", got, wantOwner)
	}
}
