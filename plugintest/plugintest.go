// Package plugintest helps plugin authors test a plugin from Go: load a
// built module into a host of its own, call its tools, render the system
// prompt it contributes to, and run one turn of the real agent loop
// against a scripted model.
//
//	func TestMyPlugin(t *testing.T) {
//		wasm := plugintest.BuildGo(t, ".")           // or a path to any .wasm
//		h := plugintest.New(t)
//		h.Load(wasm, plugintest.Config(map[string]any{"greeting": "hi"}))
//		if got := h.Call("reverse", map[string]string{"text": "abc"}); got.Text != "cba" {
//			t.Errorf("reverse = %q", got.Text)
//		}
//		if !strings.Contains(h.Render(), "my section") { ... }
//	}
//
// Every helper fails the test (t.Fatal) on an error it does not return.
package plugintest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/agent"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/internal/plugintest"
	"github.com/dsh-wasm/dsh-wasm/internal/turntest"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

// Host is a plugin host for one test, with the built-in variables
// ({{model}}, {{cwd}}...) registered, and one test agent.
type Host struct {
	host  *plugin.Host
	t     testing.TB
	facts *prompt.AgentFacts
}

// New returns a host that is closed when the test ends. Plugin logs go to
// t.Log.
func New(t testing.TB) *Host {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := prompt.NewRegistry(logger)
	if _, err := agent.RegisterBuiltinVariables(reg); err != nil {
		t.Fatal(err)
	}
	h, err := plugin.New(plugin.Options{Registry: reg, Logger: logger, Cache: plugintest.SharedCache(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	cwd := t.TempDir()
	return &Host{host: h, t: t, facts: &prompt.AgentFacts{ID: "test-agent", Session: "test-session", Model: "test-model", Cwd: cwd}}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// Agent returns the facts of the test agent calls and renders are for.
// Its Cwd is a temporary directory, the "workspace" of fs grants.
func (h *Host) Agent() *prompt.AgentFacts { return h.facts }

// LoadOption adjusts a Load.
type LoadOption func(*loadSpec)

// loadSpec is what the options of a Load set.
type loadSpec struct{ plugin.Spec }

// Config sets the plugin's config object.
func Config(cfg map[string]any) LoadOption {
	return func(s *loadSpec) {
		b, err := json.Marshal(cfg)
		if err != nil {
			panic(fmt.Sprintf("plugintest.Config: %v", err))
		}
		s.Config = b
	}
}

// Grants sets the plugin's policy: what it may do (fs, exec, net, env)
// and its limits. Zero fields take the defaults the product applies, so a
// plugin is tested under the same bounds a deployment gives it.
func Grants(g config.Grants) LoadOption {
	return func(s *loadSpec) { s.Grants = &g }
}

// Name sets the plugin's name (the default derives it from the path).
func Name(n string) LoadOption { return func(s *loadSpec) { s.Name = n } }

// ABI names the plugin's ABI (dsh, hyper-mcp-v1, hyper-mcp-v2, mcp-run);
// the default detects it.
func ABI(abi string) LoadOption { return func(s *loadSpec) { s.ABI = abi } }

// Load loads the module at path and fails the test if the host refuses it.
func (h *Host) Load(path string, opts ...LoadOption) {
	h.t.Helper()
	spec := loadSpec{plugin.Spec{Source: path}}
	for _, o := range opts {
		o(&spec)
	}
	if _, err := h.host.Load(context.Background(), spec.Spec); err != nil {
		h.t.Fatalf("load %s: %v", path, err)
	}
}

// Call runs the tool called name with args (any JSON-encodable value,
// or json.RawMessage) for the test agent. A tool's own error is a result with IsError; a
// failed call (no such tool, a trap, the budget) fails the test.
func (h *Host) Call(name string, args any) tool.Result {
	h.t.Helper()
	r, err := h.CallErr(name, args)
	if err != nil {
		h.t.Fatalf("call %s: %v", name, err)
	}
	return r
}

// CallErr is Call that returns the call's failure instead.
func (h *Host) CallErr(name string, args any) (tool.Result, error) {
	h.t.Helper()
	b, err := encodeArgs(args)
	if err != nil {
		h.t.Fatalf("call %s: %v", name, err)
	}
	return h.host.CallTool(context.Background(), h.facts, name, b)
}

func encodeArgs(args any) ([]byte, error) {
	switch a := args.(type) {
	case nil:
		return []byte("{}"), nil
	case json.RawMessage:
		return a, nil
	case []byte:
		return a, nil
	case string:
		return []byte(a), nil
	}
	return json.Marshal(args)
}

// Render assembles the system prompt for the test agent and renders it
// strictly, as the agent loop does; a failure fails the test.
func (h *Host) Render() string {
	h.t.Helper()
	s, err := h.RenderErr()
	if err != nil {
		h.t.Fatalf("render: %v", err)
	}
	return s
}

// RenderErr is Render that returns the failure instead.
func (h *Host) RenderErr() (string, error) {
	a, err := h.host.Registry().Assemble(prompt.WithAgent(context.Background(), h.facts), prompt.AssembleContext{Agent: h.facts})
	if err != nil {
		return "", err
	}
	return prompt.Render(a)
}

// Turn is what one agent-loop turn showed.
type Turn struct {
	// System is the system prompt the model was sent.
	System string
	// Tools are the tool names the model was offered.
	Tools []string
	// Result is the tool's result as the model saw it; IsError marks an
	// error result.
	Result  string
	IsError bool
	// Text is the turn's final answer: "the tool said: " + Result.
	Text string
}

// Turn runs one turn of the real agent loop: a scripted model calls tool
// with args, then answers with what the tool said. It fails the test if
// the turn does not complete in two steps.
func (h *Host) Turn(tool string, args any) Turn {
	h.t.Helper()
	b, err := encodeArgs(args)
	if err != nil {
		h.t.Fatalf("turn %s: %v", tool, err)
	}
	var out Turn
	provider := &scripted.Tools{
		Calls:  []scripted.Call{{ID: "call-1", Name: tool, Arguments: string(b)}},
		Answer: scripted.Echo,
		Seen: func(step int, req *model.Request) {
			if step == 1 {
				out.System = req.System
				for _, t := range req.Tools {
					out.Tools = append(out.Tools, t.Name)
				}
			} else {
				out.Result, out.IsError, _ = scripted.LastResult(req)
			}
		},
	}
	res, _, err := turntest.Turn(context.Background(), h.t, h.host,
		agent.Options{ID: h.facts.ID, Model: h.facts.Model, Provider: provider}, h.facts.Cwd, "call "+tool)
	if err != nil || res.End.Kind != session.EndCompleted || res.Steps != 2 {
		h.t.Fatalf("turn calling %s: %+v, %v", tool, res, err)
	}
	out.Text = res.Text
	return out
}

// BuildGo builds the Go plugin in dir (a main package using the dsh guest
// SDK or go-pdk) for wasip1 as a c-shared library, into the test's temp
// dir, and returns the .wasm path. It fails the test if go is missing or
// the build fails.
func BuildGo(t testing.TB, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("plugintest.BuildGo: %v", err)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(filepath.Clean(dir))+".wasm")
	abs, err := filepath.Abs(out)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goBin, "build", "-buildmode=c-shared", "-trimpath", "-o", abs, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("plugintest.BuildGo %s: %v\n%s", dir, err, b)
	}
	return abs
}
