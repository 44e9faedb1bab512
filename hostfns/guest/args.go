package guest

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/hostfns/jsonobj"
)

// ErrMissingArg is wrapped by Args' errors for an argument the model did
// not send (or sent as null).
var ErrMissingArg = errors.New("missing argument")

// Args is a tool call's arguments, a JSON object parsed by the SDK
// (package jsonobj: strict JSON, exact key match, the last of a repeated
// key wins). Its accessors' errors name the argument, and are meant to be
// returned to the model as they are.
type Args struct {
	raw     []byte
	obj     jsonobj.Obj
	scratch []byte
}

// Raw returns the arguments as the model sent them.
func (a *Args) Raw() []byte { return a.raw }

// Lookup returns an argument's value; null counts as absent.
func (a *Args) Lookup(name string) (jsonobj.Value, bool) {
	v, ok := a.obj.Lookup(name)
	if !ok || v.Kind() == jsonobj.Null {
		return jsonobj.Value{}, false
	}
	return v, true
}

// Has reports whether the model sent the argument, not as null.
func (a *Args) Has(name string) bool {
	_, ok := a.Lookup(name)
	return ok
}

func (a *Args) need(name string) (jsonobj.Value, error) {
	v, ok := a.Lookup(name)
	if !ok {
		return v, fmt.Errorf("argument %q: %w", name, ErrMissingArg)
	}
	return v, nil
}

func argErr(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("argument %q: %w", name, err)
}

// String returns a string argument, copied.
func (a *Args) String(name string) (string, error) {
	v, err := a.need(name)
	if err != nil {
		return "", err
	}
	s, err := v.Text()
	return s, argErr(name, err)
}

// Bytes returns a string argument without copying it when it holds no
// escapes. The bytes are valid only until the tool function returns.
func (a *Args) Bytes(name string) ([]byte, error) {
	v, err := a.need(name)
	if err != nil {
		return nil, err
	}
	if body, ok := v.Verbatim(); ok {
		return body, nil
	}
	// Decoded strings pile up in scratch for the rest of the call, so
	// an earlier result stays intact.
	start := len(a.scratch)
	if a.scratch, err = v.AppendText(a.scratch); err != nil {
		return nil, argErr(name, err)
	}
	return a.scratch[start:len(a.scratch):len(a.scratch)], nil
}

// Int returns an integer argument.
func (a *Args) Int(name string) (int64, error) {
	v, err := a.need(name)
	if err != nil {
		return 0, err
	}
	n, err := v.Int()
	return n, argErr(name, err)
}

// Float returns a number argument.
func (a *Args) Float(name string) (float64, error) {
	v, err := a.need(name)
	if err != nil {
		return 0, err
	}
	f, err := v.Float()
	return f, argErr(name, err)
}

// Bool returns a boolean argument.
func (a *Args) Bool(name string) (bool, error) {
	v, err := a.need(name)
	if err != nil {
		return false, err
	}
	b, err := v.Bool()
	return b, argErr(name, err)
}

// Result collects a tool's result text, and optionally data for the
// front ends (SetMeta). The SDK reuses its buffer from call to call.
type Result struct {
	buf  []byte
	meta json.RawMessage
}

// SetMeta attaches meta, a JSON object, to the result: data for displays
// (a diff, say) that is recorded with the result and that the model never
// sees. The host refuses (and fails the call) what is not a JSON object or
// is larger than hostfns.MaxToolMeta bytes.
func (r *Result) SetMeta(meta json.RawMessage) { r.meta = meta }

// ToolError is a tool's failure with an identity programs can tell apart
// (the session records it as the result's error): Name is the failure's
// family (FsError), Code the failure (FS_NOT_OBSERVED). A tool function
// returns it, possibly wrapped, as its error; the model reads Err's
// message.
type ToolError struct {
	Name, Code string
	Err        error
}

func (e *ToolError) Error() string { return e.Err.Error() }
func (e *ToolError) Unwrap() error { return e.Err }

// failure is the output of a tool function that returned err: its
// message, and its identity when it carries a ToolError.
func failure(err error) ([]byte, hostfns.OutStatus) {
	var te *ToolError
	if errors.As(err, &te) {
		return toolOutput(hostfns.ToolOutput{Text: err.Error(), Error: &hostfns.ToolFailure{Name: te.Name, Code: te.Code}})
	}
	return []byte(err.Error()), hostfns.OutError
}

// toolOutput encodes a ToolOutput (OutResult).
func toolOutput(o hostfns.ToolOutput) ([]byte, hostfns.OutStatus) {
	b, err := json.Marshal(o)
	if err != nil {
		return []byte("encoding the tool's result: " + err.Error()), hostfns.OutError
	}
	return b, hostfns.OutResult
}

// Write appends p to the result.
func (r *Result) Write(p []byte) (int, error) {
	r.buf = append(r.buf, p...)
	return len(p), nil
}

// WriteString appends s to the result.
func (r *Result) WriteString(s string) (int, error) {
	r.buf = append(r.buf, s...)
	return len(s), nil
}

// Len is the number of bytes written so far.
func (r *Result) Len() int { return len(r.buf) }

// Bytes returns what was written so far, valid until the next write or
// Reset.
func (r *Result) Bytes() []byte { return r.buf }

// Reset drops what was written.
func (r *Result) Reset() { r.buf = r.buf[:0] }

// toolHandler is one of the two kinds of tool function.
type toolHandler struct {
	plain ToolFunc
	args  ArgsToolFunc
}

// The per-call buffers of tool calls. An instance runs one export call at
// a time and the host refuses reentrant calls, so one set is enough.
var (
	callArgs   Args
	callResult Result
)

// runTool runs a tool's handler on a call's arguments.
func (t toolHandler) run(ctx Context, args []byte) ([]byte, hostfns.OutStatus) {
	if t.plain != nil {
		out, err := t.plain(ctx, args)
		if err != nil {
			return failure(err)
		}
		callResult.buf = append(callResult.buf[:0], out...)
		return callResult.buf, hostfns.OutOK
	}
	a := &callArgs
	a.raw, a.scratch = args, a.scratch[:0]
	doc := args
	if isBlank(doc) {
		doc = emptyObject // no arguments at all: an empty object
	}
	if err := a.obj.Parse(doc); err != nil {
		return []byte("the tool's arguments are not a JSON object: " + err.Error()), hostfns.OutError
	}
	callResult.buf, callResult.meta = callResult.buf[:0], nil
	if err := t.args(ctx, a, &callResult); err != nil {
		return failure(err)
	}
	if callResult.meta != nil {
		return toolOutput(hostfns.ToolOutput{Text: string(callResult.buf), Meta: callResult.meta})
	}
	return callResult.buf, hostfns.OutOK
}

var emptyObject = []byte("{}")

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}
