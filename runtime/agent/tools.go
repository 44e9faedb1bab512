package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/dsh-wasm/dsh-wasm/runtime/plugin"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/events"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// ToolErrorName is the ToolError.Name of the error results the loop
// itself gives, when a call could not run or failed outside the tool.
const ToolErrorName = "ToolCallError"

// ToolError.Code values of the loop's own error results.
const (
	CodeUnknownTool      = "UNKNOWN_TOOL"      // the model called a tool it was not given
	CodeInvalidArguments = "INVALID_ARGUMENTS" // the arguments are not a JSON object
	CodePluginFailure    = "PLUGIN_FAILURE"    // the call failed in the host or plugin (trap, budget, ...)
	CodeAborted          = "ABORTED"           // the turn was cancelled while the call ran
	CodeNotRun           = "NOT_RUN"           // the turn ended before the call could run
)

// toolOutcome is a call's result with the code of a loop error.
type toolOutcome struct {
	ToolOutput
	code string
}

func loopError(code, format string, args ...any) toolOutcome {
	return toolOutcome{ToolOutput: ToolOutput{Text: fmt.Sprintf(format, args...), IsError: true}, code: code}
}

// runCalls executes the step's tool calls one at a time, recording each
// call and its result. A call that fails in any way is an error result
// for the model; only a cancel or a failing listener ends the turn, and
// then the calls left are answered with error results without running.
func (t *turnRun) runCalls(ctx context.Context, facts *prompt.AgentFacts, step int, calls []model.Part, tools []prompt.Tool) *ending {
	known := make(map[string]bool, len(tools))
	names := make([]string, len(tools))
	for i, tl := range tools {
		known[tl.Name], names[i] = true, tl.Name
	}
	for i, call := range calls {
		ev := t.record(session.NewEvent(session.ToolCall{Turn: t.turn, Step: step,
			CallID: call.ID, Name: call.Name, Arguments: call.Arguments}))
		if t.fatal != nil {
			return nil
		}
		out, end := t.execute(ctx, facts, step, call, known, names)
		t.recordResult(step, call.ID, out, ev.Seq)
		if t.fatal != nil {
			return nil
		}
		if end != nil {
			t.skipCalls(step, calls[i+1:], "not run: "+endText(end))
			return end
		}
	}
	return nil
}

func endText(e *ending) string {
	if e.reason.Kind == session.EndAborted {
		return "the turn was cancelled"
	}
	if e.err != nil {
		return "the turn ended: " + e.err.Error()
	}
	return "the turn ended " + e.reason.Kind
}

// skipCalls records each call with an error result saying why it did
// not run, so that every tool call in the conversation has its result.
func (t *turnRun) skipCalls(step int, calls []model.Part, why string) {
	for _, call := range calls {
		ev := t.record(session.NewEvent(session.ToolCall{Turn: t.turn, Step: step,
			CallID: call.ID, Name: call.Name, Arguments: call.Arguments}))
		t.recordResult(step, call.ID, loopError(CodeNotRun, "%s", why), ev.Seq)
	}
}

func (t *turnRun) recordResult(step int, callID string, out toolOutcome, callSeq int64) {
	r := session.ToolResult{Turn: t.turn, Step: step, CallID: callID,
		Content: session.TextContent(out.Text), IsError: out.IsError}
	if out.code != "" {
		r.Error = &session.ToolError{Name: ToolErrorName, Code: out.code}
	}
	t.record(session.NewEvent(r).WithSources(callSeq))
}

// execute runs one call through tool/pre-execute, the tool and
// tool/post-execute.
func (t *turnRun) execute(ctx context.Context, facts *prompt.AgentFacts, step int, call model.Part, known map[string]bool, names []string) (toolOutcome, *ending) {
	if t.ctx.Err() != nil {
		return loopError(CodeAborted, "aborted: the turn was cancelled"), t.aborted()
	}
	a := t.a
	ex := &ToolExecution{Agent: *facts, Turn: t.turn, Step: step, CallID: call.ID, Name: call.Name, Arguments: call.Arguments}
	v, err := a.bus.Waterfall(ctx, events.EventToolPreExecute, ex)
	if err == nil {
		var ok bool
		if ex, ok = v.(*ToolExecution); !ok || ex == nil {
			err = fmt.Errorf("returned %T", v)
		}
	}
	if err != nil {
		end := t.fail(ReasonListener, fmt.Errorf("%w: %s: %w", ErrListener, events.EventToolPreExecute, err))
		return loopError(CodeNotRun, "not run: %s", endText(end)), end
	}

	var out toolOutcome
	if ex.Result != nil {
		out = toolOutcome{ToolOutput: *ex.Result} // vetoed or answered by a listener
	} else {
		out = t.invoke(ctx, facts, ex.Name, ex.Arguments, known, names)
		if out.code == CodeAborted {
			return out, t.aborted()
		}
	}

	post := &ToolExecution{Agent: *facts, Turn: t.turn, Step: step, CallID: call.ID,
		Name: ex.Name, Arguments: ex.Arguments, Result: &out.ToolOutput}
	v, err = a.bus.Waterfall(ctx, events.EventToolPostExecute, post)
	if err == nil {
		p, ok := v.(*ToolExecution)
		switch {
		case !ok || p == nil:
			err = fmt.Errorf("returned %T", v)
		case p.Result == nil:
			err = fmt.Errorf("returned no result")
		default:
			if *p.Result != out.ToolOutput {
				out = toolOutcome{ToolOutput: *p.Result}
			}
		}
	}
	if err != nil {
		// The call ran: its result stands, and the turn ends.
		return out, t.fail(ReasonListener, fmt.Errorf("%w: %s: %w", ErrListener, events.EventToolPostExecute, err))
	}
	return out, nil
}

// invoke checks a call and runs it. Every failure is an error result.
func (t *turnRun) invoke(ctx context.Context, facts *prompt.AgentFacts, name, arguments string, known map[string]bool, names []string) toolOutcome {
	if !known[name] {
		avail := "none"
		if len(names) > 0 {
			avail = strings.Join(names, ", ")
		}
		return loopError(CodeUnknownTool, "unknown tool %q; the available tools are: %s", name, avail)
	}
	args, err := callArguments(arguments)
	if err != nil {
		return loopError(CodeInvalidArguments, "invalid arguments for tool %q: %v", name, err)
	}
	r, err := callTool(ctx, t.a.tools, facts, name, args)
	if err != nil {
		if t.ctx.Err() != nil {
			return loopError(CodeAborted, "aborted: the turn was cancelled while tool %q ran", name)
		}
		return loopError(CodePluginFailure, "tool %q failed: %v", name, err)
	}
	return toolOutcome{ToolOutput: ToolOutput{Text: r.Text, IsError: r.IsError}}
}

// callArguments checks the model's argument text: a JSON object, or
// nothing at all, which models send for a call without parameters.
func callArguments(s string) ([]byte, error) {
	b := bytes.TrimSpace([]byte(s))
	if len(b) == 0 {
		return []byte("{}"), nil
	}
	if !json.Valid(b) {
		var v any
		err := json.Unmarshal(b, &v)
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	if b[0] != '{' {
		return nil, fmt.Errorf("a JSON object is required, got %s", jsonKind(b[0]))
	}
	return b, nil
}

func jsonKind(c byte) string {
	switch c {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// callTool runs the tool runner, turning a panic in it into an error: a
// host failure ends up as an error result, never as a crashed turn.
func callTool(ctx context.Context, tr ToolRunner, facts *prompt.AgentFacts, name string, args []byte) (r plugin.ToolResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the tool runner panicked: %v", p)
		}
	}()
	return tr.CallTool(ctx, facts, name, args)
}
