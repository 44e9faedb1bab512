package guests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/agent"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/internal/replay"
	"github.com/dsh-wasm/dsh-wasm/internal/testcorpus"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/session/filestore"
)

// hookRig is an agent with tool-bash and one hook bridge loaded.
type hookRig struct {
	a    *agent.Agent
	h    *plugin.Host
	sess *session.Session
	ws   string
	logs *bytes.Buffer
}

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

// hookGrants are a bridge's grants: exec in the workspace, the hook
// records, and the directory holding the hook file (read-only).
func hookGrants(confDir string, exec config.ExecGrant) config.Grants {
	exec.Allowed = true
	g := config.Grants{FS: []config.FSGrant{{Path: config.Workspace, Mode: config.ModeRW}},
		Exec: exec, SessionEvents: []string{"hook/invoked", "hook/result"},
		Events: []string{"agent/prompt-submit", "tools/pre-execute", "tools/post-execute", "agent/turn-stopping"}}
	if confDir != "" {
		g.FS = append(g.FS, config.FSGrant{Path: confDir, Mode: config.ModeRO})
	}
	return g
}

// newHookRig loads tool-bash and builtin:bridge (with cfg as its config
// and grants g) and makes an agent over prov in a fresh workspace, seeded
// from seed when it is not empty.
func newHookRig(t *testing.T, bridge, cfg string, g config.Grants, prov model.Provider, seed string, opts agent.Options) *hookRig {
	t.Helper()
	r, err := openHookRig(t, bridge, cfg, g, prov, seed, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// openHookRig is newHookRig, returning the error of the agent's open
// (agent.New) instead of failing the test on it; the rig then has no
// agent.
func openHookRig(t *testing.T, bridge, cfg string, g config.Grants, prov model.Provider, seed string, opts agent.Options) (*hookRig, error) {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if seed != "" {
		if err := os.CopyFS(ws, os.DirFS(seed)); err != nil {
			t.Fatal(err)
		}
	}
	reg := prompt.NewRegistry(nil)
	if _, err := agent.RegisterBuiltinVariables(reg); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	h, err := plugin.New(plugin.Options{Registry: reg, Builtins: All(), Cache: testCache,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(bg) })
	bg2 := workspaceRW()
	bg2.Exec.Allowed = true
	for _, e := range []struct {
		name string
		g    config.Grants
		cfg  string
	}{{"tool-bash", bg2, ""}, {bridge, g, cfg}} {
		spec, err := plugin.SpecFromEntry("", config.Entry{Source: "builtin:" + e.name, Grants: e.g})
		if err != nil {
			t.Fatal(err)
		}
		if e.cfg != "" {
			spec.Config = json.RawMessage(e.cfg)
		}
		if _, err := h.Load(bg, spec); err != nil {
			t.Fatalf("load %s: %v", e.name, err)
		}
	}
	sess, err := filestore.New(t.TempDir(), filestore.Options{}).Create(session.Header{Cwd: ws})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	opts.Session, opts.Provider, opts.Registry, opts.Tools = sess, prov, reg, h
	opts.Model, opts.Logger = "deepseek-v4-flash", discardLogger()
	opts.Bus = h.Bus()
	r := &hookRig{h: h, sess: sess, ws: ws, logs: &logs.Buffer}
	a, err := agent.New(bg, opts)
	if err != nil {
		return r, err
	}
	t.Cleanup(func() { a.Close(bg) })
	r.a = a
	return r, nil
}

func (r *hookRig) prompt(t *testing.T, text string) agent.TurnResult {
	t.Helper()
	if err := r.a.Enqueue(session.UserMessage{Content: session.TextContent(text), Source: session.Source{Kind: session.SourceUser}}); err != nil {
		t.Fatal(err)
	}
	res, err := r.a.RunTurn(bg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestHookScenarios replays the 13 recorded hook scenarios through the
// agent loop with the real tool-bash and hook bridge guests, each hook
// file as the scenario seeds it, and checks that the loop records what
// the reference recorded: the same events in the same order, hook/*
// included, with the same hook decisions, exit codes and reasons, the
// same tool results, context, steering and prompt/blocked messages, and
// the same turn ends.
func TestHookScenarios(t *testing.T) {
	dir := filepath.Join(testcorpus.Dir(t), "hook-sessions")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n++
		t.Run(e.Name(), func(t *testing.T) { replayHookScenario(t, filepath.Join(dir, e.Name())) })
	}
	if n != 13 {
		t.Errorf("%d hook scenarios, want 13", n)
	}
}

func replayHookScenario(t *testing.T, scenario string) {
	recPath := filepath.Join(scenario, "session.jsonl")
	rec, err := session.ReadFile(recPath)
	if err != nil {
		t.Fatal(err)
	}
	bridge, file := "hooks-claude", "hooks.json"
	if _, err := os.Stat(filepath.Join(scenario, "workspace", "codex-hooks.json")); err == nil {
		bridge, file = "hooks-codex", "codex-hooks.json"
	}
	// The hook file lives in a directory of its own, granted read-only.
	confDir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(scenario, "workspace", file))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, file), b, 0o644); err != nil {
		t.Fatal(err)
	}
	prov, err := replay.Open(recPath, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`{"config_path":%q}`, filepath.Join(confDir, file))
	r := newHookRig(t, bridge, cfg, hookGrants(confDir, config.ExecGrant{}), prov, filepath.Join(scenario, "workspace"), agent.Options{})

	var input struct {
		Steps []struct{ Op, Text string }
	}
	b, err = os.ReadFile(filepath.Join(scenario, "input.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &input); err != nil {
		t.Fatal(err)
	}
	for _, s := range input.Steps {
		if s.Op == "prompt" {
			r.prompt(t, s.Text)
		}
	}
	want, got := hookView(t, rec.Events), hookView(t, r.sess.Events())
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events differ\n got:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// hookView renders the events a hook scenario is checked on, each with
// the data that must match (volatile fields dropped).
func hookView(t *testing.T, events []session.Event) []string {
	t.Helper()
	var out []string
	for _, e := range events {
		var line string
		switch e.Type {
		case session.TypeAssistantChunk, session.TypeStepStart, session.TypeStepEnd:
			continue
		case session.TypeHookInvoked:
			p, err := session.As[session.HookInvoked](e)
			if err != nil {
				t.Fatal(err)
			}
			line = fmt.Sprintf("%+v", p)
		case session.TypeHookResult:
			p, err := session.As[session.HookResult](e)
			if err != nil {
				t.Fatal(err)
			}
			p.DurationMs = 0
			exit := "none"
			if p.ExitCode != nil {
				exit = fmt.Sprint(*p.ExitCode)
			}
			p.ExitCode = nil
			line = fmt.Sprintf("%+v exit=%s", p, exit)
		case session.TypeToolResult:
			p, err := session.As[session.ToolResult](e)
			if err != nil {
				t.Fatal(err)
			}
			// Our bash words its results its own way; a hook's verdict
			// is exact.
			text := p.Content.Text()
			if !p.IsError {
				text = strings.TrimSpace(text)
			}
			line = fmt.Sprintf("%s error=%v %q", p.CallID, p.IsError, text)
		case session.TypeToolCall:
			p, err := session.As[session.ToolCall](e)
			if err != nil {
				t.Fatal(err)
			}
			line = fmt.Sprintf("%s %s %s", p.CallID, p.Name, p.Arguments)
		case session.TypeAssistantMessage:
			p, err := session.As[session.AssistantMessage](e)
			if err != nil {
				t.Fatal(err)
			}
			line = fmt.Sprintf("step %d %q", p.Step, session.Parts(p.Content).Text())
		default:
			line = string(e.Data)
		}
		out = append(out, e.Type+" "+line)
	}
	return out
}

// scriptedBash is a model that calls bash with each command in turn,
// then answers "done".
func scriptedBash(commands ...string) model.Provider {
	m := &scripted.Tools{}
	for _, c := range commands {
		args, _ := json.Marshal(map[string]string{"command": c})
		m.Calls = append(m.Calls, scripted.Call{Name: "bash", Arguments: string(args)})
	}
	return m
}

// writeHooks writes a hook file and returns its directory and path.
func writeHooks(t *testing.T, name, body string) (dir, file string) {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(dir, name)
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

func eventsOf(t *testing.T, s *session.Session, typ string) []session.Event {
	t.Helper()
	var out []session.Event
	for _, e := range s.Events() {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func toolResults(t *testing.T, s *session.Session) []session.ToolResult {
	t.Helper()
	_, rs := toolEvents(t, s.Events())
	return rs
}

// TestHookTimeoutKillsAndTurnGoesOn: a hook that hangs is killed at its
// own timeout, recorded as a non-blocking failure, and the call runs.
func TestHookTimeoutKillsAndTurnGoesOn(t *testing.T) {
	for _, d := range []struct{ bridge, file, timeout string }{
		{"hooks-claude", "hooks.json", `"timeout": 1`},
		{"hooks-codex", "codex-hooks.json", `"timeoutSec": 1`},
	} {
		t.Run(d.bridge, func(t *testing.T) {
			dir, file := writeHooks(t, d.file, `{"hooks":{"PreToolUse":[{"matcher":"bash","hooks":[{"type":"command","command":"sleep 60; exit 2",`+d.timeout+`}]}]}}`)
			r := newHookRig(t, d.bridge, fmt.Sprintf(`{"config_path":%q}`, file), hookGrants(dir, config.ExecGrant{}), scriptedBash("echo RAN"), "", agent.Options{})
			start := time.Now()
			res := r.prompt(t, "go")
			if el := time.Since(start); el > 30*time.Second {
				t.Errorf("the turn took %v: the hook was not killed at its timeout", el)
			}
			if res.End.Kind != session.EndCompleted {
				t.Fatalf("turn ended %+v", res.End)
			}
			rs := toolResults(t, r.sess)
			if len(rs) != 1 || rs[0].IsError || !strings.Contains(rs[0].Content.Text(), "RAN") {
				t.Fatalf("the call did not run after the hook timed out: %+v", rs)
			}
			hr := eventsOf(t, r.sess, session.TypeHookResult)
			if len(hr) != 1 {
				t.Fatalf("%d hook results", len(hr))
			}
			p, _ := session.As[session.HookResult](hr[0])
			if p.Decision != "pass" || p.ExitCode != nil || p.StderrSummary != "" {
				t.Errorf("hook result %+v, want a pass with no exit code and no stderr", p)
			}
		})
	}
}

// TestHookHugeOutputIsCapped: a hook printing 10 MB to stdout and stderr
// is cut by the exec grant's output cap and the summary cap: what reaches
// the session and the model stays small.
func TestHookHugeOutputIsCapped(t *testing.T) {
	// Codex: its plain stdout is context (Claude Code's is not).
	dir, file := writeHooks(t, "codex-hooks.json", `{"hooks":{
	  "PostToolUse":[{"matcher":"bash","hooks":[{"type":"command","command":"head -c 10000000 /dev/zero | tr '\\0' x >&2; exit 2"}]}],
	  "UserPromptSubmit":[{"hooks":[{"type":"command","command":"head -c 10000000 /dev/zero | tr '\\0' y"}]}]}}`)
	r := newHookRig(t, "hooks-codex", fmt.Sprintf(`{"config_path":%q}`, file),
		hookGrants(dir, config.ExecGrant{OutputBytes: 64 << 10}), scriptedBash("echo hi"), "", agent.Options{})
	res := r.prompt(t, "go")
	if res.End.Kind != session.EndCompleted {
		t.Fatalf("turn ended %+v", res.End)
	}
	rs := toolResults(t, r.sess)
	if len(rs) != 1 || !rs[0].IsError || !strings.HasPrefix(rs[0].Content.Text(), "xxxx") {
		t.Fatalf("results %+v", rs)
	}
	if n := len(rs[0].Content.Text()); n > 10_010 {
		t.Errorf("the blocked result carries %d bytes of the hook's stderr, want at most the 10000-character cap", n)
	}
	ctxs := eventsOf(t, r.sess, session.TypeContextMessage)
	if len(ctxs) != 1 || len(ctxs[0].Data) > 11_000 {
		t.Fatalf("context: %d events, first %d bytes", len(ctxs), len(ctxs[0].Data))
	}
	for _, e := range eventsOf(t, r.sess, session.TypeHookResult) {
		if len(e.Data) > 1000 {
			t.Errorf("hook/result of %d bytes: the stderr summary is not capped", len(e.Data))
		}
	}
}

// TestHookNoConfig: with no hook file the bridge subscribes to nothing.
func TestHookNoConfig(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, bridge := range []string{"hooks-claude", "hooks-codex"} {
		t.Run(bridge, func(t *testing.T) {
			r := newHookRig(t, bridge, fmt.Sprintf(`{"config_path":%q}`, filepath.Join(dir, "hooks.json")), hookGrants(dir, config.ExecGrant{}), scriptedBash("echo RAN"), "", agent.Options{})
			res := r.prompt(t, "go")
			if res.End.Kind != session.EndCompleted || len(eventsOf(t, r.sess, session.TypeHookInvoked)) != 0 {
				t.Fatalf("turn %+v with hooks run", res.End)
			}
		})
	}
}

// TestHookClaudeJSONDeny: a JSON permissionDecision deny refuses the call
// with its reason; the hook reads Claude Code's JSON on stdin.
func TestHookClaudeJSONDeny(t *testing.T) {
	dir, file := writeHooks(t, "hooks.json", `{"hooks":{"PreToolUse":[{"matcher":"bash","hooks":[{"type":"command",
	  "command":"cat > stdin.json; echo '{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"deny\",\"permissionDecisionReason\":\"no shells\"}}'"}]}]}}`)
	r := newHookRig(t, "hooks-claude", fmt.Sprintf(`{"config_path":%q}`, file), hookGrants(dir, config.ExecGrant{}), scriptedBash("echo RAN"), "", agent.Options{})
	r.prompt(t, "go")
	rs := toolResults(t, r.sess)
	if len(rs) != 1 || !rs[0].IsError || rs[0].Content.Text() != "Error: no shells" {
		t.Fatalf("results %+v", rs)
	}
	b, err := os.ReadFile(filepath.Join(r.ws, "stdin.json"))
	if err != nil {
		t.Fatal(err)
	}
	var in map[string]any
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatalf("stdin %q: %v", b, err)
	}
	if in["hook_event_name"] != "PreToolUse" || in["tool_name"] != "bash" || in["cwd"] != r.ws ||
		in["tool_input"].(map[string]any)["command"] != "echo RAN" || in["session_id"] != r.sess.Header().ID {
		t.Errorf("stdin %s", b)
	}
}

// TestHookCodexStdin: a Codex hook reads Codex's snake_case input, and a
// Codex regular-expression matcher selects our tool name.
func TestHookCodexStdin(t *testing.T) {
	dir, file := writeHooks(t, "codex-hooks.json", `{"hooks":{"PostToolUse":[{"matcher":"^ba","hooks":[{"type":"command","command":"cat > stdin.json"}]}]}}`)
	r := newHookRig(t, "hooks-codex", fmt.Sprintf(`{"config_path":%q,"model":"gpt-test"}`, file), hookGrants(dir, config.ExecGrant{}), scriptedBash("echo RAN"), "", agent.Options{})
	r.prompt(t, "go")
	b, err := os.ReadFile(filepath.Join(r.ws, "stdin.json"))
	if err != nil {
		t.Fatal(err)
	}
	var in map[string]any
	if err := json.Unmarshal(b, &in); err != nil || bytes.HasSuffix(b, []byte("\n")) {
		t.Fatalf("stdin %q: %v (Codex sends no trailing newline)", b, err)
	}
	if in["hook_event_name"] != "PostToolUse" || in["model"] != "gpt-test" || in["turn_id"] != "1" || in["tool_name"] != "bash" ||
		in["tool_input"].(map[string]any)["command"] != "echo RAN" || !strings.Contains(in["tool_response"].(string), "RAN") ||
		in["transcript_path"] != nil || in["permission_mode"] != "default" || in["cwd"] != r.ws {
		t.Errorf("stdin %s", b)
	}
}
