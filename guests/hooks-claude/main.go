//go:build wasip1

// Command hooks-claude is dsh-wasm's built-in bridge for Claude Code
// command hooks, loaded as builtin:hooks-claude. It reads a hook file in
// Claude Code's settings dialect (PreToolUse, PostToolUse,
// UserPromptSubmit, Stop; matcher groups of {type: "command", command,
// timeout?}) and runs the matching commands at the loop's hook points
// through the exec grant, with the JSON Claude Code sends on stdin. See
// docs/HOOKS.md.
//
// Config: config_path (the hook file: absolute, read at load; relative,
// read in each session's working directory when it opens),
// default_timeout_ms (600000), stderr_summary_max_chars (500),
// max_text_chars (10000), ask_client (false: an ask fails the call with
// its reason), project_dir and plugin_root (substituted in commands).
package main

import (
	"github.com/dsh-wasm/dsh-wasm/guests/internal/hookbridge"
	"github.com/dsh-wasm/dsh-wasm/hostfns"
)

func main() {}

func init() {
	hookbridge.Run(hookbridge.Dialect{
		Name:            "claude",
		LiteralMatchers: true,
		TimeoutKeys:     []string{"timeout"},
		ProjectEnv:      true,
		Ask:             true,
		Lifecycle:       []string{hookbridge.PointSessionStart, hookbridge.PointSubagentStart, hookbridge.PointSubagentStop},
	}, claude{})
}

type claude struct{}

// PlainContext: Claude Code's plain stdout is never context here, as in
// the reference (only its Codex bridge reads prose as context).
func (claude) PlainContext(string) bool { return false }
func (claude) TrailingNewline() bool    { return true }

// Build is Claude Code's hook input: session_id, transcript_path, cwd,
// hook_event_name, and per event prompt, tool_name/tool_input/
// tool_response (the result's text), stop_hook_active, source
// (SessionStart) or agent_id/agent_type (Subagent*), as the
// reference builds it. tool_input is the loop's canonical arguments, byte
// for byte. transcript_path is empty: the session file's host path is
// not a plugin's to know.
func (claude) Build(point string, ev *hookbridge.Event, f hostfns.CallContext, _ *hookbridge.Settings) (map[string]any, error) {
	m := map[string]any{"session_id": f.SessionID, "transcript_path": "", "cwd": f.Cwd, "hook_event_name": point}
	switch point {
	case hookbridge.PointUserPromptSubmit:
		m["prompt"] = ev.Prompt
	case hookbridge.PointPreToolUse, hookbridge.PointPostToolUse:
		m["tool_name"] = ev.Name
		in, err := hookbridge.ToolInput(ev.Arguments)
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
	case hookbridge.PointSessionStart:
		m["source"] = ev.Source
	case hookbridge.PointSubagentStart, hookbridge.PointSubagentStop:
		m["agent_id"] = ev.AgentID
		m["agent_type"] = hookbridge.SubagentType
		if point == hookbridge.PointSubagentStop {
			m["stop_hook_active"] = false
		}
	}
	return m, nil
}
