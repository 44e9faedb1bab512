package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/internal/pluginstate"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// Codes of an "error" turn end (EndReason.Code), the reference harness's
// (llm-deepseek/src/adapter.ts httpErrorCode, llm-deepseek/src/translate.ts,
// agent-loop/src/loop.ts). An error with no class, such as a render
// failure or a failing listener, carries no code.
const (
	CodeAuth             = "AUTH"               // HTTP 401 or 403
	CodeRateLimit        = "RATE_LIMIT"         // HTTP 429
	CodeInvalidRequest   = "INVALID_REQUEST"    // HTTP 400
	CodeServer           = "SERVER"             // HTTP 5xx; other statuses are HTTP_<status>
	CodeContentFilter    = "CONTENT_FILTER"     // the provider's content filter stopped the answer
	CodeAborted          = "ABORTED"            // the provider aborted the stream (a finish "aborted")
	CodeMalformedStream  = "MALFORMED_RESPONSE" // the provider's stream broke the chunk protocol
	CodeOutputLimit      = "OUTPUT_LIMIT"       // the stream passed the step's output bounds (OutputBounds)
	CodeUnknownTool      = "UNKNOWN_TOOL"       // tool result: the model called a tool it was not given
	CodeInvalidArguments = "INVALID_ARGS"       // tool result: the arguments are not JSON
)

// httpErrorCode is the code of a model API failure with HTTP status
// status, as the reference harness classifies it.
func httpErrorCode(status int) string {
	switch {
	case status == 401 || status == 403:
		return CodeAuth
	case status == 429:
		return CodeRateLimit
	case status == 400:
		return CodeInvalidRequest
	case status >= 500:
		return CodeServer
	}
	return "HTTP_" + strconv.Itoa(status)
}

// turnRun is one running turn.
type turnRun struct {
	a     *Agent
	ctx   context.Context // cancelled by Cancel, Close or the caller
	turn  int
	text  string // text of the last assistant message
	fatal error  // the session could not record: the turn cannot go on
}

// ending says why a turn ends.
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

// flush makes what the turn recorded durable. A failure is fatal: the turn
// cannot promise what it has not written.
func (t *turnRun) flush() {
	if t.fatal != nil {
		return
	}
	if err := t.a.sess.Flush(); err != nil {
		t.fatal = fmt.Errorf("turn %d: %w", t.turn, err)
	}
}

// facts returns a copy of the agent's facts for one step, with a context
// that routes plugin work to the agent's instances.
func (t *turnRun) facts() (context.Context, *prompt.AgentFacts) {
	f := t.a.facts
	return pluginstate.WithSessionEvents(prompt.WithAgent(t.ctx, &f), t.a.recordPluginEvent), &f
}

// recordPluginEvent records an event a plugin appended through
// session_event_append (the host has checked its type against the
// plugin's grants and its payload): it joins the session like the loop's
// own events, and OnEvent sees it once stored. It runs on the turn's
// goroutine, inside the plugin call that appended it.
func (a *Agent) recordPluginEvent(eventType string, data json.RawMessage) error {
	_, err := a.record(session.Event{Type: eventType, Data: data})
	return err
}

// fail turns a failure in step n into the turn's ending: aborted (or
// disposed) when the turn was cancelled, whatever failed as a result;
// error otherwise, with the failure's code when it has one.
func (t *turnRun) fail(n int, err error) *ending {
	if t.ctx.Err() != nil {
		return t.aborted()
	}
	return &ending{reason: session.EndReason{Kind: session.EndError, Step: n, Message: FailureMessage(err), Code: errorCode(err)}, err: err}
}

// FailureMessage is the message of a turn that failed with err, the one
// turn/end.reason.message records and a front end shows ("turn failed: "
// and it, in the ACP front end): the provider's own message when the
// model's API refused or broke off the call, as the reference records it,
// and err's text otherwise. The wrapped chain stays in TurnResult.Err, for
// the log.
func FailureMessage(err error) string {
	var api *model.APIError
	var fe *finishError
	switch {
	case errors.As(err, &api) && api.Message != "":
		return api.Message
	case errors.As(err, &fe) && fe.message != "":
		return fe.message
	}
	return err.Error()
}

// aborted is the ending of a cancelled turn: disposed when the agent was
// closed, aborted otherwise, with the reason given to Cancel.
func (t *turnRun) aborted() *ending {
	cause := context.Cause(t.ctx)
	if errors.Is(cause, errDisposed) {
		return &ending{reason: session.EndReason{Kind: session.EndDisposed}, err: cause}
	}
	var c *cancelCause
	if errors.As(cause, &c) {
		return &ending{reason: session.EndReason{Kind: session.EndAborted, Reason: c.reason}, err: cause}
	}
	return &ending{reason: session.EndReason{Kind: session.EndAborted, Reason: cause.Error()}, err: cause}
}

// errorCode classifies err for an error turn end.
func errorCode(err error) string {
	var api *model.APIError
	var fe *finishError
	switch {
	case errors.As(err, &fe):
		return fe.code
	case errors.As(err, &api) && api.Status != 0:
		return httpErrorCode(api.Status)
	case errors.As(err, &api):
		return api.Code
	case errors.Is(err, model.ErrMalformedStream):
		return CodeMalformedStream
	case errors.Is(err, model.ErrOutputLimit):
		return CodeOutputLimit
	}
	return ""
}

// finishError is a model answer that finished with an error or aborted.
type finishError struct {
	message, code string
}

func (e *finishError) Error() string { return e.message }
func (e *finishError) Unwrap() error { return ErrModel }

func (t *turnRun) run(msgs []session.UserMessage) (TurnResult, error) {
	a := t.a
	src := msgs[0].Source
	t.record(session.NewEvent(session.TurnStart{Turn: t.turn,
		Trigger: &session.Trigger{Kind: session.TriggerMessage, Source: &src}}))
	if t.fatal != nil {
		return TurnResult{}, t.fatal
	}
	a.lastTurn = t.turn
	// agent/prompt-submit decides, prompt by prompt, what joins the
	// conversation; a turn whose prompts were all blocked runs no step.
	end := t.submit(msgs)
	t.flush() // the user's prompt is on disk before any work on it
	if t.fatal != nil {
		return TurnResult{}, t.fatal
	}
	a.emitContained(t.ctx, events.EventTurnStart, &TurnEvent{Agent: a.facts, Turn: t.turn})

	res := TurnResult{Turn: t.turn}
	if end == nil {
		end = t.steps(&res)
	}
	if t.fatal != nil {
		return res, t.fatal
	}
	end = t.seal(end)
	res.End, res.Err, res.Text = end.reason, end.err, t.text
	t.record(session.NewEvent(session.TurnEnd{Turn: t.turn, Reason: end.reason}))
	t.flush()
	if t.fatal != nil {
		return res, t.fatal
	}
	a.emitContained(t.ctx, events.EventTurnEnd, &TurnEvent{Agent: a.facts, Turn: t.turn, End: &end.reason})
	return res, nil
}

// seal decides the turn's end for good: from here on Cancel returns false.
// A cancel that arrived before, even after the last step, makes the turn
// end aborted (or disposed), so that Cancel's true is never a lie.
func (t *turnRun) seal(end *ending) *ending {
	t.a.mu.Lock()
	t.a.cancel = nil
	cancelled := t.ctx.Err() != nil
	t.a.mu.Unlock()
	if cancelled && end.reason.Kind != session.EndAborted && end.reason.Kind != session.EndDisposed {
		return t.aborted()
	}
	return end
}

// steps runs the turn's steps and says how the turn ends. Each step first
// builds its prompt and runs agent/pre-step; only then is step/start
// recorded, so a failure or a cancel before that records no step, and
// what pre-step listeners record (compaction) comes before the step it
// prepares (agent-loop/src/loop.ts, runTurn).
func (t *turnRun) steps(res *TurnResult) *ending {
	a := t.a
	maxTokens := false // sticky: a truncated answer ends the turn max-tokens
	continued := 0     // extra steps agent/turn-stopping listeners asked for
	for n := 1; ; n++ {
		if t.ctx.Err() != nil {
			return t.aborted()
		}
		ctx, facts := t.facts()
		asm, system, err := a.bounds.assembleAndRender(ctx, a.registry, facts)
		if err != nil {
			return t.fail(n, err)
		}
		if t.ctx.Err() != nil {
			return t.aborted()
		}
		tools := modelTools(asm.Tools)
		pre := &PreStep{Agent: *facts, Turn: t.turn, Step: n, System: system,
			Messages: a.sess.Messages(), Tools: tools, agent: a}
		if err := a.bus.EmitSerial(ctx, events.EventAgentPreStep, pre); err != nil {
			return t.fail(n, fmt.Errorf("%w: %s: %w", ErrListener, events.EventAgentPreStep, err))
		}
		if t.fatal != nil {
			return nil
		}
		if t.ctx.Err() != nil {
			return t.aborted()
		}

		t.record(session.NewEvent(session.StepStart{Turn: t.turn, Step: n}))
		if t.fatal != nil {
			return nil
		}
		res.Steps = n
		sr, end := t.step(ctx, facts, n, asm, system, tools)
		t.record(session.NewEvent(session.StepEnd{Turn: t.turn, Step: n}))
		t.flush()
		switch {
		case t.fatal != nil:
			return nil
		case end != nil:
			return end
		}
		maxTokens = maxTokens || sr.Finish.Kind == model.FinishMaxTokens
		stop := &ending{reason: session.EndReason{Kind: session.EndCompleted}}
		if maxTokens {
			stop = &ending{reason: session.EndReason{Kind: session.EndMaxTokens}}
		}
		if !a.cont(sr) {
			// The turn would end: a turn-stopping listener may ask for
			// one more step, its reason recorded as steering the model
			// sees.
			more := t.stopping(n, &continued)
			if t.fatal != nil {
				return nil
			}
			if !more {
				return stop
			}
			continue
		}
		switch {
		case a.maxSteps > 0 && n >= a.maxSteps:
			// The step cap ends the turn as the reference's readers know
			// a cut-short turn: max-tokens.
			a.log.Warn("agent: the turn reached its step cap", "agent", facts.ID, "turn", t.turn, "max_steps", a.maxSteps)
			return &ending{reason: session.EndReason{Kind: session.EndMaxTokens},
				err: fmt.Errorf("%w: the turn reached its limit of %d steps", ErrStepCap, a.maxSteps)}
		}
	}
}

// step runs one step after its step/start: request, stream, assistant
// message, tool calls. A non-nil ending ends the turn.
func (t *turnRun) step(ctx context.Context, facts *prompt.AgentFacts, n int, asm *prompt.Assembly, system string, tools []prompt.Tool) (StepResult, *ending) {
	a := t.a
	sr := StepResult{Turn: t.turn, Step: n}
	req := &model.Request{
		Model:    facts.Model,
		System:   system,
		Messages: a.sess.Messages(), // after pre-step: a listener may have compacted them
		Tools:    tools,
		Meta: model.RequestMeta{SessionID: facts.Session, ParentSessionID: a.parentID,
			Turn: t.turn, Step: n},
	}
	var chunkSeqs []int64
	flusher := t.a.chunkFlusher()
	acc, err := a.generate(ctx, req, func(c model.Chunk) error {
		e := t.record(session.NewEvent(session.AssistantChunk{Turn: t.turn, Step: n, Chunk: c}))
		if t.fatal != nil {
			return t.fatal
		}
		chunkSeqs = append(chunkSeqs, e.Seq)
		if err := flusher.arm(); err != nil {
			t.fatal = fmt.Errorf("turn %d: %w", t.turn, err)
			return t.fatal
		}
		return nil
	})
	flusher.stop()
	if t.fatal != nil {
		return sr, nil
	}
	if t.ctx.Err() != nil {
		// Cancelled while the provider streamed, whether or not it
		// finished anyway: the turn was cancelled.
		return sr, t.aborted()
	}
	if err != nil {
		return sr, t.fail(n, err)
	}
	sr.Finish, _ = acc.FinishReason()
	switch sr.Finish.Kind {
	case model.FinishError:
		msg := sr.Finish.Message
		if msg == "" {
			msg = "the model finished with an error"
		}
		return sr, t.fail(n, &finishError{message: msg, code: sr.Finish.Code})
	case model.FinishAborted:
		return sr, t.fail(n, &finishError{message: "model stream aborted", code: CodeAborted})
	}

	parts := acc.Parts()
	if sr.Finish.Kind == model.FinishMaxTokens {
		// A truncated answer keeps its text; its tool calls, cut or not,
		// are dropped and never run (agent-loop/src/loop.ts, runStep).
		parts = withoutToolCalls(parts)
	}
	usage, hasUsage := acc.Usage()
	if len(parts) > 0 || hasUsage {
		msg := session.AssistantMessage{Turn: t.turn, Step: n, Content: parts}
		if hasUsage {
			msg.Usage = &usage
		}
		e := session.NewEvent(msg)
		if len(chunkSeqs) > 0 {
			e = e.WithSources(chunkSeqs...)
		}
		t.record(e)
		t.flush() // the calls below are on disk before they run
		if t.fatal != nil {
			return sr, nil
		}
	}
	t.text = session.Parts(parts).Text()
	sr.Message = model.Message{Role: model.RoleAssistant, Content: parts}
	if sr.Finish.Kind == model.FinishMaxTokens {
		return sr, nil
	}
	sr.ToolCalls = acc.ToolCalls()
	return sr, t.runCalls(ctx, facts, n, sr.ToolCalls, asm.Tools)
}

func withoutToolCalls(parts []model.Part) []model.Part {
	out := make([]model.Part, 0, len(parts))
	for _, p := range parts {
		if p.Type != model.BlockToolCall {
			out = append(out, p)
		}
	}
	return out
}

// modelTools are the assembly's tools as the request carries them.
func modelTools(ts []prompt.Tool) []prompt.Tool {
	if len(ts) == 0 {
		return nil
	}
	out := make([]prompt.Tool, len(ts))
	for i, t := range ts {
		out[i] = t.Sent()
	}
	return out
}

// assembleAndRender builds the system prompt under the agent's assembly
// bounds (b). A panic in a provider or hook (host code, or a bug) fails
// the prompt like any other error: it ends only this turn.
func (b AssemblyBounds) assembleAndRender(ctx context.Context, reg *prompt.Registry, facts *prompt.AgentFacts) (asm *prompt.Assembly, system string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: assembling the prompt panicked: %v", ErrPrompt, r)
		}
	}()
	ctx, cancel := b.context(ctx)
	defer cancel()
	asm, err = reg.Assemble(ctx, prompt.AssembleContext{Agent: facts})
	if err != nil {
		return nil, "", fmt.Errorf("%w: assemble: %w", ErrPrompt, err)
	}
	system, err = prompt.RenderLimit(asm, b.PromptBytes)
	if err != nil {
		return nil, "", fmt.Errorf("%w: render: %w", ErrPrompt, err)
	}
	return asm, system, nil
}
