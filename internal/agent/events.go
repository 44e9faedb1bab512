package agent

import (
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
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
	Tools    []prompt.Tool     `json:"tools"`

	agent *Agent // the emitting agent, for in-process listeners
}

// ToolExecution is the payload of tools/pre-execute and
// tools/post-execute.
//
// In tools/pre-execute Result is nil, and a listener may only deny the
// call or ask for it: it sets Deny to a reason, the call does not run, and
// the model gets the error result "Error: <reason>"; or it sets Ask, and
// the call runs only if the user allows it. A listener that changes Name,
// Arguments or CallID, or sets Result, fails, as does one that returns an
// error: the call's result is then an error result naming the event, and
// the turn goes on. In tools/post-execute Result holds the outcome and a
// listener may rewrite it; its failure too replaces the result with an
// error result. CallID, Turn and Step identify the call.
type ToolExecution struct {
	Agent     prompt.AgentFacts `json:"agent"`
	Turn      int               `json:"turn"`
	Step      int               `json:"step"`
	CallID    string            `json:"callId"`
	Name      string            `json:"name"`
	Arguments string            `json:"arguments"`
	// Deny, set by a tools/pre-execute listener, refuses the call with
	// this reason.
	Deny string `json:"deny,omitempty"`
	// Ask, set by a tools/pre-execute listener, has the user confirm the
	// call first (Options.Permission), with this reason; refused, or
	// with nobody to ask, the model gets "Error: <reason>".
	Ask string `json:"ask,omitempty"`
	// Block, set by a tools/post-execute listener, replaces the result
	// with this feedback as an error result.
	Block string `json:"block,omitempty"`
	// Context, appended to by tools/post-execute listeners, is recorded
	// as context/message events after the tool result.
	Context []HookNote   `json:"context,omitempty"`
	Result  *tool.Result `json:"result,omitempty"`
}
