package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// The hook points of the loop. Each is a waterfall event a policy plugin
// (a Claude Code or Codex hook bridge, or a native listener) joins:
//
//   - agent/prompt-submit (PromptSubmit): before a user's prompt joins the
//     conversation. Block refuses it: the prompt is recorded as
//     prompt/blocked, nothing reaches the model, and a turn whose every
//     prompt was blocked ends "rejected". Context adds context/message
//     events after the user message, which the model sees.
//   - tools/pre-execute (ToolExecution): Deny refuses the call; Ask asks
//     the user through Options.Permission, and the call is refused when
//     the user refuses or nobody can be asked.
//   - tools/post-execute (ToolExecution): Block replaces the result with
//     the reason as an error result; Context adds context/message events
//     after the tool result.
//   - agent/turn-stopping (TurnStopping): the turn is about to end.
//     Continue asks for one more step: each entry is recorded as a
//     steering/message the model sees, and the loop runs another step, at
//     most Options.MaxContinuations times in a turn.
//
// The additions a plugin makes (Context, Continue) are stamped by the
// host with the plugin's name; a plugin cannot write another's.

// DefaultMaxContinuations bounds how many extra steps agent/turn-stopping
// listeners may ask for in one turn when Options.MaxContinuations is 0.
// The reference harness leaves the bound to the hooks themselves; a
// policy that always says "continue" would then run the turn until its
// step cap, so we bound it here too.
const DefaultMaxContinuations = 8

// HookNote is a text a hook adds to the conversation: context
// (context/message) or a continuation reason (steering/message). Plugin
// names the plugin that added it; for a plugin listener the host sets it.
type HookNote struct {
	Text   string `json:"text"`
	Plugin string `json:"plugin,omitempty"`
}

// PromptSubmit is the payload of agent/prompt-submit.
type PromptSubmit struct {
	Agent prompt.AgentFacts `json:"agent"`
	Turn  int               `json:"turn"`
	// Prompt is the text of the user's message; Content its parts.
	Prompt  string        `json:"prompt"`
	Content session.Parts `json:"content"`
	// Block, set by a listener, refuses the prompt with this reason.
	Block string `json:"block,omitempty"`
	// Context, appended to by listeners, is context for the model.
	Context []HookNote `json:"context,omitempty"`
}

// TurnStopping is the payload of agent/turn-stopping, emitted after a
// step that would end the turn.
type TurnStopping struct {
	Agent prompt.AgentFacts `json:"agent"`
	Turn  int               `json:"turn"`
	Step  int               `json:"step"`
	// Text is the text of the last assistant message.
	Text string `json:"text"`
	// Continue, appended to by listeners, asks for one more step; each
	// entry's text is the reason the model sees.
	Continue []HookNote `json:"continue,omitempty"`
}

// PermissionRequest is what Options.Permission is asked: may the call
// run? Reason is the hook's reason for asking.
type PermissionRequest struct {
	Agent     prompt.AgentFacts
	Turn      int
	Step      int
	CallID    string
	Name      string
	Arguments string
	Reason    string
}

// PermissionFunc asks the user whether a tool call may run. It returns
// true to allow it. An error, or a nil PermissionFunc, refuses it.
type PermissionFunc func(ctx context.Context, req PermissionRequest) (bool, error)

// ErrHookRewrite: a hook listener changed what it may not.
var ErrHookRewrite = errors.New("agent: a hook listener changed a field it may not")

// Attribute stamps the notes a plugin added with its name: notes that
// were there before keep theirs, whatever the plugin returned.
func (p *PromptSubmit) Attribute(plugin string, before any) {
	if b, ok := before.(*PromptSubmit); ok {
		p.Context = stamp(p.Context, b.Context, plugin)
	}
}

// Attribute stamps the notes a plugin added with its name.
func (p *TurnStopping) Attribute(plugin string, before any) {
	if b, ok := before.(*TurnStopping); ok {
		p.Continue = stamp(p.Continue, b.Continue, plugin)
	}
}

// Attribute stamps the notes a plugin added with its name.
func (p *ToolExecution) Attribute(plugin string, before any) {
	if b, ok := before.(*ToolExecution); ok {
		p.Context = stamp(p.Context, b.Context, plugin)
	}
}

// stamp keeps the first len(before) notes as they were (a plugin may not
// rewrite or drop another's) and names plugin on the rest.
func stamp(after, before []HookNote, plugin string) []HookNote {
	out := make([]HookNote, 0, len(after)+len(before))
	out = append(out, before...)
	if len(after) > len(before) {
		for _, n := range after[len(before):] {
			n.Plugin = plugin
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// noteSource is the source of a message a hook note becomes.
func noteSource(n HookNote) session.Source {
	if n.Plugin == "" {
		return session.Source{Kind: session.SourcePlugin}
	}
	return session.Source{Kind: session.SourcePlugin, Plugin: n.Plugin}
}

// recordContext records each note as a context/message the model sees.
func (t *turnRun) recordContext(notes []HookNote) {
	for _, n := range notes {
		if n.Text == "" {
			continue
		}
		t.record(session.NewEvent(session.ContextMessage{Content: session.TextContent(n.Text), Source: noteSource(n)}))
	}
}

// submit runs agent/prompt-submit over the turn's prompts and records
// each: the user message and its context, or prompt/blocked. It returns
// an ending when the turn must end before any step: every prompt was
// blocked (rejected), or a listener failed (error, fail closed: a policy
// that could not decide lets nothing through).
func (t *turnRun) submit(msgs []session.UserMessage) *ending {
	a := t.a
	passed, reason := 0, ""
	for _, m := range msgs {
		ctx, facts := t.facts()
		orig := PromptSubmit{Agent: *facts, Turn: t.turn, Prompt: m.Content.Text(), Content: m.Content}
		ps := orig
		v, err := a.bus.Waterfall(ctx, events.EventPromptSubmit, &ps)
		var got *PromptSubmit
		if err == nil {
			var ok bool
			if got, ok = v.(*PromptSubmit); !ok || got == nil {
				err = fmt.Errorf("returned %T", v)
			} else if got.Prompt != orig.Prompt || got.Turn != orig.Turn {
				err = fmt.Errorf("%w: the prompt of agent/prompt-submit is not the listener's to change", ErrHookRewrite)
			}
		}
		if t.fatal != nil {
			return nil
		}
		if err != nil {
			t.record(session.NewEvent(m))
			if t.ctx.Err() != nil {
				return t.aborted()
			}
			err = fmt.Errorf("%w: %s: %w", ErrListener, events.EventPromptSubmit, err)
			return &ending{reason: session.EndReason{Kind: session.EndError, Message: FailureMessage(err)}, err: err}
		}
		if got.Block != "" {
			t.record(session.NewEvent(session.PromptBlocked{Content: m.Content, Source: m.Source, Reason: got.Block}))
			if reason == "" {
				reason = got.Block
			}
			continue
		}
		passed++
		t.record(session.NewEvent(m))
		t.recordContext(got.Context)
	}
	if passed == 0 {
		return &ending{reason: session.EndReason{Kind: session.EndRejected, Reason: reason}}
	}
	return nil
}

// stopping runs agent/turn-stopping after step n, which would end the
// turn, and says whether the turn runs another step. continued counts
// the continuations granted so far in this turn. A failing listener is
// logged and the turn ends as it would have.
func (t *turnRun) stopping(n int, continued *int) bool {
	a := t.a
	if t.ctx.Err() != nil || len(a.bus.Listeners(events.EventTurnStopping)) == 0 {
		return false
	}
	ctx, facts := t.facts()
	ts := &TurnStopping{Agent: *facts, Turn: t.turn, Step: n, Text: t.text}
	v, err := a.bus.Waterfall(ctx, events.EventTurnStopping, ts)
	got, ok := v.(*TurnStopping)
	switch {
	case err != nil:
		a.log.Warn("agent: a turn-stopping listener failed; the turn ends", "agent", facts.ID, "turn", t.turn, "err", err)
		return false
	case !ok || got == nil || len(got.Continue) == 0 || t.fatal != nil:
		return false
	case *continued >= a.maxContinuations:
		a.log.Warn("agent: a turn-stopping listener asked to continue past the bound; the turn ends",
			"agent", facts.ID, "turn", t.turn, "max_continuations", a.maxContinuations)
		return false
	case a.maxSteps > 0 && n >= a.maxSteps:
		a.log.Warn("agent: a turn-stopping listener asked to continue at the step cap; the turn ends",
			"agent", facts.ID, "turn", t.turn, "max_steps", a.maxSteps)
		return false
	}
	recorded := false
	for _, c := range got.Continue {
		if c.Text == "" {
			continue
		}
		t.record(session.NewEvent(session.SteeringMessage{Turn: t.turn, Content: session.TextContent(c.Text), Source: noteSource(c)}))
		recorded = true
	}
	if !recorded || t.fatal != nil {
		return false
	}
	*continued++
	return true
}

// askPermission asks Options.Permission whether a call a hook wants
// confirmed may run; nobody to ask, an error or a refusal is a no.
func (t *turnRun) askPermission(ctx context.Context, facts *prompt.AgentFacts, step int, call ToolExecution, reason string) bool {
	if t.a.permission == nil {
		return false
	}
	ok, err := t.a.permission(ctx, PermissionRequest{Agent: *facts, Turn: t.turn, Step: step,
		CallID: call.CallID, Name: call.Name, Arguments: call.Arguments, Reason: reason})
	if err != nil {
		t.a.log.Warn("agent: the permission request failed; the call is refused", "tool", call.Name, "err", err)
		return false
	}
	return ok
}
