package sandbox

import (
	"strings"

	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

// A tool's result is the seam between a plugin and what the session
// records beside the model's text (issue 28): an OutResult from dsh_tool
// carries display meta and a failure's identity, which front ends read
// and programs route on. The host (plugin.Host.CallTool, toolOutput) owns
// their rules: meta is one JSON object of at most hostfns.MaxToolMeta
// bytes, an identity is two short identifiers, and anything else fails
// the call as bad output, never reaching the record; a failure reads
// "Error: " and its message to the model whatever the plugin wrote.
func init() { seamGroups = append(seamGroups, toolResultAttacks) }

func toolResultAttacks() []hostileAttack {
	return []hostileAttack{
		{name: "tool-result-meta-and-identity", run: func(e *env) string {
			e.rawPlugin()
			r, err := e.call(e.main, "raw_result", map[string]any{})
			if err != nil || !r.IsError || r.Text != "Error: failed here" || string(r.Meta) != `{"k":[1,2]}` ||
				r.Failure == nil || *r.Failure != (tool.Failure{Name: "RawError", Code: "RAW_1"}) {
				e.t.Errorf("a well-formed OutResult = %+v (meta %s), %v", r, r.Meta, err)
			}
			return "a well-formed result keeps its meta and identity; its failure reads \"Error: \" and the message"
		}},
		{name: "tool-result-lies", run: func(e *env) string {
			e.rawPlugin()
			for tool, msg := range map[string]string{
				"raw_result_notjson":    "not a ToolOutput JSON object",
				"raw_result_meta_array": "meta is not a JSON object",
				"raw_result_meta_huge":  "over the 1048576 allowed",
				"raw_result_bad_code":   `error code "FS NOT\nOBSERVED" is not 1 to 64 ASCII letters`,
				"raw_result_long_name":  `error name "` + strings.Repeat("E", 65) + `" is not`,
			} {
				e.wantBadOutput(tool, msg)
			}
			return "refused (bad output): no meta or identity but the host's rules reach the record"
		}},
		{name: "tool-result-status-outside-tools", run: func(e *env) string {
			// OutResult is dsh_tool's alone: the raw guest's dsh_setup
			// answers with it, and the agent's instance is refused.
			e.t.Setenv("HOSTILE_SETUP_RESULT", "1")
			e.mustLoad("raw", "rawabi", map[string]any{}, defaultLimits, "env: [HOSTILE_SETUP_RESULT]")
			r, err := e.call(e.main, "raw_ok", map[string]any{})
			e.wantErr("a tool call on an instance whose setup answered OutResult", err, plugin.ErrBadOutput, "unknown output status 3")
			if r.Text != "" {
				e.t.Errorf("a result came through: %q", r.Text)
			}
			return "refused (bad output): OutResult only from dsh_tool"
		}},
	}
}
