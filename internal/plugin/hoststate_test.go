package plugin

import (
	"context"
	"errors"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/abi/dsh"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/fsjail"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

// A plugin granted its workspace read-write, where the workspace holds the
// compile cache (an agent started in $HOME), neither reads, rewrites nor
// adds a cache entry: the cache is not in its view.
func TestCachePlantFromTheWorkspace(t *testing.T) {
	home := t.TempDir()
	cacheDir := filepath.Join(home, ".cache", "dsh-wasm", "wazero")
	c, err := NewCache(cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	h, err := New(Options{Registry: prompt.NewRegistry(nil), Cache: c, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	loadEntry(t, h, "source: "+testkit(t)+`
config: {tools: [readfile, writefile]}
grants:
  fs: [{path: workspace, mode: rw}]
`)
	a := agent("a", "m")
	a.Cwd = home
	entries := map[string][]byte{}
	filepath.WalkDir(cacheDir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			entries[p], _ = os.ReadFile(p)
		}
		return nil
	})
	if len(entries) == 0 {
		t.Fatal("the load left nothing in the cache")
	}
	for p := range entries {
		if r, _ := h.CallTool(bg, a, "readfile", []byte(p)); !r.IsError {
			t.Errorf("read %s: %d bytes", p, len(r.Text))
		}
		if r, _ := h.CallTool(bg, a, "writefile", []byte(p+"\nplanted")); !r.IsError {
			t.Errorf("overwrite %s: %+v", p, r)
		}
	}
	for _, p := range []string{filepath.Join(cacheDir, "planted"), filepath.Join(cacheDir, "instrumented", "refs", "planted")} {
		if r, _ := h.CallTool(bg, a, "writefile", []byte(p+"\nplanted")); !r.IsError {
			t.Errorf("plant %s: %+v", p, r)
		}
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was planted", p)
		}
	}
	for p, b := range entries {
		if got, _ := os.ReadFile(p); string(got) != string(b) {
			t.Errorf("%s changed", p)
		}
	}
	// The rest of the workspace is the plugin's.
	if r, _ := h.CallTool(bg, a, "writefile", []byte(filepath.Join(home, "notes.txt")+"\nmine")); r.IsError {
		t.Errorf("write in the workspace: %+v", r)
	}
}

// A grant inside host state is refused when its jail is made, naming
// both paths.
func TestGrantInsideHostStateIsRefused(t *testing.T) {
	dir := t.TempDir()
	cacheDir := filepath.Join(dir, "cache")
	c, err := NewCache(cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	sessions := filepath.Join(dir, "sessions", "inner")
	if err := os.MkdirAll(sessions, 0o700); err != nil {
		t.Fatal(err)
	}
	h, err := New(Options{Registry: prompt.NewRegistry(nil), Cache: c, Logger: slog.New(slog.DiscardHandler),
		HostState: HostState{Dirs: []string{filepath.Dir(sessions)}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	for _, tc := range []struct{ grant, state string }{{cacheDir, cacheDir}, {sessions, filepath.Dir(sessions)}} {
		_, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: []byte(`{"tools":["readfile"]}`),
			Grants: &config.Grants{FS: []config.FSGrant{{Path: tc.grant, Mode: config.ModeRO}}}})
		if !errors.Is(err, ErrHostState) || !strings.Contains(err.Error(), tc.grant) || !strings.Contains(err.Error(), tc.state) {
			t.Errorf("grant %s: err %v, want ErrHostState naming it and %s", tc.grant, err, tc.state)
		}
	}
}

// The host never writes a command's saved output into its own state: a
// spill_dir there, named or reached through a symlink, is refused, and a
// directory swapped for a symlink to it after the check gets no file.
func TestSpillNeverLandsInHostState(t *testing.T) {
	home := t.TempDir()
	sessions := filepath.Join(home, "sessions")
	if err := os.MkdirAll(sessions, 0o700); err != nil {
		t.Fatal(err)
	}
	h, err := New(Options{Registry: prompt.NewRegistry(nil), Cache: sharedCache(t), Logger: slog.New(slog.DiscardHandler),
		HostState: HostState{Dirs: []string{sessions}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	loadEntry(t, h, "source: "+testkit(t)+`
config: {tools: [exec]}
grants:
  fs: [{path: workspace, mode: rw}]
  exec: {allowed: true, timeout: 5s, output_bytes: 16}
`)
	a := agent("a", "m")
	a.Cwd = home
	if err := os.Symlink("sessions", filepath.Join(home, "out")); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{sessions, filepath.Join(sessions, "sub"), filepath.Join(home, "out")} {
		r, err := h.CallTool(bg, a, "exec", cfg(t, hostfns.ExecRequest{Command: "seq 1 1000", SpillDir: dir}))
		if err != nil || !r.IsError || !strings.Contains(r.Text, "host's own state") {
			t.Errorf("spill_dir %s: %+v %v", dir, r, err)
		}
	}
	// Swapped after the check: the write is judged where it landed.
	real := filepath.Join(home, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	mounts := []fsjail.Mount{{HostPath: home, GuestPath: home}}
	holding := func(p string) string { return h.hostState.holding(p, home) }
	target, st, msg := dsh.SpillTargetFor(real, mounts, holding)
	if st != 0 {
		t.Fatalf("spillTargetFor: %v %s", st, msg)
	}
	os.Remove(real)
	if err := os.Symlink("sessions", real); err != nil {
		t.Fatal(err)
	}
	out, _ := dsh.NewSpillWriters(target, 4)
	out.Write([]byte("{\"type\":\"user/message\"} forged\n"))
	if out.Failed() == nil || !strings.Contains(out.Failed().Error(), "host's own state") {
		t.Errorf("a spill after the swap: failed %v", out.Failed())
	}
	ents, _ := os.ReadDir(sessions)
	if len(ents) != 0 {
		t.Errorf("the sessions directory holds %v", ents)
	}
}
