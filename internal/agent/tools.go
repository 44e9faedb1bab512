package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/hostfns/jsonobj"
	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

// ToolErrorName is the ToolError.Name of the error results the loop gives
// when a call failed outside the tool (its plugin trapped, ran out of
// budget, or the turn was cancelled while it ran).
const ToolErrorName = "ToolCallError"

// The ToolError names and codes of the reference harness's own tool
// failures (core/tools/src/index.ts, core/tools/src/schema.ts).
const (
	ToolNotFoundName  = "ToolNotFoundError" // with CodeUnknownTool
	ToolArgsErrorName = "ToolArgsError"     // with CodeInvalidArguments
)

// ToolError.Code values of the loop's own error results besides the
// reference's.
const (
	CodePluginFailure = "PLUGIN_FAILURE" // the call failed in the host or plugin (trap, budget, ...)
)

// toolOutcome is a call's result with the error identity of a failure.
type toolOutcome struct {
	tool.Result
	err *session.ToolError
	// context is what tools/post-execute listeners added, recorded after
	// the result.
	context []HookNote
}

// errorResult is an error result whose text, as the reference writes it,
// is "Error: " and the message.
func errorResult(name, code, format string, args ...any) toolOutcome {
	out := toolOutcome{Result: tool.Result{Text: "Error: " + fmt.Sprintf(format, args...), IsError: true}}
	if code != "" {
		out.err = &session.ToolError{Name: name, Code: code}
	}
	return out
}

// runCalls executes the step's tool calls one at a time, recording each
// call and its result. A call that fails in any way, a failing listener
// included, is an error result for the model, and the turn goes on. Only
// a cancel ends the turn: the call that was running records its result,
// and the calls after it record nothing, as in the reference harness
// (agent-loop/src/loop.ts, runStep).
func (t *turnRun) runCalls(ctx context.Context, facts *prompt.AgentFacts, step int, calls []model.Part, tools []prompt.Tool) *ending {
	known := make(map[string]prompt.Tool, len(tools))
	for _, tl := range tools {
		known[tl.Name] = tl
	}
	for _, call := range calls {
		if t.ctx.Err() != nil {
			return t.aborted()
		}
		ev := t.record(session.NewEvent(session.ToolCall{Turn: t.turn, Step: step,
			CallID: call.ID, Name: call.Name, Arguments: call.Arguments}))
		// The intent is durable before the side effect, and before any
		// listener or client hears of the call: a crash from here on
		// is repaired with the call on record.
		t.flush()
		if t.fatal != nil {
			return nil
		}
		out := t.execute(ctx, facts, step, call, known)
		t.recordResult(step, call.ID, out, ev.Seq)
		t.recordContext(out.context)
		if t.fatal != nil {
			return nil
		}
		if t.ctx.Err() != nil {
			return t.aborted()
		}
	}
	return nil
}

func (t *turnRun) recordResult(step int, callID string, out toolOutcome, callSeq int64) {
	r := session.ToolResult{Turn: t.turn, Step: step, CallID: callID,
		Content: session.TextContent(out.Text), IsError: out.IsError, Error: out.err, Meta: out.Meta}
	t.record(session.NewEvent(r).WithSources(callSeq))
}

// execute runs one call through tools/pre-execute, the tool and
// tools/post-execute (core/tools/src/index.ts, ToolRegistry.execute). A
// pre-execute listener may deny the call, with a reason the model sees,
// and nothing else; a failing listener on either side makes the call's
// result an error result.
//
// The arguments are read once, here, into their canonical form
// (CanonicalArguments): the listeners and the tool get the same bytes, and
// arguments that have none are an error result that no listener sees.
func (t *turnRun) execute(ctx context.Context, facts *prompt.AgentFacts, step int, call model.Part, known map[string]prompt.Tool) toolOutcome {
	a := t.a
	args, err := CanonicalArguments(call.Arguments)
	if err == nil {
		if tl, ok := known[call.Name]; ok {
			err = checkSpelling(tl.Parameters, args)
		}
	}
	if err != nil {
		return errorResult(ToolArgsErrorName, CodeInvalidArguments, "invalid arguments: %v", err)
	}
	orig := ToolExecution{Agent: *facts, Turn: t.turn, Step: step, CallID: call.ID, Name: call.Name, Arguments: string(args)}
	ex := orig
	v, err := a.bus.Waterfall(ctx, events.EventToolPreExecute, &ex)
	var got *ToolExecution
	if err == nil {
		var ok bool
		if got, ok = v.(*ToolExecution); !ok || got == nil {
			err = fmt.Errorf("returned %T", v)
		} else if got.CallID != orig.CallID || got.Name != orig.Name || got.Arguments != orig.Arguments || got.Result != nil ||
			got.Block != "" || len(got.Context) > 0 {
			err = errPreExecuteRewrite
		}
	}
	if err != nil {
		if t.ctx.Err() != nil {
			return cancelledResult(call.Name)
		}
		return listenerFailure(events.EventToolPreExecute, err)
	}

	var out toolOutcome
	switch {
	case got.Deny != "":
		out = errorResult("", "", "%s", got.Deny)
	case got.Ask != "" && !t.askPermission(ctx, facts, step, orig, got.Ask):
		out = errorResult("", "", "%s", got.Ask)
	default:
		out = t.invoke(ctx, facts, call.Name, args, known)
	}

	if t.ctx.Err() != nil {
		// Cancelled: the result stands as it is, and no listener runs
		// for a turn that is ending.
		return out
	}
	post := orig
	post.Result = &out.Result
	v, err = a.bus.Waterfall(ctx, events.EventToolPostExecute, &post)
	if err == nil {
		p, ok := v.(*ToolExecution)
		switch {
		case !ok || p == nil:
			err = fmt.Errorf("returned %T", v)
		case p.Result == nil:
			err = fmt.Errorf("returned no result")
		case p.Block != "":
			// Blocked: the model gets the hook's feedback instead, as
			// an error result (tools/src/index.ts, a "block" decision).
			out = toolOutcome{Result: tool.Result{Text: p.Block, IsError: true}, context: p.Context}
		default:
			if p.Result.Text != out.Text || p.Result.IsError != out.IsError {
				out = toolOutcome{Result: tool.Result{Text: p.Result.Text, IsError: p.Result.IsError}}
			}
			out.context = p.Context
		}
	}
	if err != nil {
		return listenerFailure(events.EventToolPostExecute, err)
	}
	return out
}

// cancelledResult is the result of a call the turn's cancel stopped.
func cancelledResult(name string) toolOutcome {
	return errorResult(ToolErrorName, CodeAborted, "aborted: the turn was cancelled while tool %q ran", name)
}

// errPreExecuteRewrite: a pre-execute listener tried more than a deny or
// an ask.
var errPreExecuteRewrite = errors.New("a listener may only deny the call (set deny) or ask for it (set ask); it may not rename it, change its arguments, answer it, block it or add context")

// listenerFailure is the error result of a call whose listener failed.
func listenerFailure(event string, err error) toolOutcome {
	return errorResult("", "", "%s: %v", event, err)
}

// invoke runs a call, its arguments canonical. Every failure is an error
// result.
func (t *turnRun) invoke(ctx context.Context, facts *prompt.AgentFacts, name string, args []byte, known map[string]prompt.Tool) toolOutcome {
	if _, ok := known[name]; !ok {
		return errorResult(ToolNotFoundName, CodeUnknownTool, "unknown tool %q", name)
	}
	r, err := callTool(ctx, t.a.tools, facts, name, args)
	if err != nil {
		if t.ctx.Err() != nil {
			return cancelledResult(name)
		}
		return errorResult(ToolErrorName, CodePluginFailure, "tool %q failed: %v", name, err)
	}
	out := toolOutcome{Result: r}
	if r.IsError && r.Failure != nil {
		out.err = &session.ToolError{Name: r.Failure.Name, Code: r.Failure.Code}
	}
	return out
}

// CanonicalArguments is the canonical form of a tool call's argument
// text, the one the tools/pre-execute and tools/post-execute listeners
// see and the tool runs with (jsonobj.Canonical: one JSON object, no two
// keys equal or equal but for case in any object, finite numbers, nested
// at most jsonobj.CanonicalMaxDepth deep, written compactly with every
// string quoted one way). Nothing at all, which models send for a call
// without parameters, is {}. Text it refuses is an error naming what and
// where, the model's to correct.
func CanonicalArguments(s string) ([]byte, error) {
	if strings.Trim(s, " \t\r\n") == "" {
		return []byte("{}"), nil
	}
	b, err := jsonobj.Canonical(nil, []byte(s))
	if errors.Is(err, jsonobj.ErrSyntax) {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	return b, err
}

// checkSpelling refuses a top-level argument whose key is one of the
// tool's parameters (the properties of its schema) in another case:
// {"COMMAND": ...} for a "command" parameter. A tool reading keys exactly
// would not see it, one reading them as encoding/json does (a native Go
// tool) would, and so might a hook or not: the same call, read two ways.
// Keys the schema does not name are the tool's to judge.
func checkSpelling(schema json.RawMessage, args []byte) error {
	var o, s, props jsonobj.Obj
	if o.Parse(args) != nil || s.Parse(schema) != nil {
		return nil
	}
	v, ok := s.Lookup("properties")
	if !ok || v.Kind() != jsonobj.Object || props.Parse(v.Raw()) != nil {
		return nil
	}
	for i := 0; i < o.Len(); i++ {
		k := string(o.Key(nil, i))
		if _, exact := props.Lookup(k); exact {
			continue
		}
		for j := 0; j < props.Len(); j++ {
			if p := string(props.Key(nil, j)); strings.EqualFold(k, p) {
				return fmt.Errorf("%w: key %q is the tool's parameter %q in another case", jsonobj.ErrNotCanonical, k, p)
			}
		}
	}
	return nil
}

// callTool runs the tool runner, turning a panic in it into an error: a
// host failure ends up as an error result, never as a crashed turn.
func callTool(ctx context.Context, tr ToolRunner, facts *prompt.AgentFacts, name string, args []byte) (r tool.Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the tool runner panicked: %v", p)
		}
	}()
	return tr.CallTool(ctx, facts, name, args)
}
