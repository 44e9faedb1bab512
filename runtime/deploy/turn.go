package deploy

import (
	"context"

	"github.com/dsh-wasm/dsh-wasm/internal/agent"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// TurnResult says how a turn that Session.Prompt ran ended.
type TurnResult struct {
	// Turn is the turn's number in the session.
	Turn int
	// Steps is the number of steps the turn ran.
	Steps int
	// End is the reason recorded in turn/end.
	End session.EndReason
	// Text is the text of the turn's last assistant message.
	Text string
	// Err is the failure behind an end other than "completed", with its
	// cause (the same error a *TurnError wraps).
	Err error
}

// CompactionOptions configure the compaction of long conversations
// (Options.Compaction); a deployment file's compaction: section is
// decoded into them.
type CompactionOptions struct {
	// ContextWindow is the model's context window in tokens. Required.
	ContextWindow int
	// TriggerRatio: a step compacts first when its prompt reaches this
	// share of the window; 0 means the runtime's default.
	TriggerRatio float64
	// RetainTokens bounds the tail of whole steps kept verbatim; the
	// rest is summarised. 0 means the runtime's default share.
	RetainTokens int
	// Instructions is the summary request's system prompt; empty means
	// the runtime's default.
	Instructions string
}

// PermissionRequest is what a PermissionFunc is asked: may this tool
// call run? Reason is the hook's reason for asking.
type PermissionRequest struct {
	// Agent is the facts of the agent that wants to call the tool.
	Agent prompt.AgentFacts
	// Turn and Step locate the call in the session.
	Turn, Step int
	// CallID, Name and Arguments are the call's id, tool and arguments.
	CallID, Name, Arguments string
	// Reason is why the hook asks.
	Reason string
}

// PermissionFunc asks the user whether a tool call may run. It returns
// true to allow it; an error, or a nil PermissionFunc, refuses it.
type PermissionFunc func(ctx context.Context, req PermissionRequest) (bool, error)

// loop returns the loop's form of the compaction options.
func (o CompactionOptions) loop() agent.CompactionOptions {
	return agent.CompactionOptions{ContextWindow: o.ContextWindow, TriggerRatio: o.TriggerRatio,
		RetainTokens: o.RetainTokens, Instructions: o.Instructions}
}

// loop returns the loop's form of the permission callback.
func (f PermissionFunc) loop() agent.PermissionFunc {
	if f == nil {
		return nil
	}
	return func(ctx context.Context, r agent.PermissionRequest) (bool, error) {
		return f(ctx, PermissionRequest{Agent: r.Agent, Turn: r.Turn, Step: r.Step,
			CallID: r.CallID, Name: r.Name, Arguments: r.Arguments, Reason: r.Reason})
	}
}
