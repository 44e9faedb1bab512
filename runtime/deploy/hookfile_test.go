package deploy_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/agent"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// TestSessionOpenFailsOnItsUnusableHookFile: a hook bridge whose relative
// config_path names a file in the session's cwd refuses to open a session
// whose file cannot be parsed, and the error the client gets names the
// file and line; a session in a directory without the file opens.
func TestSessionOpenFailsOnItsUnusableHookFile(t *testing.T) {
	g := config.Grants{FS: []config.FSGrant{{Path: config.Workspace, Mode: config.ModeRW}}, Exec: config.ExecGrant{Allowed: true},
		Events: []string{"agent/prompt-submit", "tools/pre-execute", "tools/post-execute", "agent/turn-stopping"}}
	spec, err := deploy.PluginSpecFromEntry("", config.Entry{Source: "builtin:hooks-claude", Grants: g})
	if err != nil {
		t.Fatal(err)
	}
	spec.Config = []byte(`{"config_path":"hooks.json"}`)
	d := open(t, deploy.Options{Model: "m", Plugins: []deploy.PluginSpec{spec},
		Provider: model.ProviderFunc(func(context.Context, *model.Request, func(model.Chunk) error) error { return errors.New("unused") })})

	bad, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "hooks.json"), []byte("{\n\"hooks\": {\"PreToolUse\": [}\n}"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = d.NewSession(context.Background(), deploy.SessionOptions{Cwd: bad})
	if want := filepath.Join(bad, "hooks.json") + ":2: invalid JSON"; err == nil || !errors.Is(err, agent.ErrListener) || !strings.Contains(err.Error(), want) {
		t.Fatalf("open: %v\nwant an error naming %s", err, want)
	}
	s, err := d.NewSession(context.Background(), deploy.SessionOptions{Cwd: t.TempDir()})
	if err != nil {
		t.Fatalf("a session without a hook file: %v", err)
	}
	s.Close(context.Background())
}

// TestResumeRecordsAnUnchangedHookFileOnce: the session's hook file, kept
// as plugin state at each open, is recorded again only when it changed.
func TestResumeRecordsAnUnchangedHookFileOnce(t *testing.T) {
	g := config.Grants{FS: []config.FSGrant{{Path: config.Workspace, Mode: config.ModeRW}}, Exec: config.ExecGrant{Allowed: true},
		Events: []string{"agent/prompt-submit", "tools/pre-execute", "tools/post-execute", "agent/turn-stopping"}}
	spec, err := deploy.PluginSpecFromEntry("", config.Entry{Source: "builtin:hooks-codex", Grants: g})
	if err != nil {
		t.Fatal(err)
	}
	spec.Config = []byte(`{"config_path":"codex-hooks.json"}`)
	d := open(t, deploy.Options{Model: "m", Plugins: []deploy.PluginSpec{spec},
		Provider: model.ProviderFunc(func(context.Context, *model.Request, func(model.Chunk) error) error { return errors.New("unused") })})
	ws := t.TempDir()
	file := filepath.Join(ws, "codex-hooks.json")
	if err := os.WriteFile(file, []byte(`{"hooks":{"Stop":[{"hooks":[{"command":"true"}]}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	count := func(s *deploy.Session) int {
		n := 0
		for _, e := range s.History() {
			if e.Type == session.TypePluginState {
				n++
			}
		}
		return n
	}
	s, err := d.NewSession(context.Background(), deploy.SessionOptions{Cwd: ws})
	if err != nil {
		t.Fatal(err)
	}
	id := s.ID()
	s.Close(context.Background())
	for i, want := range []int{1, 2} {
		if i == 1 {
			if err := os.WriteFile(file, []byte(`{"hooks":{}}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		s, err := d.NewSession(context.Background(), deploy.SessionOptions{Resume: id})
		if err != nil {
			t.Fatal(err)
		}
		if n := count(s); n != want {
			t.Errorf("resume %d: %d plugin/state records, want %d", i+1, n, want)
		}
		s.Close(context.Background())
	}
}
