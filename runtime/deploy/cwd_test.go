package deploy_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
)

// A session's cwd is the directory opened when the session opened. After
// that, its path renamed away and a link to another directory put in its
// place, the fs tools, commands and a subagent (which inherits the cwd)
// all still work in the opened directory: none reads or writes where the
// link points.
func TestSessionKeepsTheCwdItOpened(t *testing.T) {
	base := t.TempDir()
	ws, moved, decoy := filepath.Join(base, "ws"), filepath.Join(base, "moved"), filepath.Join(base, "decoy")
	const mine, canary = "MINE-4c1d", "DECOY-SECRET-88e0"
	for _, d := range []string{ws, decoy} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "mine.txt"), []byte(mine), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"mine.txt", "secret.txt"} {
		if err := os.WriteFile(filepath.Join(decoy, f), []byte(canary), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := func(v map[string]string) string { b, _ := json.Marshal(v); return string(b) }
	b := &brain{answer: func(_ context.Context, req *model.Request) (scripted.Answer, error) {
		if req.Meta.ParentSessionID != "" { // the subagent
			if req.Meta.Step == 1 {
				return scripted.Answer{Calls: []scripted.Call{
					{ID: "c1", Name: "read", Arguments: args(map[string]string{"file_path": "mine.txt"})},
					{ID: "c2", Name: "bash", Arguments: args(map[string]string{"command": "cat mine.txt; echo c > child.txt"})},
				}}, nil
			}
			return scripted.Answer{Text: "child done"}, nil
		}
		switch req.Meta.Step {
		case 1:
			return scripted.Answer{Calls: []scripted.Call{
				{ID: "p1", Name: "read", Arguments: args(map[string]string{"file_path": "mine.txt"})},
				{ID: "p2", Name: "read", Arguments: args(map[string]string{"file_path": "secret.txt"})},
				{ID: "p3", Name: "write", Arguments: args(map[string]string{"file_path": "parent.txt", "content": "p"})},
				{ID: "p4", Name: "bash", Arguments: args(map[string]string{"command": "cat mine.txt; cat secret.txt; echo b > bash.txt"})},
			}}, nil
		case 2:
			return scripted.Answer{Calls: []scripted.Call{{ID: "p5", Name: "subagent",
				Arguments: args(map[string]string{"description": "look", "prompt": "look around"})}}}, nil
		}
		return scripted.Answer{Text: "done"}, nil
	}}
	rw := []config.FSGrant{{Path: config.Workspace, Mode: config.ModeRW}}
	d := open(t, deploy.Options{Model: "m", Provider: b, Plugins: []deploy.PluginSpec{
		{Name: "fs", Source: "builtin:tool-fs", Grants: &config.Grants{FS: rw}},
		{Name: "bash", Source: "builtin:tool-bash", Grants: &config.Grants{FS: rw, Exec: config.ExecGrant{Allowed: true}}},
		subagentGuest("subagent", "spawn", "subagent", "spawn"),
	}})
	s, err := d.NewSession(context.Background(), deploy.SessionOptions{Cwd: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if err := os.Rename(ws, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(decoy, ws); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prompt(context.Background(), "work"); err != nil {
		t.Fatal(err)
	}
	var results []string
	b.mu.Lock()
	for _, r := range b.requests {
		for _, m := range r.Messages {
			if m.Role == "tool" {
				for _, p := range m.Content {
					results = append(results, p.Text)
				}
			}
		}
	}
	b.mu.Unlock()
	all := strings.Join(results, "\n")
	if strings.Contains(all, canary) {
		t.Errorf("a tool read through the swapped cwd:\n%s", all)
	}
	if n := strings.Count(all, mine); n < 4 {
		t.Errorf("the opened directory's file was read %d times, want 4 (parent and child, fs and bash):\n%s", n, all)
	}
	for _, f := range []string{"parent.txt", "bash.txt", "child.txt"} {
		if _, err := os.Stat(filepath.Join(moved, f)); err != nil {
			t.Errorf("%s is not in the opened directory: %v", f, err)
		}
		if _, err := os.Lstat(filepath.Join(decoy, f)); err == nil {
			t.Errorf("%s landed where the link points", f)
		}
	}
}
