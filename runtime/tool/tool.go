// Package tool holds what every kind of tool shares with the agent loop:
// the result a call gives back to the model.
//
// The loop runs tools through one interface (agent.ToolRunner) and knows
// nothing of how they run. Wasm plugins (internal/plugin), native Go tools
// (runtime/deploy), subagents and MCP-client tools all answer with a
// Result: a tool needs nothing of the loop, and the loop nothing of the
// tools' hosts. A tool's description, what the model is told before it calls, is
// prompt.Tool, which the prompt registry holds; its wire shape for
// plugins is hostfns.ToolRequest. The package is a leaf: it imports
// nothing of this module.
package tool

import "encoding/json"

// Result is what a tool call gives back to the model. A tool's own
// failure is a Result with IsError set; the model reads Text either way.
// The JSON form is the one hooks see on tools/post-execute.
//
// Meta and Failure are for programs, not the model, and hooks do not see
// them: Meta is the tool's data for displays (a JSON object: an edit's
// diffs, say), recorded with the result; Failure identifies an error
// result's failure. A listener that changes the text or the error flag
// drops them with the result they described.
type Result struct {
	Text    string          `json:"text"`
	IsError bool            `json:"isError"`
	Meta    json.RawMessage `json:"-"`
	Failure *Failure        `json:"-"`
}

// Failure identifies a tool's failure: its family (Name, "FsError") and
// what failed (Code, "FS_NOT_OBSERVED").
type Failure struct {
	Name string
	Code string
}
