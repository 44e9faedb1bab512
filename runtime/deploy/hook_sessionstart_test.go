package deploy_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
)

// TestHookSessionStartSource: a Claude Code SessionStart hook runs as a
// session opens with source "startup", and as it is resumed with
// "resume", as the reference's bridge runs it; its matcher is tested
// against the source.
func TestHookSessionStartSource(t *testing.T) {
	g := config.Grants{FS: []config.FSGrant{{Path: config.Workspace, Mode: config.ModeRW}}, Exec: config.ExecGrant{Allowed: true},
		Events: []string{"agent/prompt-submit", "tools/pre-execute", "tools/post-execute", "agent/turn-stopping"}}
	spec, err := deploy.PluginSpecFromEntry("", config.Entry{Source: "builtin:hooks-claude", Grants: g})
	if err != nil {
		t.Fatal(err)
	}
	spec.Config = []byte(`{"config_path":"hooks.json"}`)
	d := open(t, deploy.Options{Model: "m", Plugins: []deploy.PluginSpec{spec},
		Provider: model.ProviderFunc(func(context.Context, *model.Request, func(model.Chunk) error) error { return errors.New("unused") })})
	ws := t.TempDir()
	hooks := `{"hooks":{"SessionStart":[
	  {"matcher":"startup","hooks":[{"type":"command","command":"echo startup >> starts"}]},
	  {"matcher":"resume","hooks":[{"type":"command","command":"echo resume >> starts"}]}]}}`
	if err := os.WriteFile(filepath.Join(ws, "hooks.json"), []byte(hooks), 0o644); err != nil {
		t.Fatal(err)
	}
	starts := func() string {
		b, err := os.ReadFile(filepath.Join(ws, "starts"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	s, err := d.NewSession(context.Background(), deploy.SessionOptions{Cwd: ws})
	if err != nil {
		t.Fatal(err)
	}
	id := s.ID()
	s.Close(context.Background())
	if got := starts(); got != "startup\n" {
		t.Fatalf("after the open: %q", got)
	}
	s, err = d.NewSession(context.Background(), deploy.SessionOptions{Resume: id})
	if err != nil {
		t.Fatal(err)
	}
	s.Close(context.Background())
	if got := starts(); got != "startup\nresume\n" {
		t.Fatalf("after the resume: %q", got)
	}
}
