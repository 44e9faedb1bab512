package guests

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

// toolEnv is one built-in tool plugin loaded in a real host, called for
// one agent whose working directory is dir.
type toolEnv struct {
	h     *plugin.Host
	facts *prompt.AgentFacts
	dir   string
	ctx   context.Context
}

// loadTool loads builtin:name with the grants and config given, for an
// agent working in a fresh directory. limits, when set, bounds the
// plugin's memory.
func loadTool(t testing.TB, name string, g config.Grants, cfg string, memory config.ByteSize) *toolEnv {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if memory != 0 {
		g.Limits.Memory = memory
	}
	spec, err := plugin.SpecFromEntry("", config.Entry{Source: "builtin:" + name, Grants: g})
	if err != nil {
		t.Fatal(err)
	}
	if cfg != "" {
		spec.Config = json.RawMessage(cfg)
	}
	h, err := plugin.New(plugin.Options{Registry: prompt.NewRegistry(nil), Builtins: All(), Cache: testCache, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(bg) })
	if _, err := h.Load(bg, spec); err != nil {
		t.Fatalf("load builtin:%s: %v", name, err)
	}
	facts := &prompt.AgentFacts{ID: "a1", Session: "s1", Model: "m", Cwd: dir}
	return &toolEnv{h: h, facts: facts, dir: dir, ctx: prompt.WithAgent(bg, facts)}
}

func workspaceRW() config.Grants {
	return config.Grants{FS: []config.FSGrant{{Path: config.Workspace, Mode: config.ModeRW}}}
}

// call runs a tool; a failed call (not an error result) fails the test.
func (e *toolEnv) call(t testing.TB, name, args string) tool.Result {
	t.Helper()
	r, err := e.h.CallTool(e.ctx, e.facts, name, []byte(args))
	if err != nil {
		t.Fatalf("%s %s: %v", name, args, err)
	}
	return r
}

// ok runs a tool that must succeed and returns its text.
func (e *toolEnv) ok(t testing.TB, name, args string) string {
	t.Helper()
	r := e.call(t, name, args)
	if r.IsError {
		t.Fatalf("%s %s: error result %q", name, args, r.Text)
	}
	return r.Text
}

// fails runs a tool that must give an error result containing each of want.
func (e *toolEnv) fails(t testing.TB, name, args string, want ...string) string {
	t.Helper()
	r := e.call(t, name, args)
	if !r.IsError {
		t.Fatalf("%s %s: %q, want an error result", name, args, r.Text)
	}
	for _, w := range want {
		if !strings.Contains(r.Text, w) {
			t.Fatalf("%s %s: error %q lacks %q", name, args, r.Text, w)
		}
	}
	return r.Text
}

func (e *toolEnv) write(t testing.TB, rel, content string) string {
	t.Helper()
	p := filepath.Join(e.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func (e *toolEnv) read(t testing.TB, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func jsonArgs(kv ...any) string {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// loadToolErr loads builtin:name and returns the load's error.
func loadToolErr(t testing.TB, name string, g config.Grants, cfg string) error {
	t.Helper()
	spec, err := plugin.SpecFromEntry("", config.Entry{Source: "builtin:" + name, Grants: g})
	if err != nil {
		t.Fatal(err)
	}
	spec.Config = json.RawMessage(cfg)
	h, err := plugin.New(plugin.Options{Registry: prompt.NewRegistry(nil), Builtins: All(), Cache: testCache, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(bg)
	_, err = h.Load(bg, spec)
	return err
}
