package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

func loadEntry(t *testing.T, h *Host, yml string) *Plugin {
	t.Helper()
	e, err := config.Load("test.yaml", []byte(yml))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := SpecFromEntry("kit", e)
	if err != nil {
		t.Fatal(err)
	}
	p, err := h.Load(bg, spec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestGrantsWorkspaceFS(t *testing.T) {
	h := newHost(t)
	ws := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(ws, "in.txt"), []byte("inside"), 0o644)
	os.WriteFile(filepath.Join(outside, "canary.txt"), []byte("CANARY"), 0o644)
	os.Symlink(filepath.Join(outside, "canary.txt"), filepath.Join(ws, "link.txt"))
	loadEntry(t, h, "source: "+testkit(t)+`
config: {tools: [readfile, writefile]}
grants:
  fs: [{path: workspace, mode: rw}]
`)
	a := agent("a", "m")
	a.Cwd = ws
	if r, err := h.CallTool(bg, a, "readfile", []byte(filepath.Join(ws, "in.txt"))); err != nil || r.Text != "inside" {
		t.Fatalf("read inside: %+v %v", r, err)
	}
	if r, _ := h.CallTool(bg, a, "writefile", []byte(filepath.Join(ws, "new.txt")+"\nhello")); r.IsError {
		t.Fatalf("write inside: %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "new.txt")); string(b) != "hello" {
		t.Fatalf("written %q", b)
	}
	for _, path := range []string{filepath.Join(outside, "canary.txt"), filepath.Join(ws, "link.txt"), ws + "/../" + filepath.Base(outside) + "/canary.txt"} {
		r, err := h.CallTool(bg, a, "readfile", []byte(path))
		if err != nil || !r.IsError || strings.Contains(r.Text, "CANARY") {
			t.Fatalf("read %s: %+v %v", path, r, err)
		}
	}
	// Another agent with another workspace sees only its own.
	b := agent("b", "m")
	b.Cwd = outside
	if r, _ := h.CallTool(bg, b, "readfile", []byte(filepath.Join(ws, "in.txt"))); !r.IsError {
		t.Fatalf("agent b read agent a's workspace: %+v", r)
	}
}

func TestGrantsReadOnly(t *testing.T) {
	h := newHost(t)
	dir := t.TempDir()
	loadEntry(t, h, "source: "+testkit(t)+`
config: {tools: [writefile]}
grants:
  fs: [{path: `+dir+`, mode: ro}]
`)
	r, _ := h.CallTool(bg, agent("a", "m"), "writefile", []byte(filepath.Join(dir, "x")+"\ny"))
	if !r.IsError || !strings.Contains(r.Text, "Read-only file system") {
		t.Fatalf("write under ro: %+v", r)
	}
}

func TestGrantsExec(t *testing.T) {
	h := newHost(t)
	ws := t.TempDir()
	loadEntry(t, h, "source: "+testkit(t)+`
config: {tools: [exec]}
grants:
  fs: [{path: workspace, mode: rw}]
  exec: {allowed: true, timeout: 5s}
`)
	a := agent("a", "m")
	a.Cwd = ws
	r, err := h.CallTool(bg, a, "exec", cfg(t, hostfns.ExecRequest{Command: "pwd; echo err >&2; exit 3"}))
	if err != nil || r.IsError {
		t.Fatalf("exec: %+v %v", r, err)
	}
	var res hostfns.ExecResult
	json.Unmarshal([]byte(r.Text), &res)
	if res.ExitCode != 3 || strings.TrimSpace(res.Stdout.Data) != ws || res.Stderr.Data != "err\n" {
		t.Fatalf("result %+v", res)
	}
	r, _ = h.CallTool(bg, a, "exec", cfg(t, hostfns.ExecRequest{Command: "true", Cwd: "/"}))
	if !r.IsError || !strings.Contains(r.Text, "outside") {
		t.Fatalf("cwd outside roots: %+v", r)
	}
}

func TestGrantsDenyByDefault(t *testing.T) {
	h := newHost(t)
	loadEntry(t, h, "source: "+testkit(t)+"\nconfig: {tools: [exec, http, readfile]}\n")
	a := agent("a", "m")
	a.Cwd = t.TempDir()
	for tool, args := range map[string][]byte{
		"exec":     cfg(t, hostfns.ExecRequest{Command: "true"}),
		"http":     []byte("http://127.0.0.1:1/"),
		"readfile": []byte("/etc/hostname"),
	} {
		r, err := h.CallTool(bg, a, tool, args)
		if err != nil || !r.IsError {
			t.Fatalf("%s without a grant: %+v %v", tool, r, err)
		}
	}
}

func TestGrantsNet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://evil.invalid/", http.StatusFound)
			return
		}
		w.Write([]byte("hello from the granted host"))
	}))
	defer srv.Close()
	h := newHost(t)
	host := strings.TrimPrefix(srv.URL, "http://")
	loadEntry(t, h, "source: "+testkit(t)+`
config: {tools: [http]}
grants:
  net: {allowed_hosts: ["`+host+`"]}
`)
	a := agent("a", "m")
	r, err := h.CallTool(bg, a, "http", []byte(srv.URL+"/ok"))
	if err != nil || r.IsError || !strings.Contains(r.Text, "hello from the granted host") {
		t.Fatalf("granted: %+v %v", r, err)
	}
	r, _ = h.CallTool(bg, a, "http", []byte(srv.URL+"/redirect"))
	if !r.IsError || !strings.Contains(r.Text, "evil.invalid") {
		t.Fatalf("redirect to an unlisted host: %+v", r)
	}
}

func TestGrantsCheckNamesMissingGrant(t *testing.T) {
	h := newHost(t)
	e, _ := config.Load("deploy.yaml", []byte("source: "+testkit(t)+"\nconfig: {needs: {exec: true}}\n"))
	spec, err := SpecFromEntry("kit", e)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Load(bg, spec)
	if !errors.Is(err, ErrNotGranted) || !strings.Contains(err.Error(), "allowed: true") {
		t.Fatalf("err = %v", err)
	}
}

// A plugin loaded with no grants at all is refused for any need it
// declares, whatever its kind.
func TestNeedsWithoutGrantsAreRefused(t *testing.T) {
	h := newHost(t)
	for i, needs := range []map[string]any{
		{"exec": true},
		{"env": []string{"HOME"}},
		{"net": []string{"api.example.com"}},
		{"fs": []map[string]any{{"path": "workspace", "mode": "ro"}}},
		{"session_events": []string{"kit/note"}},
	} {
		_, err := h.Load(bg, Spec{Name: fmt.Sprintf("kit%d", i), Source: testkit(t), Config: cfg(t, map[string]any{"needs": needs})})
		if !errors.Is(err, ErrNotGranted) || !strings.Contains(err.Error(), "grants nothing") {
			t.Errorf("needs %v without grants: %v, want ErrNotGranted", needs, err)
		}
	}
	if _, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{"needs": map[string]any{}})}); err != nil {
		t.Errorf("no needs, no grants: %v", err)
	}
}

// TestGoGrantsAreValidatedAsYAML: grants written in Go are held to the
// rules a deployment file's are decoded with, and a refusal names the
// field, as it would in YAML.
func TestGoGrantsAreValidatedAsYAML(t *testing.T) {
	h := newHost(t)
	for field, g := range map[string]config.Grants{
		"grants.limits.host_bytes":   {Limits: config.Limits{HostBytes: 4000}},
		"grants.limits.memory":       {Limits: config.Limits{Memory: config.MaxMemory + 1}},
		"grants.limits.call_timeout": {Limits: config.Limits{CallTimeout: -1}},
		"grants.fs[0].path":          {FS: []config.FSGrant{{Path: "relative"}}},
		"grants.env[0]":              {Env: []string{"A=B"}},
	} {
		_, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Grants: &g})
		if !errors.Is(err, config.ErrInvalidConfig) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: load error %v, want an invalid config naming the field", field, err)
		}
		if h.Plugin("kit") != nil {
			t.Fatalf("%s: the plugin loaded", field)
		}
	}
}
