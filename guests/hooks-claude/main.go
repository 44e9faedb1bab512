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
// default_timeout_ms (60000), stderr_summary_max_chars (500),
// max_text_chars (10000).
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
		// Claude Code's own tool names, accepted in matchers for ours.
		Aliases: map[string]string{"Bash": "bash", "Read": "read", "Edit": "edit", "Write": "write"},
	}, claude{})
}

type claude struct{}

func (claude) PlainContext(point string) bool { return point == hookbridge.PointUserPromptSubmit }
func (claude) TrailingNewline() bool          { return true }

// Build is Claude Code's hook input: session_id, transcript_path, cwd,
// hook_event_name, and per event prompt, tool_name/tool_input/
// tool_response or stop_hook_active. tool_input is the loop's canonical
// arguments, byte for byte.
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
			m["tool_response"] = map[string]any{"output": ev.Result.Text, "is_error": ev.Result.IsError}
		}
	case hookbridge.PointStop:
		m["stop_hook_active"] = false
		m["last_assistant_message"] = ev.Text
	}
	return m, nil
}
