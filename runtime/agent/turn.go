package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/events"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/plugin"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// Short machine-readable causes recorded in EndReason.Reason.
const (
	ReasonPrompt        = "prompt"         // error: the prompt could not be assembled or rendered
	ReasonModel         = "model"          // error: the model call failed
	ReasonListener      = "listener"       // error or rejected: an event listener failed or refused
	ReasonLength        = "length"         // max-tokens: the answer hit the model's token limit
	ReasonMaxSteps      = "max-steps"      // max-tokens: the turn reached Options.MaxSteps
	ReasonContentFilter = "content-filter" // rejected: the provider's content filter stopped the answer
)

// turnRun is one running turn.
type turnRun struct {
	a     *Agent
	ctx   context.Context // cancelled by Cancel, Close or the caller
	turn  int
	text  string // text of the last assistant message
	fatal error  // the session could not record: the turn cannot go on
}

// ending says why a turn ends early.
type ending struct {
	reason session.EndReason
	err    error
}

func (t *turnRun) record(e session.Event) session.Event {
	if t.fatal != nil {
		return session.Event{}
	}
	e, err := t.a.record(e)
	if err != nil {
		t.fatal = fmt.Errorf("turn %d: %w", t.turn, err)
	}
	return e
}

// facts returns a copy of the agent's facts for one step, with a context
// that routes plugin work to the agent's instances.
func (t *turnRun) facts() (context.Context, *prompt.AgentFacts) {
	f := t.a.facts
	return plugin.WithSessionEvents(plugin.WithAgent(t.ctx, &f), t.a.recordPluginEvent), &f
}

// recordPluginEvent records an event a plugin appended through
// session_event_append (the host has checked its type against the
// plugin's grants and its payload): it joins the session like the loop's
// own events, and OnEvent sees it. It runs on the turn's goroutine, inside
// the plugin call that appended it.
func (a *Agent) recordPluginEvent(eventType string, data json.RawMessage) error {
	_, err := a.record(session.Event{Type: eventType, Data: data})
	return err
}

// fail turns a failure into the turn's ending: aborted when the turn was
// cancelled (whatever failed as a result), rejected when a listener
// refused, error otherwise.
func (t *turnRun) fail(reason string, err error) *ending {
	if t.ctx.Err() != nil {
		return t.aborted()
	}
	if errors.Is(err, ErrRejected) {
		return &ending{reason: session.EndReason{Kind: session.EndRejected, Reason: reason, Message: err.Error()}, err: err}
	}
	return &ending{reason: session.EndReason{Kind: session.EndError, Reason: reason, Message: err.Error()}, err: err}
}

func (t *turnRun) aborted() *ending {
	cause := context.Cause(t.ctx)
	var c *cancelCause
	if errors.As(cause, &c) {
		return &ending{reason: session.EndReason{Kind: session.EndAborted, Reason: c.reason}, err: cause}
	}
	return &ending{reason: session.EndReason{Kind: session.EndAborted, Message: cause.Error()}, err: cause}
}

func (t *turnRun) run(msgs []session.UserMessage) (TurnResult, error) {
	a := t.a
	src := msgs[0].Source
	t.record(session.NewEvent(session.TurnStart{Turn: t.turn,
		Trigger: &session.Trigger{Kind: session.TriggerMessage, Source: &src}}))
	if t.fatal != nil {
		return TurnResult{}, t.fatal
	}
	a.lastTurn = t.turn
	for _, m := range msgs {
		t.record(session.NewEvent(m))
	}
	a.emitContained(t.ctx, events.EventTurnStart, &TurnEvent{Agent: a.facts, Turn: t.turn})

	res := TurnResult{Turn: t.turn}
	end := t.steps(&res)
	if t.fatal != nil {
		return res, t.fatal
	}
	res.End, res.Err, res.Text = end.reason, end.err, t.text
	t.record(session.NewEvent(session.TurnEnd{Turn: t.turn, Reason: end.reason}))
	if t.fatal != nil {
		return res, t.fatal
	}
	if err := a.sess.Flush(); err != nil {
		return res, fmt.Errorf("agent %s: turn %d: %w", a.facts.ID, t.turn, err)
	}
	a.emitContained(t.ctx, events.EventTurnEnd, &TurnEvent{Agent: a.facts, Turn: t.turn, End: &end.reason})
	return res, nil
}

// steps runs the turn's steps and says how the turn ends.
func (t *turnRun) steps(res *TurnResult) *ending {
	for n := 1; ; n++ {
		t.record(session.NewEvent(session.StepStart{Turn: t.turn, Step: n}))
		if t.fatal != nil {
			return nil
		}
		res.Steps = n
		sr, end := t.step(n)
		t.record(session.NewEvent(session.StepEnd{Turn: t.turn, Step: n}))
		switch {
		case t.fatal != nil:
			return nil
		case end != nil:
			return end
		case !t.a.cont(sr):
			return &ending{reason: session.EndReason{Kind: session.EndCompleted}}
		case n >= t.a.maxSteps:
			return &ending{reason: session.EndReason{Kind: session.EndMaxTokens, Reason: ReasonMaxSteps,
				Message: fmt.Sprintf("the turn reached its limit of %d steps", t.a.maxSteps)}}
		}
	}
}

// step runs one step after its step/start: prompt, pre-step, request,
// stream, assistant message, tool calls. A non-nil ending ends the turn.
func (t *turnRun) step(n int) (StepResult, *ending) {
	a := t.a
	sr := StepResult{Turn: t.turn, Step: n}
	if t.ctx.Err() != nil {
		return sr, t.aborted()
	}
	ctx, facts := t.facts()

	asm, system, err := assembleAndRender(ctx, a.registry, facts)
	if err != nil {
		return sr, t.fail(ReasonPrompt, err)
	}
	tools := modelTools(asm.Tools)

	pre := &PreStep{Agent: *facts, Turn: t.turn, Step: n, System: system,
		Messages: a.sess.Messages(), Tools: tools, agent: a}
	if err := a.bus.EmitSerial(ctx, events.EventAgentPreStep, pre); err != nil {
		return sr, t.fail(ReasonListener, fmt.Errorf("%w: %s: %w", ErrListener, events.EventAgentPreStep, err))
	}

	req := &model.Request{
		Model:    facts.Model,
		System:   system,
		Messages: a.sess.Messages(), // again: a pre-step listener may have compacted them
		Tools:    tools,
		Meta: model.RequestMeta{SessionID: facts.Session, ParentSessionID: a.parentID,
			Turn: t.turn, Step: n},
	}
	var chunkSeqs []int64
	acc, err := a.generate(ctx, req, func(c model.Chunk) error {
		e := t.record(session.NewEvent(session.AssistantChunk{Turn: t.turn, Step: n, Chunk: c}))
		if t.fatal != nil {
			return t.fatal
		}
		chunkSeqs = append(chunkSeqs, e.Seq)
		return nil
	})
	if t.fatal != nil {
		return sr, nil
	}
	if err == nil && t.ctx.Err() != nil {
		// Cancelled while the provider streamed, and it finished anyway:
		// the turn was still cancelled.
		return sr, t.aborted()
	}
	if err != nil {
		reason := ReasonModel
		if errors.Is(err, ErrListener) {
			reason = ReasonListener
		}
		return sr, t.fail(reason, err)
	}

	parts := acc.Parts()
	msg := session.AssistantMessage{Turn: t.turn, Step: n, Content: parts}
	if u, ok := acc.Usage(); ok {
		msg.Usage = &u
	}
	t.record(session.NewEvent(msg).WithSources(chunkSeqs...))
	if t.fatal != nil {
		return sr, nil
	}
	t.text = session.Parts(parts).Text()
	sr.Message = acc.Message()
	sr.ToolCalls = acc.ToolCalls()
	sr.Finish, _ = acc.FinishReason()

	var stop *ending
	switch sr.Finish.Kind {
	case model.FinishLength:
		stop = &ending{reason: session.EndReason{Kind: session.EndMaxTokens, Reason: ReasonLength,
			Message: "the model's answer reached its token limit"}}
	case model.FinishContentFilter:
		stop = &ending{reason: session.EndReason{Kind: session.EndRejected, Reason: ReasonContentFilter,
			Message: "the provider's content filter stopped the answer"}, err: fmt.Errorf("%w: content filter", ErrRejected)}
	case model.FinishError:
		err := fmt.Errorf("%w: the model finished with an error (%s)", ErrModel, sr.Finish.Raw)
		stop = &ending{reason: session.EndReason{Kind: session.EndError, Reason: ReasonModel, Message: err.Error()}, err: err}
	}
	if stop != nil {
		t.skipCalls(n, sr.ToolCalls, "not run: "+stop.reason.Message)
		return sr, stop
	}
	return sr, t.runCalls(ctx, facts, n, sr.ToolCalls, asm.Tools)
}

// modelTools converts the assembly's tools to the request's.
func modelTools(ts []prompt.Tool) []model.Tool {
	if len(ts) == 0 {
		return nil
	}
	out := make([]model.Tool, len(ts))
	for i, t := range ts {
		params := t.Parameters
		if len(params) == 0 {
			params = []byte(`{"type":"object","properties":{}}`)
		}
		out[i] = model.Tool{Name: t.Name, Description: t.Description, Parameters: params}
	}
	return out
}

// assembleAndRender builds the system prompt. A panic in a provider or
// hook (host code, or a bug) fails the prompt like any other error: it
// ends only this turn.
func assembleAndRender(ctx context.Context, reg *prompt.Registry, facts *prompt.AgentFacts) (asm *prompt.Assembly, system string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: assembling the prompt panicked: %v", ErrPrompt, r)
		}
	}()
	asm, err = reg.Assemble(ctx, prompt.AssembleContext{Agent: facts})
	if err != nil {
		return nil, "", fmt.Errorf("%w: assemble: %w", ErrPrompt, err)
	}
	system, err = prompt.Render(asm)
	if err != nil {
		return nil, "", fmt.Errorf("%w: render: %w", ErrPrompt, err)
	}
	return asm, system, nil
}
