package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/guests"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// toolServer is a server whose deployment has tool-fs on the workspace
// and a model that, on a turn's first step, makes the tool calls its
// prompt lists (a JSON array of scripted.Call), then says "done".
func toolServer(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	brain := model.ProviderFunc(func(ctx context.Context, req *model.Request, emit func(model.Chunk) error) error {
		a := scripted.Answer{Text: "done"}
		if req.Meta.Step == 1 {
			var text string
			for _, m := range req.Messages {
				if m.Role == "user" {
					for _, p := range m.Content {
						text = p.Text
					}
				}
			}
			if err := json.Unmarshal([]byte(text), &a.Calls); err != nil {
				return err
			}
			a.Text = ""
		}
		for _, c := range a.Chunks() {
			if err := emit(c); err != nil {
				return err
			}
		}
		return nil
	})
	d, err := deploy.New(context.Background(), deploy.Options{Model: "m", Provider: brain, SessionsDir: t.TempDir(), Builtins: guests.ToolFS,
		Plugins: []deploy.PluginSpec{{Name: "fs", Source: "builtin:tool-fs",
			Grants: &config.Grants{FS: []config.FSGrant{{Path: config.Workspace, Mode: config.ModeRW}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	ws := t.TempDir()
	s, err := New(Config{Deployment: d, Workspaces: ws, Tokens: map[string]string{alphaTok: "alpha", betaTok: "beta"},
		MaxTurns: 4, MaxTenantTurns: 2})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return hs, ws
}

func calls(cs ...scripted.Call) string {
	b, _ := json.Marshal(cs)
	p, _ := json.Marshal(map[string]string{"text": string(b)})
	return string(p)
}

// A tenant's session whose cwd was swapped for a symbolic link after its
// creation (by the tenant's own commands in another session, say) cannot
// reach where the link points: not another tenant's root, not the host's
// files. Opening the session refuses it with an error naming the cwd;
// nothing is read there and nothing lands there.
func TestSwappedCwdStaysInTheTenantsRoot(t *testing.T) {
	hs, ws := toolServer(t)
	mk := func(cwd string) string {
		t.Helper()
		code, body := do(t, "POST", hs.URL+"/v1/sessions", alphaTok, `{"cwd":"`+cwd+`"}`)
		if code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", cwd, code, body)
		}
		var h session.Header
		json.Unmarshal(body, &h)
		return h.ID
	}
	x, y, z := mk("x"), mk("y"), mk("deep/z")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	betaRoot := filepath.Join(ws, "beta")
	must(os.MkdirAll(betaRoot, 0o750))
	const secret = "beta-secret-7f3a"
	must(os.WriteFile(filepath.Join(betaRoot, "secret.txt"), []byte(secret), 0o600))
	hostDir := t.TempDir() // a host directory outside every tenant
	const hostSecret = "host-secret-19c2"
	must(os.WriteFile(filepath.Join(hostDir, "host.txt"), []byte(hostSecret), 0o600))

	// The tools work in a session left alone.
	code, body := do(t, "POST", hs.URL+"/v1/sessions/"+z+"/prompt", alphaTok, calls(
		scripted.Call{ID: "w", Name: "write", Arguments: `{"file_path":"own.txt","content":"mine"}`}))
	if code != http.StatusOK {
		t.Fatalf("prompt z: %d %s", code, body)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "alpha", "deep", "z", "own.txt")); err != nil || string(b) != "mine" {
		t.Fatalf("the tool did not write in its own cwd (%v): the test proves nothing\n%s", err, body)
	}

	// x becomes a link to another tenant's root, y one to /, and the
	// parent of z one to the host directory (z made again inside it).
	must(os.RemoveAll(filepath.Join(ws, "alpha", "x")))
	must(os.Symlink(betaRoot, filepath.Join(ws, "alpha", "x")))
	must(os.RemoveAll(filepath.Join(ws, "alpha", "y")))
	must(os.Symlink("/", filepath.Join(ws, "alpha", "y")))
	must(os.Rename(filepath.Join(ws, "alpha", "deep"), filepath.Join(ws, "alpha", "deep.old")))
	must(os.MkdirAll(filepath.Join(hostDir, "z"), 0o750))
	must(os.Symlink(hostDir, filepath.Join(ws, "alpha", "deep")))

	relHost := strings.TrimPrefix(filepath.Join(hostDir, "host.txt"), "/")
	relPlant := strings.TrimPrefix(filepath.Join(hostDir, "planted.txt"), "/")
	for _, c := range []struct {
		id, prompt string
	}{
		{x, calls(scripted.Call{ID: "r", Name: "read", Arguments: `{"file_path":"secret.txt"}`},
			scripted.Call{ID: "w", Name: "write", Arguments: `{"file_path":"planted.txt","content":"pwned"}`})},
		{y, calls(scripted.Call{ID: "r", Name: "read", Arguments: `{"file_path":"` + relHost + `"}`},
			scripted.Call{ID: "w", Name: "write", Arguments: `{"file_path":"` + relPlant + `","content":"pwned"}`})},
		{z, calls(scripted.Call{ID: "r", Name: "read", Arguments: `{"file_path":"../host.txt"}`},
			scripted.Call{ID: "w", Name: "write", Arguments: `{"file_path":"planted.txt","content":"pwned"}`})},
	} {
		code, body := do(t, "POST", hs.URL+"/v1/sessions/"+c.id+"/prompt", alphaTok, c.prompt)
		if code != http.StatusConflict || !strings.Contains(string(body), "cwd") {
			t.Errorf("prompt on a swapped cwd: %d %s, want 409 naming the cwd", code, body)
		}
		for _, s := range []string{secret, hostSecret} {
			if strings.Contains(string(body), s) {
				t.Errorf("the session read %q through its swapped cwd", s)
			}
		}
	}
	for _, p := range []string{filepath.Join(betaRoot, "planted.txt"), filepath.Join(hostDir, "planted.txt"), filepath.Join(hostDir, "z", "planted.txt")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("a write through a swapped cwd landed at %s", p)
		}
	}
}
