package hookbridge

import (
	"errors"
	"strings"
	"testing"
)

var claude = Dialect{Name: "claude", LiteralMatchers: true, TimeoutKeys: []string{"timeout"}, ProjectEnv: true, Ask: true,
	Lifecycle: []string{PointSessionStart, PointSubagentStart, PointSubagentStop}}

var codex = Dialect{Name: "codex", TimeoutKeys: []string{"timeout", "timeoutSec"}, Lifecycle: []string{PointSessionStart}}

func TestParseMatchers(t *testing.T) {
	cfg, err := Parse([]byte(`{"hooks":{"PreToolUse":[
	  {"matcher":"Bash|edit","hooks":[{"type":"command","command":"a","timeout":2}]},
	  {"matcher":"^wr","hooks":[{"command":"b"}]},
	  {"hooks":[{"type":"prompt","prompt":"x"},{"type":"command","command":"c"}]}],
	 "Notification":[{"hooks":[{"command":"n"}]}]}}`), "hooks.json", claude)
	if err != nil {
		t.Fatal(err)
	}
	gs := cfg.Points[PointPreToolUse]
	if len(gs) != 3 || gs[0].Hooks[0].TimeoutMs != 2000 {
		t.Fatalf("groups %+v", gs)
	}
	for _, c := range []struct {
		g    int
		tool string
		want bool
	}{{0, "Bash", true}, {0, "bash", false}, {0, "edit", true}, {0, "Edit", false}, {0, "read", false}, {0, "bash_output", false},
		{1, "write", true}, {1, "bash", false}, {2, "anything", true}} {
		if got := gs[c.g].Matches(c.tool); got != c.want {
			t.Errorf("group %d (%q) matches %q = %v, want %v", c.g, gs[c.g].Matcher, c.tool, got, c.want)
		}
	}
	if len(cfg.Skipped) != 2 {
		t.Errorf("skipped %v, want the prompt hook and Notification", cfg.Skipped)
	}
	// Codex matchers are regular expressions, and Bash is not bash.
	cfg, err = Parse([]byte(`{"PreToolUse":[{"matcher":"Bash","hooks":[{"command":"a","timeoutSec":1}]}]}`), "c.json", codex)
	if err != nil {
		t.Fatal(err)
	}
	if g := cfg.Points[PointPreToolUse][0]; g.Matches("bash") || g.Hooks[0].TimeoutMs != 1000 {
		t.Errorf("codex group %+v matches bash", g)
	}
}

// TestParseMatchersExact: a matcher names tools exactly, as the
// reference matches them: Claude Code's own names (Bash, Read) select
// nothing of ours, literally or as a regular expression.
func TestParseMatchersExact(t *testing.T) {
	cfg, err := Parse([]byte(`{"PreToolUse":[{"matcher":"Bash","hooks":[{"command":"a"}]},{"matcher":"^(Read|Write)$","hooks":[{"command":"b"}]}]}`), "f.json", claude)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range cfg.Points[PointPreToolUse] {
		for _, tool := range []string{"bash", "read", "write"} {
			if g.Matches(tool) {
				t.Errorf("matcher %q selects our %q", g.Matcher, tool)
			}
		}
	}
}

// TestParseLifecycle: SessionStart (both), SubagentStart and SubagentStop
// (Claude Code) are read, with their matchers; so are the matchers of
// UserPromptSubmit and Stop, which the bridge tests against "" (a bash
// matcher there never selects the empty query), as the reference does.
func TestParseLifecycle(t *testing.T) {
	body := []byte(`{"SessionStart":[{"matcher":"resume","hooks":[{"command":"s"}]}],
	  "SubagentStart":[{"matcher":"general-purpose","hooks":[{"command":"a"}]}],
	  "SubagentStop":[{"hooks":[{"command":"b"}]}],
	  "Stop":[{"matcher":"bash","hooks":[{"command":"c"}]}],
	  "UserPromptSubmit":[{"matcher":"bash","hooks":[{"command":"d"}]}]}`)
	cfg, err := Parse(body, "f.json", claude)
	if err != nil {
		t.Fatal(err)
	}
	if g := cfg.Points[PointSessionStart]; len(g) != 1 || g[0].Matches("startup") || !g[0].Matches("resume") {
		t.Errorf("SessionStart %+v", g)
	}
	if len(cfg.Points[PointSubagentStart]) != 1 || len(cfg.Points[PointSubagentStop]) != 1 || len(cfg.Skipped) != 0 {
		t.Errorf("subagent events %+v, skipped %v", cfg.Points, cfg.Skipped)
	}
	for _, pt := range []string{PointStop, PointUserPromptSubmit} {
		if g := cfg.Points[pt]; len(g) != 1 || g[0].Matcher != "bash" || g[0].Matches("") {
			t.Errorf("%s: %+v, want the bash matcher kept, selecting no empty query", pt, g)
		}
	}
	cfg, err = Parse(body, "f.json", codex)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Points[PointSessionStart]) != 1 || len(cfg.Points[PointSubagentStart]) != 0 || len(cfg.Skipped) != 2 {
		t.Errorf("codex: %+v, skipped %v: want SessionStart only", cfg.Points, cfg.Skipped)
	}
}

// TestCommand: a Claude Code hook runs with CLAUDE_PROJECT_DIR exported
// (project_dir, else the session's cwd, quoted) and project_dir and
// plugin_root substituted; a Codex hook runs as written.
func TestCommand(t *testing.T) {
	cmd := `${CLAUDE_PLUGIN_ROOT}/x "${CLAUDE_PROJECT_DIR}"`
	if got, want := Command(cmd, claude, &Settings{}, "/w/it's"), "export CLAUDE_PROJECT_DIR='/w/it'\\''s'\n"+cmd; got != want {
		t.Errorf("no settings: %q, want %q", got, want)
	}
	got := Command(cmd, claude, &Settings{ProjectDir: "/p", PluginRoot: "/r"}, "/w")
	if want := "export CLAUDE_PROJECT_DIR='/p'\n/r/x \"/p\""; got != want {
		t.Errorf("with settings: %q, want %q", got, want)
	}
	if got := Command(cmd, codex, &Settings{ProjectDir: "/p"}, "/w"); got != cmd {
		t.Errorf("codex: %q", got)
	}
}

func TestParseErrorsNameFileAndLine(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{"{\n\"hooks\": [1]\n}", "f.json:2:"},
		{"{\n\"PreToolUse\": {\"matcher\": \"x\"}}", "f.json:2: PreToolUse: want a list"},
		{"[1,", "f.json:1: invalid JSON"},
	} {
		_, err := Parse([]byte(c.body), "f.json", claude)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %s", c.body, err, c.want)
		}
	}
}

// TestParseSkipsAMalformedGroup: one malformed group is skipped with a
// warning naming the file, line and group; the others still apply.
func TestParseSkipsAMalformedGroup(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{"{\n\"PreToolUse\": [{\"matcher\": \"(\", \"hooks\": [{\"command\": \"x\"}]},\n{\"hooks\": [{\"command\": \"ok\"}]}]}", "f.json:2: PreToolUse[0]: matcher: invalid regular expression"},
		{"{\"PreToolUse\": [{\"hooks\": [{\"command\": \"ok\"}]},\n\n{\"hooks\": [{\"command\": \"x\", \"timeout\": -1}]}]}", "f.json:3: PreToolUse[1]: hooks[0].timeout"},
		{"{\"PreToolUse\": [7, {\"hooks\": [{\"command\": \"ok\"}]}]}", "f.json:1: PreToolUse[0]: want a {matcher, hooks: [...]} group"},
		{"{\"PreToolUse\": [{\"hooks\": [{\"command\": \"ok\"}]},\n{\"hooks\": \"nope\"}]}", "f.json:2: PreToolUse[1]: want a {matcher, hooks: [...]} group"},
		{"{\"PreToolUse\": [{\"hooks\": [{\"command\": \"ok\"}]},\n{\"hooks\": [{\"command\": 7}]}]}", "f.json:2: PreToolUse[1]: hooks[0].command must be a non-empty string"},
	} {
		cfg, err := Parse([]byte(c.body), "f.json", claude)
		if err != nil {
			t.Errorf("%q: %v, want the bad group skipped", c.body, err)
			continue
		}
		if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], c.want) {
			t.Errorf("%q: warnings %q, want one with %s", c.body, cfg.Warnings, c.want)
		}
		gs := cfg.Points[PointPreToolUse]
		if len(gs) != 1 || gs[0].Hooks[0].Command != "ok" {
			t.Errorf("%q: groups %+v, want the good one", c.body, gs)
		}
	}
}

func TestParseOutput(t *testing.T) {
	o := ParseOutput(2, "", " no way \n", PointPreToolUse, false)
	if o.Decision != "block" || o.Reason != "no way" || o.Recorded() != "block" {
		t.Errorf("exit 2: %+v", o)
	}
	o = ParseOutput(0, `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"sure?"}}`, "", PointPreToolUse, false)
	if o.Decision != "ask" || o.Reason != "sure?" {
		t.Errorf("ask: %+v", o)
	}
	o = ParseOutput(0, `{"hookSpecificOutput":{"hookEventName":"PostToolUse","permissionDecision":"deny"}}`, "", PointPreToolUse, false)
	if o.Decision != "" {
		t.Errorf("output for another event counted: %+v", o)
	}
	o = ParseOutput(0, "plain words", "", PointUserPromptSubmit, true)
	if o.Context != "plain words" || o.Recorded() != "pass" || !o.Exited {
		t.Errorf("plain context: %+v", o)
	}
	// Output that looks like JSON is never prose, even when it is not
	// JSON (the reference's Codex rule).
	if o = ParseOutput(0, `{"not json`, "", PointUserPromptSubmit, true); o.Context != "" {
		t.Errorf("malformed JSON became context: %+v", o)
	}
	if o = ParseOutput(0, "plain words", "", PointPostToolUse, false); o.Context != "" {
		t.Errorf("plain stdout became context where it is not: %+v", o)
	}
	if o = ParseOutput(1, "", "oops", PointStop, false); o.Decision != "" || o.Recorded() != "pass" {
		t.Errorf("exit 1 blocked: %+v", o)
	}
	if o = ParseOutput(0, `{"continue":false,"decision":"approve"}`, "", PointStop, false); !o.Stop || o.Recorded() != "approve" {
		t.Errorf("continue false: %+v", o)
	}
}

func TestMerge(t *testing.T) {
	m := Merge([]Output{{Decision: "allow"}, {Decision: "ask", Reason: "a"}, {Decision: "block", Reason: "b"}, {Decision: "deny", Reason: "c"}, {Context: "x"}})
	if m.Decision != "deny" || m.Reason != "b\n\nc" || len(m.Context) != 1 {
		t.Errorf("merged %+v", m)
	}
	if m := Merge(nil); m.Decision != "" {
		t.Errorf("empty merge %+v", m)
	}
	if s := Summary(strings.Repeat("é", 10), 3); s != "ééé…" {
		t.Errorf("summary %q", s)
	}
}

// TestStdinKeepsTheCanonicalBytes: what a hook reads as tool_input is the
// loop's canonical arguments byte for byte.
func TestStdinKeepsTheCanonicalBytes(t *testing.T) {
	args := "{\"command\":\"echo <a> & \u2028 é\",\"n\":1.50,\"x\":[{\"k\":null}]}"
	ti, err := ToolInput(args)
	if err != nil {
		t.Fatal(err)
	}
	ci, err := CommandInput(args)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Stdin(map[string]any{"tool_input": ti, "codex": ci}, false)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\"codex\":{\"command\":\"echo <a> & \u2028 é\"},\"tool_input\":" + args + "}"
	if string(b) != want {
		t.Errorf("stdin\n %s\nwant\n %s", b, want)
	}
	if b, _ := Stdin(map[string]any{}, true); string(b) != "{}\n" {
		t.Errorf("stdin with a newline %q", b)
	}
	for _, bad := range []string{"", "{", `{"a":1}x`} {
		if _, err := ToolInput(bad); !errors.Is(err, ErrArguments) {
			t.Errorf("ToolInput(%q): %v", bad, err)
		}
	}
	if ci, _ := CommandInput(`{"Command":"x","command":7}`); string(ci) != `{"command":""}` {
		t.Errorf("CommandInput of a command that is no string: %s", ci)
	}
}
