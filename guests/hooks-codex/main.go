//go:build wasip1

// Command hooks-codex is dsh-wasm's built-in bridge for Codex command
// hooks, loaded as builtin:hooks-codex. It reads a hook file in Codex's
// dialect (PreToolUse, PostToolUse, UserPromptSubmit, Stop; matcher
// groups of {type: "command", command, timeout or timeoutSec}; matchers
// are regular expressions) and runs the matching commands at the loop's
// hook points through the exec grant, with Codex's snake_case JSON on
// stdin. See docs/HOOKS.md.
//
// Config: config_path (the hook file: absolute, read at load; relative,
// read in each session's working directory when it opens), model (put in
// every payload), default_timeout_ms (600000), stderr_summary_max_chars
// (500), max_text_chars (10000).
package main

import (
	"strconv"

	"github.com/dsh-wasm/dsh-wasm/guests/internal/hookbridge"
	"github.com/dsh-wasm/dsh-wasm/hostfns"
)

func main() {}

func init() {
	hookbridge.Run(hookbridge.Dialect{
		Name:        "codex",
		TimeoutKeys: []string{"timeout", "timeoutSec"},
		Lifecycle:   []string{hookbridge.PointSessionStart},
		// No environment, no substitution, and an ask is no decision:
		// Codex hooks only block.
	}, codex{})
}

type codex struct{}

// PlainContext: Codex takes the plain stdout of a UserPromptSubmit or
// SessionStart hook as context.
func (codex) PlainContext(point string) bool {
	return point == hookbridge.PointUserPromptSubmit || point == hookbridge.PointSessionStart
}
func (codex) TrailingNewline() bool { return false }

// Build is Codex's hook input: session_id, transcript_path, cwd,
// hook_event_name, model, permission_mode, turn_id, and per event prompt,
// tool_name/tool_input{command}/tool_use_id/tool_response or
// stop_hook_active/last_assistant_message (null: the reference sends
// none). command is the canonical
// arguments' "command" member, byte for byte (hookbridge.CommandInput).
func (codex) Build(point string, ev *hookbridge.Event, f hostfns.CallContext, s *hookbridge.Settings) (map[string]any, error) {
	model := s.Model
	if model == "" {
		model = f.Model
	}
	m := map[string]any{"session_id": f.SessionID, "transcript_path": nil, "cwd": f.Cwd, "hook_event_name": point,
		"model": model, "permission_mode": "default"}
	if point == hookbridge.PointSessionStart {
		// Outside a turn: no turn_id.
		m["source"] = ev.Source
		return m, nil
	}
	m["turn_id"] = strconv.Itoa(ev.Turn)
	switch point {
	case hookbridge.PointUserPromptSubmit:
		m["prompt"] = ev.Prompt
	case hookbridge.PointPreToolUse, hookbridge.PointPostToolUse:
		m["tool_name"] = ev.Name
		in, err := hookbridge.CommandInput(ev.Arguments)
		if err != nil {
			return nil, err
		}
		m["tool_input"] = in
		m["tool_use_id"] = ev.CallID
		if point == hookbridge.PointPostToolUse && ev.Result != nil {
			m["tool_response"] = ev.Result.Text
		}
	case hookbridge.PointStop:
		m["stop_hook_active"] = false
		m["last_assistant_message"] = nil
	}
	return m, nil
}
