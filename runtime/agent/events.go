package agent

import (
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// AgentEvent is the payload of agent/start and agent/end.
type AgentEvent struct {
	Agent prompt.AgentFacts `json:"agent"`
}

// TurnEvent is the payload of turn/start and turn/end.
type TurnEvent struct {
	Agent prompt.AgentFacts `json:"agent"`
	Turn  int               `json:"turn"`
	// End says how the turn ended; set on turn/end only.
	End *session.EndReason `json:"end,omitempty"`
}

// PreStep is the payload of agent/pre-step, emitted before each step's
// model request is built. System is exactly the rendered system prompt the
// request will carry and Messages the conversation as it stands, so a
// listener measures what the model would see. A listener that rewrites the
// history (compaction) does so through the session; the loop reads the
// messages again after the dispatch.
type PreStep struct {
	Agent    prompt.AgentFacts `json:"agent"`
	Turn     int               `json:"turn"`
	Step     int               `json:"step"`
	System   string            `json:"system"`
	Messages []model.Message   `json:"messages"`
	Tools    []model.Tool      `json:"tools"`

	agent *Agent // the emitting agent, for in-process listeners
}

// ToolExecution is the payload of tool/pre-execute and tool/post-execute.
//
// In tool/pre-execute Result is nil; a listener may rewrite Name and
// Arguments (the call runs with what the last listener returns), or set
// Result, which vetoes the call: it does not run and Result is what the
// model gets. In tool/post-execute Result holds the outcome and a listener
// may rewrite it. CallID, Turn and Step identify the call and are not read
// back.
type ToolExecution struct {
	Agent     prompt.AgentFacts `json:"agent"`
	Turn      int               `json:"turn"`
	Step      int               `json:"step"`
	CallID    string            `json:"callId"`
	Name      string            `json:"name"`
	Arguments string            `json:"arguments"`
	Result    *ToolOutput       `json:"result,omitempty"`
}

// ToolOutput is what a tool call gives back to the model.
type ToolOutput struct {
	Text    string `json:"text"`
	IsError bool   `json:"isError"`
}
