// Package guest is the Go SDK for dsh-wasm plugins. It binds the
// dsh:host/v1 ABI (package hostfns) and hides its memory protocol: a
// plugin registers sections, variables, tools and event handlers with
// typed helpers, and the SDK answers the host's calls.
//
// A plugin is a wasip1 c-shared module:
//
//	package main
//
//	import "github.com/dsh-wasm/dsh-wasm/hostfns/guest"
//
//	func init() {
//		guest.Main(func(p *guest.Plugin) error {
//			return p.Section("tool:demo", 120, "Prefer the demo tool for demos.")
//		})
//	}
//
//	func main() {}
//
// built with GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
//
// The setup function given to Main runs in every instance of the plugin:
// once at load (dsh_init), where its registrations become the plugin's
// contribution, and once in each per-agent instance (dsh_setup), where the
// SDK records the handlers without registering again. Write it as if it
// ran once; keep per-agent state in package variables, and state that must
// outlive an instance in StateGet/StateSet.
package guest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/hostfns/jsonobj"
)

// HostError is a failure status returned by a host function.
type HostError struct {
	Func    string
	Status  hostfns.Status
	Message string
}

func (e *HostError) Error() string {
	return fmt.Sprintf("%s: %s: %s", e.Func, e.Status, e.Message)
}

// ErrNotHosted: the code is not running inside a dsh-wasm host.
var ErrNotHosted = errors.New("not running under a dsh-wasm host")

// Is reports whether err is a HostError with status s.
func Is(err error, s hostfns.Status) bool {
	var he *HostError
	return errors.As(err, &he) && he.Status == s
}

// Context is the calling agent's context. Facts decodes it on demand, so
// a handler that does not need it pays nothing.
type Context struct{ raw []byte }

// Facts decodes the calling agent's facts. Absent facts are zero.
func (c Context) Facts() (hostfns.CallContext, error) {
	var f hostfns.CallContext
	if len(c.raw) == 0 {
		return f, nil
	}
	err := json.Unmarshal(c.raw, &f)
	return f, err
}

// Raw returns the context JSON as the host sent it.
func (c Context) Raw() []byte { return c.raw }

// Tool describes a tool to the model.
type Tool struct {
	Name        string
	Description string
	// Parameters is a JSON Schema object.
	Parameters json.RawMessage
}

// ToolFunc runs a tool. A returned error becomes an error result for the
// model, with the error's text.
type ToolFunc func(ctx Context, args []byte) (string, error)

// ArgsToolFunc runs a tool whose arguments the SDK has parsed, writing its
// result to out. It is the fast path: no reflection, and no allocation for
// arguments read with Args.Bytes or for the result. args, out and every
// byte slice read from args are valid only until the function returns. A
// returned error becomes an error result for the model, with the error's
// text, and what was written to out is dropped.
type ArgsToolFunc func(ctx Context, args *Args, out *Result) error

// Plugin is what a setup function registers with.
type Plugin struct {
	// Config is the plugin's config JSON from the operator.
	Config []byte
	init   bool
}

// Loading reports whether this is the load-time instance (dsh_init), where
// registrations become the plugin's contribution.
func (p *Plugin) Loading() bool { return p.init }

var (
	setupFn   func(*Plugin) error
	sections  = map[string]func(Context) (string, error){}
	variables = map[string]func(Context) (string, bool, error){}
	tools     = map[string]toolHandler{}
	listeners = map[string]func(Context, []byte) ([]byte, error){}
	loadTime  bool
)

// Main sets the plugin's setup function. Call it from an init function.
func Main(setup func(p *Plugin) error) { setupFn = setup }

func (p *Plugin) call(fn string, req any) ([]byte, error) {
	if !p.init {
		return nil, nil
	}
	return Call(fn, req)
}

// Section registers a static section.
func (p *Plugin) Section(name string, order int, text string) error {
	_, err := p.call(hostfns.FnSectionRegister, hostfns.SectionRequest{Name: name, Order: order, Text: text})
	return err
}

// DynamicSection registers a section whose text fn computes per assembly.
func (p *Plugin) DynamicSection(name string, order int, fn func(Context) (string, error)) error {
	sections[name] = fn
	_, err := p.call(hostfns.FnSectionRegister, hostfns.SectionRequest{Name: name, Order: order, Dynamic: true})
	return err
}

// Variable registers a variable whose value fn computes per assembly;
// ok=false means no value this time.
func (p *Plugin) Variable(name string, fn func(Context) (value string, ok bool, err error)) error {
	variables[name] = fn
	_, err := p.call(hostfns.FnVariableRegister, hostfns.NameRequest{Name: name})
	return err
}

// Tool registers a tool and the function that runs it.
func (p *Plugin) Tool(t Tool, fn ToolFunc) error {
	return p.tool(t, toolHandler{plain: fn})
}

// ToolArgs registers a tool like Tool, with a handler that receives its
// arguments parsed (see ArgsToolFunc). Arguments that are not a JSON
// object give the model an error result naming the byte at fault, without
// calling fn.
func (p *Plugin) ToolArgs(t Tool, fn ArgsToolFunc) error {
	return p.tool(t, toolHandler{args: fn})
}

func (p *Plugin) tool(t Tool, h toolHandler) error {
	tools[t.Name] = h
	_, err := p.call(hostfns.FnToolRegister, hostfns.ToolRequest{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	return err
}

// On subscribes fn to an event.
func (p *Plugin) On(event string, fn func(ctx Context, payload []byte) error) error {
	listeners[event] = func(ctx Context, b []byte) ([]byte, error) { return nil, fn(ctx, b) }
	_, err := p.call(hostfns.FnEventSubscribe, hostfns.SubscribeRequest{Event: event, Mode: hostfns.ModeListen})
	return err
}

// Waterfall subscribes fn to a waterfall event: fn returns the payload
// JSON, modified or not (nil means unchanged).
func (p *Plugin) Waterfall(event string, fn func(ctx Context, payload []byte) ([]byte, error)) error {
	listeners[event] = fn
	_, err := p.call(hostfns.FnEventSubscribe, hostfns.SubscribeRequest{Event: event, Mode: hostfns.ModeWaterfall})
	return err
}

// Need declares capabilities the plugin needs.
func (p *Plugin) Need(c hostfns.Capabilities) error {
	_, err := p.call(hostfns.FnCapabilities, c)
	return err
}

// RegisterTool registers a tool after dsh_init, from the load-time
// instance while it handles an event that belongs to no agent (a plugin
// that offers a tool only while something it needs exists). In dsh_init
// use Plugin.Tool.
func RegisterTool(t Tool, fn ToolFunc) error {
	tools[t.Name] = toolHandler{plain: fn}
	_, err := Call(hostfns.FnToolRegister, hostfns.ToolRequest{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	return err
}

// Unregister removes one of this plugin's registrations: kind is
// "section", "variable" or "tool". Allowed only in the load-time instance.
func Unregister(kind, name string) error {
	fn := map[string]string{"section": hostfns.FnSectionUnregister, "variable": hostfns.FnVariableUnregister, "tool": hostfns.FnToolUnregister}[kind]
	if fn == "" {
		return fmt.Errorf("unregister: unknown kind %q", kind)
	}
	_, err := Call(fn, hostfns.NameRequest{Name: name})
	return err
}

// logBuf holds Log's request, reused: logging from a hot tool costs no
// allocation and no reflection.
var logBuf []byte

// Log writes a message to the host's log, tagged with the plugin's name.
func Log(level, msg string) {
	b := append(logBuf[:0], `{"level":`...)
	b = jsonobj.AppendQuote(b, level)
	b = append(b, `,"message":`...)
	b = jsonobj.AppendQuote(b, msg)
	logBuf = append(b, '}')
	hostCall(hostfns.FnLog, logBuf)
}

// Emit emits an event in the plugin's namespace, plugin:<name>/<event>.
func Emit(event string, payload any) error {
	b, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	_, err = Call(hostfns.FnEventEmit, hostfns.EmitRequest{Event: event, Payload: b})
	return err
}

// StateGet reads key of the plugin's host-side state for the calling
// agent's session into v. found is false when the key is not set.
func StateGet(key string, v any) (found bool, err error) {
	b, err := Call(hostfns.FnStateGet, hostfns.StateGetRequest{Key: key})
	if err != nil {
		return false, err
	}
	var resp hostfns.StateGetResponse
	if err := json.Unmarshal(b, &resp); err != nil {
		return false, fmt.Errorf("state_get: %w", err)
	}
	if !resp.Found {
		return false, nil
	}
	return true, json.Unmarshal(resp.Value, v)
}

// StateSet writes key of the plugin's host-side state for the calling
// agent's session; a nil v deletes it.
func StateSet(key string, v any) error {
	req := hostfns.StateSetRequest{Key: key}
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		req.Value = b
	}
	_, err := Call(hostfns.FnStateSet, req)
	return err
}

// Getenv reads a host environment variable the plugin is granted.
func Getenv(name string) (value string, found bool, err error) {
	b, err := Call(hostfns.FnEnvGet, hostfns.NameRequest{Name: name})
	if err != nil {
		return "", false, err
	}
	var resp hostfns.EnvGetResponse
	if err := json.Unmarshal(b, &resp); err != nil {
		return "", false, fmt.Errorf("env_get: %w", err)
	}
	return resp.Value, resp.Found, nil
}

func callJSON(fn string, req, resp any) error {
	b, err := Call(fn, req)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, resp); err != nil {
		return fmt.Errorf("%s: bad response: %w", fn, err)
	}
	return nil
}

// Exec runs a command and waits for it. The plugin needs grants.exec.
func Exec(req hostfns.ExecRequest) (hostfns.ExecResult, error) {
	var r hostfns.ExecResult
	return r, callJSON(hostfns.FnExecRun, req, &r)
}

// ExecStart starts a background command and returns its id in the status.
func ExecStart(req hostfns.ExecRequest) (hostfns.ExecStatus, error) {
	var r hostfns.ExecStatus
	return r, callJSON(hostfns.FnExecStart, req, &r)
}

// ExecPoll reports a background command's state.
func ExecPoll(id string) (hostfns.ExecStatus, error) {
	var r hostfns.ExecStatus
	return r, callJSON(hostfns.FnExecPoll, hostfns.TaskRequest{ID: id}, &r)
}

// ExecKill kills a background command and everything it started.
func ExecKill(id string) (hostfns.ExecStatus, error) {
	var r hostfns.ExecStatus
	return r, callJSON(hostfns.FnExecKill, hostfns.TaskRequest{ID: id}, &r)
}

// HTTP makes a request to a granted host. The plugin needs grants.net.
func HTTP(req hostfns.HTTPRequest) (hostfns.HTTPResponse, error) {
	var r hostfns.HTTPResponse
	return r, callJSON(hostfns.FnHTTPRequest, req, &r)
}

// AppendSessionEvent records an event of type typ with payload data (a
// JSON object) in the calling agent's session. The operator must grant
// the type (grants.session_events).
func AppendSessionEvent(typ string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("session_event_append: marshal data: %w", err)
	}
	_, err = Call(hostfns.FnSessionEventAppend, hostfns.SessionEventRequest{Type: typ, Data: b})
	return err
}

// SubagentProviders lists the deployment's subagent providers.
func SubagentProviders() ([]hostfns.SubagentProvider, error) {
	b, err := Call(hostfns.FnSubagentProviders, []byte("{}"))
	if err != nil {
		return nil, err
	}
	var r hostfns.SubagentProviders
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("subagent_providers: decode: %w", err)
	}
	return r.Providers, nil
}

// RunSubagent runs a child agent on provider (granted under
// grants.subagents) and waits for it. Only a tool call may run one.
func RunSubagent(provider, description, prompt string) (hostfns.SubagentRunResponse, error) {
	var r hostfns.SubagentRunResponse
	b, err := Call(hostfns.FnSubagentRun, hostfns.SubagentRunRequest{Provider: provider, Description: description, Prompt: prompt})
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("subagent_run: decode: %w", err)
	}
	return r, nil
}

// Call calls host function fn with req marshalled as JSON (a []byte or
// json.RawMessage req is sent as is) and returns the response payload.
func Call(fn string, req any) ([]byte, error) {
	var in []byte
	switch r := req.(type) {
	case []byte:
		in = r
	case json.RawMessage:
		in = r
	default:
		var err error
		if in, err = json.Marshal(req); err != nil {
			return nil, fmt.Errorf("%s: marshal request: %w", fn, err)
		}
	}
	st, out := hostCall(fn, in)
	if st != hostfns.StatusOK {
		return nil, &HostError{Func: fn, Status: st, Message: string(out)}
	}
	return out, nil
}

// The export handlers, shared by the wasip1 bindings and host-side tests.

func handleSetup(config []byte, init bool) ([]byte, hostfns.OutStatus) {
	loadTime = init
	if setupFn == nil {
		return []byte("the plugin called no guest.Main"), hostfns.OutError
	}
	p := &Plugin{Config: append([]byte(nil), config...), init: init}
	if err := setupFn(p); err != nil {
		return []byte(err.Error()), hostfns.OutError
	}
	return nil, hostfns.OutOK
}

// splitFrame splits an export's input into n (at most 3) NUL-separated
// fields; the last field takes the rest.
func splitFrame(in []byte, n int) (f [3][]byte, ok bool) {
	for i := 0; i < n-1; i++ {
		j := indexNUL(in)
		if j < 0 {
			return f, false
		}
		f[i] = in[:j]
		in = in[j+1:]
	}
	f[n-1] = in
	return f, true
}

// indexNUL is bytes.IndexByte, whose Wasm assembly scans four times
// faster than a loop compiled from Go.
func indexNUL(b []byte) int { return bytes.IndexByte(b, hostfns.FrameSep) }

func handleSection(in []byte) ([]byte, hostfns.OutStatus) {
	f, ok := splitFrame(in, 2)
	if !ok {
		return []byte("dsh_section: malformed frame"), hostfns.OutError
	}
	fn := sections[string(f[0])]
	if fn == nil {
		return []byte("no dynamic section " + string(f[0])), hostfns.OutError
	}
	text, err := fn(Context{raw: f[1]})
	if err != nil {
		return []byte(err.Error()), hostfns.OutError
	}
	return []byte(text), hostfns.OutOK
}

func handleVariable(in []byte) ([]byte, hostfns.OutStatus) {
	f, ok := splitFrame(in, 2)
	if !ok {
		return []byte("dsh_variable: malformed frame"), hostfns.OutError
	}
	fn := variables[string(f[0])]
	if fn == nil {
		return []byte("no variable " + string(f[0])), hostfns.OutError
	}
	v, has, err := fn(Context{raw: f[1]})
	if err != nil {
		return []byte(err.Error()), hostfns.OutError
	}
	if !has {
		return nil, hostfns.OutNoValue
	}
	return []byte(v), hostfns.OutOK
}

func handleTool(in []byte) ([]byte, hostfns.OutStatus) {
	f, ok := splitFrame(in, 3)
	if !ok {
		return []byte("dsh_tool: malformed frame"), hostfns.OutError
	}
	t, ok := tools[string(f[0])]
	if !ok {
		return []byte("no tool " + string(f[0])), hostfns.OutError
	}
	return t.run(Context{raw: f[1]}, f[2])
}

func handleEvent(in []byte) ([]byte, hostfns.OutStatus) {
	f, ok := splitFrame(in, 3)
	if !ok {
		return []byte("dsh_event: malformed frame"), hostfns.OutError
	}
	fn := listeners[string(f[0])]
	if fn == nil {
		return []byte("no handler for event " + string(f[0])), hostfns.OutError
	}
	out, err := fn(Context{raw: f[1]}, f[2])
	if err != nil {
		return []byte(err.Error()), hostfns.OutError
	}
	return out, hostfns.OutOK
}
