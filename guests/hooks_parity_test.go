package guests

// Hooks as the reference's bridges run them (issue 28, item 4): one test
// per difference aligned. The differences kept on purpose are in
// docs/HOOKS.md, "Where we differ from the reference".

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/agent"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// parityRig is a rig over the hook file body (bridge's dialect), the
// bridge's config keys extra (JSON members, may be empty), the model
// calling bash with commands, and agent options opts.
func parityRig(t *testing.T, bridge, body, extra string, opts agent.Options, commands ...string) *hookRig {
	t.Helper()
	name := "hooks.json"
	if bridge == "hooks-codex" {
		name = "codex-hooks.json"
	}
	dir, file := writeHooks(t, name, body)
	cfg := fmt.Sprintf(`{"config_path":%q%s}`, file, extra)
	return newHookRig(t, bridge, cfg, hookGrants(dir, config.ExecGrant{}), scriptedBash(commands...), "", opts)
}

// preTool is a hook file with one PreToolUse group for bash running
// commands.
func preTool(commands ...string) string {
	var hs []string
	for _, c := range commands {
		hs = append(hs, `{"type":"command","command":`+mustJSON(c)+`}`)
	}
	return `{"hooks":{"PreToolUse":[{"matcher":"bash","hooks":[` + strings.Join(hs, ",") + `]}]}}`
}

// askHook prints a PreToolUse ask, with reason when it is not empty.
func askHook(reason string) string {
	r := ""
	if reason != "" {
		r = `,"permissionDecisionReason":` + mustJSON(reason)
	}
	return `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask"` + r + `}}'`
}

// recordAsks is a Permission that records what it is asked and allows.
func recordAsks(asked *[]agent.PermissionRequest) agent.PermissionFunc {
	return func(_ context.Context, req agent.PermissionRequest) (bool, error) {
		*asked = append(*asked, req)
		return true, nil
	}
}

// stdinOf reads the JSON a hook saved in the workspace.
func stdinOf(t *testing.T, r *hookRig, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.ws, name))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %q: %v", name, b, err)
	}
	return m
}

func contextTexts(t *testing.T, r *hookRig) []string {
	t.Helper()
	var out []string
	for _, e := range eventsOf(t, r.sess, session.TypeContextMessage) {
		p, err := session.As[session.ContextMessage](e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Content.Text())
	}
	return out
}

// TestHookClaudeAskFailsTheCall: a Claude Code ask fails the call with the
// hook's reason and nobody is asked, even with a client that could answer;
// an ask with no reason fails with the tools layer's words, not a reason
// the bridge makes up.
func TestHookClaudeAskFailsTheCall(t *testing.T) {
	for _, c := range []struct{ reason, want string }{
		{"bash needs a human", "Error: bash needs a human"},
		{"", `Error: tool "bash" requires approval (not yet supported)`},
	} {
		var asked []agent.PermissionRequest
		r := parityRig(t, "hooks-claude", preTool(askHook(c.reason)), "", agent.Options{Permission: recordAsks(&asked)}, "echo RAN")
		r.prompt(t, "go")
		rs := toolResults(t, r.sess)
		if len(asked) != 0 {
			t.Errorf("reason %q: the client was asked: %+v", c.reason, asked)
		}
		if len(rs) != 1 || !rs[0].IsError || rs[0].Content.Text() != c.want {
			t.Errorf("reason %q: results %+v, want %q", c.reason, rs, c.want)
		}
	}
}

// TestHookClaudeAskClientOptIn: with ask_client the user is asked, with
// the hook's reason, and an allowed call runs.
func TestHookClaudeAskClientOptIn(t *testing.T) {
	var asked []agent.PermissionRequest
	r := parityRig(t, "hooks-claude", preTool(askHook("confirm bash")), `,"ask_client":true`, agent.Options{Permission: recordAsks(&asked)}, "echo RAN")
	r.prompt(t, "go")
	rs := toolResults(t, r.sess)
	if len(asked) != 1 || asked[0].Reason != "confirm bash" || asked[0].Name != "bash" {
		t.Fatalf("asked %+v", asked)
	}
	if len(rs) != 1 || rs[0].IsError || !strings.Contains(rs[0].Content.Text(), "RAN") {
		t.Fatalf("an allowed call did not run: %+v", rs)
	}
}

// TestHookCodexAskIsNoDecision: a Codex hook only blocks; its ask neither
// asks nor fails the call (it is still recorded as the hook said it).
func TestHookCodexAskIsNoDecision(t *testing.T) {
	var asked []agent.PermissionRequest
	r := parityRig(t, "hooks-codex", preTool(askHook("confirm bash")), "", agent.Options{Permission: recordAsks(&asked)}, "echo RAN")
	r.prompt(t, "go")
	rs := toolResults(t, r.sess)
	if len(asked) != 0 || len(rs) != 1 || rs[0].IsError || !strings.Contains(rs[0].Content.Text(), "RAN") {
		t.Fatalf("asked %+v, results %+v: want the call run", asked, rs)
	}
	hr := eventsOf(t, r.sess, session.TypeHookResult)
	if p, _ := session.As[session.HookResult](hr[0]); len(hr) != 1 || p.Decision != "ask" {
		t.Errorf("hook results %+v", hr)
	}
	for _, extra := range []string{`,"ask_client":true`, `,"project_dir":"/p"`} {
		if err := loadBridge(t, "hooks-codex", extra); err == nil || !strings.Contains(err.Error(), "Claude Code's") {
			t.Errorf("codex with %s loaded: %v", extra, err)
		}
	}
}

// loadBridge loads bridge with an empty hook file and the extra config
// keys, returning the load's error.
func loadBridge(t *testing.T, bridge, extra string) error {
	t.Helper()
	dir, file := writeHooks(t, "h.json", `{"hooks":{}}`)
	h, err := plugin.New(plugin.Options{Registry: prompt.NewRegistry(nil), Builtins: All(), Cache: testCache, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(bg)
	spec, err := plugin.SpecFromEntry("", config.Entry{Source: "builtin:" + bridge, Grants: hookGrants(dir, config.ExecGrant{})})
	if err != nil {
		t.Fatal(err)
	}
	spec.Config = json.RawMessage(fmt.Sprintf(`{"config_path":%q%s}`, file, extra))
	_, err = h.Load(bg, spec)
	return err
}

// TestHookPlainStdoutContext: plain stdout of a UserPromptSubmit hook is
// context for Codex only; for Claude Code it is nothing. Stdout that
// looks like JSON and is not is never context.
func TestHookPlainStdoutContext(t *testing.T) {
	body := `{"hooks":{"UserPromptSubmit":[{"hooks":[{"type":"command","command":"echo plain words"},{"type":"command","command":"echo '{not json'"}]}]}}`
	for _, c := range []struct {
		bridge string
		want   []string
	}{{"hooks-claude", nil}, {"hooks-codex", []string{"plain words"}}} {
		r := parityRig(t, c.bridge, body, "", agent.Options{}, "echo RAN")
		r.prompt(t, "go")
		if got := contextTexts(t, r); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: context %q, want %q", c.bridge, got, c.want)
		}
	}
}

// TestHookDenyReasonsJoinedWithBlankLine: the reasons of several hooks
// that deny one call are joined with a blank line.
func TestHookDenyReasonsJoinedWithBlankLine(t *testing.T) {
	for _, bridge := range []string{"hooks-claude", "hooks-codex"} {
		r := parityRig(t, bridge, preTool("echo first >&2; exit 2", "echo second >&2; exit 2"), "", agent.Options{}, "echo RAN")
		r.prompt(t, "go")
		rs := toolResults(t, r.sess)
		if len(rs) != 1 || rs[0].Content.Text() != "Error: first\n\nsecond" {
			t.Errorf("%s: results %+v", bridge, rs)
		}
	}
}

// TestHookMatchersExact: Claude Code's capitalised names select none of
// our tools (the reference matches exactly), and a matcher on
// UserPromptSubmit or Stop is tested against the empty string, as the
// reference does: one naming a tool never fires there, and "*" or no
// matcher does.
func TestHookMatchersExact(t *testing.T) {
	body := `{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"echo no >&2; exit 2"}]},
	  {"matcher":"^Bash$","hooks":[{"type":"command","command":"echo no >&2; exit 2"}]}],
	  "UserPromptSubmit":[{"matcher":"bash","hooks":[{"type":"command","command":"touch prompt-named"}]},
	    {"matcher":"*","hooks":[{"type":"command","command":"touch prompt-ran"}]}],
	  "Stop":[{"matcher":"bash","hooks":[{"type":"command","command":"touch stop-named"}]},
	    {"hooks":[{"type":"command","command":"touch stop-ran"}]}]}}`
	r := parityRig(t, "hooks-claude", body, "", agent.Options{}, "echo RAN")
	r.prompt(t, "go")
	rs := toolResults(t, r.sess)
	if len(rs) != 1 || rs[0].IsError {
		t.Errorf("a Bash matcher selected bash: %+v", rs)
	}
	for _, f := range []string{"prompt-ran", "stop-ran"} {
		if _, err := os.Stat(filepath.Join(r.ws, f)); err != nil {
			t.Errorf("the hook that matches everything did not run: %v", err)
		}
	}
	for _, f := range []string{"prompt-named", "stop-named"} {
		if _, err := os.Stat(filepath.Join(r.ws, f)); err == nil {
			t.Errorf("%s: a matcher naming a tool fired at a point that has none", f)
		}
	}
}

// TestHookPayloadsAsTheReference: Claude Code's PostToolUse tool_response
// is the result's text, and its Stop input has no last_assistant_message;
// Codex's Stop input has it null.
func TestHookPayloadsAsTheReference(t *testing.T) {
	body := `{"hooks":{"PostToolUse":[{"matcher":"bash","hooks":[{"type":"command","command":"cat > post.json"}]}],
	  "Stop":[{"hooks":[{"type":"command","command":"cat > stop.json"}]}]}}`
	r := parityRig(t, "hooks-claude", body, "", agent.Options{}, "echo RAN")
	r.prompt(t, "go")
	post := stdinOf(t, r, "post.json")
	if s, ok := post["tool_response"].(string); !ok || !strings.Contains(s, "RAN") {
		t.Errorf("claude tool_response %#v, want the result text", post["tool_response"])
	}
	stop := stdinOf(t, r, "stop.json")
	if _, ok := stop["last_assistant_message"]; ok || stop["stop_hook_active"] != false || stop["hook_event_name"] != "Stop" {
		t.Errorf("claude Stop input %v", stop)
	}
	r = parityRig(t, "hooks-codex", body, "", agent.Options{}, "echo RAN")
	r.prompt(t, "go")
	stop = stdinOf(t, r, "stop.json")
	if v, ok := stop["last_assistant_message"]; !ok || v != nil || stop["turn_id"] != "1" {
		t.Errorf("codex Stop input %v", stop)
	}
}

// TestHookClaudeProjectDir: a Claude Code hook has CLAUDE_PROJECT_DIR in
// its environment (the session's cwd, or project_dir), and project_dir
// and plugin_root are substituted in commands; a Codex hook has neither.
func TestHookClaudeProjectDir(t *testing.T) {
	body := preTool(`printf '%s|%s|%s' "$CLAUDE_PROJECT_DIR" '${CLAUDE_PROJECT_DIR}' '${CLAUDE_PLUGIN_ROOT}' > env.txt`)
	read := func(r *hookRig) string {
		b, err := os.ReadFile(filepath.Join(r.ws, "env.txt"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	r := parityRig(t, "hooks-claude", body, "", agent.Options{}, "echo RAN")
	r.prompt(t, "go")
	if got, want := read(r), r.ws+"|${CLAUDE_PROJECT_DIR}|${CLAUDE_PLUGIN_ROOT}"; got != want {
		t.Errorf("no settings: %q, want %q", got, want)
	}
	r = parityRig(t, "hooks-claude", body, `,"project_dir":"/proj","plugin_root":"/plug"`, agent.Options{}, "echo RAN")
	r.prompt(t, "go")
	if got, want := read(r), "/proj|/proj|/plug"; got != want {
		t.Errorf("with project_dir and plugin_root: %q, want %q", got, want)
	}
	r = parityRig(t, "hooks-codex", body, "", agent.Options{}, "echo RAN")
	r.prompt(t, "go")
	if got, want := read(r), "|${CLAUDE_PROJECT_DIR}|${CLAUDE_PLUGIN_ROOT}"; got != want {
		t.Errorf("codex: %q, want %q", got, want)
	}
}

// TestHookSessionStart: SessionStart runs as the agent opens, with its
// source, and the context it gives reaches the model with the first
// prompt (Claude Code: structured; Codex: plain stdout too); a matcher
// that names another source does not run.
func TestHookSessionStart(t *testing.T) {
	for _, c := range []struct{ bridge, hook string }{
		{"hooks-claude", `cat > start.json; echo '{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"the repo uses tabs"}}'`},
		{"hooks-codex", `cat > start.json; echo the repo uses tabs`},
	} {
		body := `{"hooks":{"SessionStart":[{"matcher":"startup","hooks":[{"type":"command","command":` + mustJSON(c.hook) + `}]},
		  {"matcher":"resume","hooks":[{"type":"command","command":"touch resumed"}]}]}}`
		r := parityRig(t, c.bridge, body, "", agent.Options{}, "echo RAN")
		in := stdinOf(t, r, "start.json")
		if in["hook_event_name"] != "SessionStart" || in["source"] != "startup" || in["cwd"] != r.ws {
			t.Errorf("%s: SessionStart input %v", c.bridge, in)
		}
		if _, ok := in["turn_id"]; ok {
			t.Errorf("%s: SessionStart input has a turn_id: %v", c.bridge, in)
		}
		r.prompt(t, "go")
		r.prompt(t, "again")
		if got := contextTexts(t, r); len(got) != 1 || got[0] != "the repo uses tabs" {
			t.Errorf("%s: context %q, want the start hook's, once", c.bridge, got)
		}
		if _, err := os.Stat(filepath.Join(r.ws, "resumed")); err == nil {
			t.Errorf("%s: the resume group ran at startup", c.bridge)
		}
	}
}

// TestHookSubagentStartStop: a subagent's agent runs SubagentStart as it
// opens (after SessionStart), whose context reaches its first prompt, and
// SubagentStop as it ends; the matcher is tested against the agent type
// general-purpose.
func TestHookSubagentStartStop(t *testing.T) {
	body := `{"hooks":{
	  "SubagentStart":[{"matcher":"general-purpose","hooks":[{"type":"command","command":"cat > sub-start.json; echo '{\"hookSpecificOutput\":{\"hookEventName\":\"SubagentStart\",\"additionalContext\":\"you are a child\"}}'"}]},
	    {"matcher":"code-reviewer","hooks":[{"type":"command","command":"touch reviewer"}]}],
	  "SubagentStop":[{"hooks":[{"type":"command","command":"cat > sub-stop.json"}]}]}}`
	r := parityRig(t, "hooks-claude", body, "", agent.Options{ID: "child-1", Depth: 1, Parent: "parent-1"}, "echo RAN")
	in := stdinOf(t, r, "sub-start.json")
	if in["hook_event_name"] != "SubagentStart" || in["agent_id"] != "child-1" || in["agent_type"] != "general-purpose" {
		t.Errorf("SubagentStart input %v", in)
	}
	r.prompt(t, "go")
	if got := contextTexts(t, r); len(got) != 1 || got[0] != "you are a child" {
		t.Errorf("context %q", got)
	}
	r.a.Close(bg)
	out := stdinOf(t, r, "sub-stop.json")
	if out["hook_event_name"] != "SubagentStop" || out["agent_id"] != "child-1" || out["stop_hook_active"] != false {
		t.Errorf("SubagentStop input %v", out)
	}
	if _, err := os.Stat(filepath.Join(r.ws, "reviewer")); err == nil {
		t.Error("a code-reviewer matcher ran for a general-purpose subagent")
	}
	// A top-level agent runs neither.
	r = parityRig(t, "hooks-claude", body, "", agent.Options{}, "echo RAN")
	r.prompt(t, "go")
	r.a.Close(bg)
	for _, f := range []string{"sub-start.json", "sub-stop.json"} {
		if _, err := os.Stat(filepath.Join(r.ws, f)); err == nil {
			t.Errorf("a top-level agent ran %s", f)
		}
	}
}

// TestHookTimedOutRecordedWithoutExitCode: a hook killed at its timeout is
// recorded with no exitCode and only the stderr it wrote.
func TestHookTimedOutRecordedWithoutExitCode(t *testing.T) {
	r := parityRig(t, "hooks-claude", `{"hooks":{"PreToolUse":[{"matcher":"bash","hooks":[{"type":"command","command":"echo started >&2; sleep 60","timeout":1}]}]}}`, "", agent.Options{}, "echo RAN")
	r.prompt(t, "go")
	hr := eventsOf(t, r.sess, session.TypeHookResult)
	if len(hr) != 1 {
		t.Fatalf("%d hook results", len(hr))
	}
	var raw map[string]any
	if err := json.Unmarshal(hr[0].Data, &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["exitCode"]; ok || raw["stderrSummary"] != "started" || raw["decision"] != "pass" {
		t.Errorf("hook/result %s, want no exitCode and the hook's own stderr", hr[0].Data)
	}
}

// TestHookDefaultTimeoutIsTenMinutes: a hook that sets no timeout asks
// the exec grant for ten minutes, the reference's default: under a
// max_timeout just short of that it cannot start (a non-blocking error,
// so the call runs), and under ten minutes it runs and denies.
func TestHookDefaultTimeoutIsTenMinutes(t *testing.T) {
	for _, c := range []struct {
		max    time.Duration
		denied bool
	}{{599 * time.Second, false}, {600 * time.Second, true}} {
		dir, file := writeHooks(t, "hooks.json", preTool("echo denied >&2; exit 2"))
		r := newHookRig(t, "hooks-claude", fmt.Sprintf(`{"config_path":%q}`, file), hookGrants(dir, config.ExecGrant{MaxTimeout: c.max}), scriptedBash("echo RAN"), "", agent.Options{})
		r.prompt(t, "go")
		rs := toolResults(t, r.sess)
		if len(rs) != 1 || rs[0].IsError != c.denied {
			t.Errorf("max_timeout %v: results %+v, want denied %v", c.max, rs, c.denied)
		}
		if !c.denied && !strings.Contains(r.logs.String(), "exceeds grants.exec.max_timeout") {
			t.Errorf("max_timeout %v: the log does not say the hook's timeout was too long:\n%s", c.max, r.logs.String())
		}
	}
}
