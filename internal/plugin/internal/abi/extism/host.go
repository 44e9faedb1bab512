package extism

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"

	"github.com/dsh-wasm/dsh-wasm/hostfns/jsonobj"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/netguard"
	"github.com/tetratelabs/wazero/api"
)

// ErrUnsupported: an Extism plugin called a host function this host does
// not offer (hyper-mcp's sampling, elicitation, roots, prompts and
// resources). The call fails; the agent gets an error result.
var ErrUnsupported = errors.New("unsupported host function")

// Byte limits of an Extism instance's vars. go-sdk disables vars when its
// MaxVarBytes is zero; ours are explicit.
const (
	// MaxVarBytes caps an instance's vars (keys and values); a var_set
	// beyond it fails the call.
	MaxVarBytes = 1 << 20
	// MaxVarKey caps one var key or config key asked for.
	MaxVarKey = 4096
)

// Host is what the Go functions of the kernel need of the plugin host,
// for the call in progress.
type Host interface {
	// Context is the call's.
	Context() context.Context
	// Logger is the plugin's; RateLog runs log unless the plugin's log
	// rate is spent (n bytes).
	Logger() *slog.Logger
	RateLog(n int, log func())
	// Config is the plugin's config as Extism sees it.
	Config(key string) (string, bool)
	// Fetch makes an HTTP request under the plugin's net grants, its wait
	// left out of the compute budget.
	Fetch(netguard.Request) (netguard.Response, error)
}

// Instance is what an Extism instance keeps besides its guest: its kernel,
// its vars, and during a call the HTTP answer and why the host failed it.
type Instance struct {
	*Kernel

	vars     map[string][]byte
	varBytes int

	// Valid during a call.
	abortErr    error
	httpStatus  int32
	httpHeaders []byte

	// The tool-call path's buffers, reused: the arguments' check
	// (argsMu), the result's rendering (Results); both are used outside
	// the call, before and after it.
	argsMu sync.Mutex
	args   jsonobj.Obj
	Results
}

// CheckArgs checks that a tool call's arguments are one JSON object, as
// the call input splices them in as they are; without reflection.
func (x *Instance) CheckArgs(args []byte) error {
	x.argsMu.Lock()
	defer x.argsMu.Unlock()
	return x.args.Parse(args)
}

// NewInstance binds an instance of Module beside a guest.
func NewInstance(kernel api.Module) *Instance {
	return &Instance{Kernel: NewKernel(kernel), vars: map[string][]byte{}}
}

// Begin readies the instance for a call: the kernel is reset and the
// last call's HTTP answer and failure are forgotten.
func (x *Instance) Begin() {
	x.abortErr, x.httpStatus, x.httpHeaders = nil, 0, nil
	x.Reset()
}

// Failure is why the host failed the call in progress, or nil.
func (x *Instance) Failure() error { return x.abortErr }

// Fail fails the call in progress for err: the kernel traps when the Go
// function returns, and Failure reports err.
func (x *Instance) Fail(err error) {
	x.abortErr = err
	x.Abort()
}

// Serve runs the kernel Go function name for h, with its parameters and
// results on stack. It never panics: a panic is logged and fails the call,
// as any error does.
func (x *Instance) Serve(h Host, name string, stack []uint64) {
	fn := impls[name]
	if fn == nil {
		x.Fail(fmt.Errorf("%s: no such host function", name))
		return
	}
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				h.Logger().Error("extism host function panicked", "func", name, "panic", r)
				err = errors.New("internal error") // named once, below
			}
		}()
		return fn(h, x, stack)
	}()
	if err != nil {
		x.Fail(fmt.Errorf("%s: %w", name, err))
	}
}

// Implemented reports whether the kernel Go function name has an
// implementation.
func Implemented(name string) bool { return impls[name] != nil }

// impl serves one kernel Go function. It reads its parameters from stack
// and writes its results there; a non-nil error fails the call (the
// kernel traps on the abort flag and the host reports the error).
type impl func(h Host, x *Instance, stack []uint64) error

var impls = map[string]impl{
	"config_get":                   extConfigGet,
	"var_get":                      extVarGet,
	"var_set":                      extVarSet,
	"http_request":                 extHTTPRequest,
	"http_status_code":             extHTTPStatus,
	"http_headers":                 extHTTPHeaders,
	"log_info":                     extLog(slog.LevelInfo),
	"log_debug":                    extLog(slog.LevelDebug),
	"log_warn":                     extLog(slog.LevelWarn),
	"log_error":                    extLog(slog.LevelError),
	"log_trace":                    extLog(slog.LevelDebug - 4),
	"get_log_level":                extLogLevel,
	"create_elicitation":           extUnsupported("elicitation (create_elicitation): dsh-wasm has no MCP client to ask"),
	"create_message":               extUnsupported("sampling (create_message): dsh-wasm does not lend its model to plugins"),
	"list_roots":                   extUnsupported("roots (list_roots): dsh-wasm has no MCP client roots; use the fs grants"),
	"notify_logging_message":       extNotify("logging message"),
	"notify_progress":              extNotify("progress"),
	"notify_prompt_list_changed":   extUnsupported("prompts (notify_prompt_list_changed): dsh-wasm serves a plugin's tools only"),
	"notify_resource_list_changed": extUnsupported("resources (notify_resource_list_changed): dsh-wasm serves a plugin's tools only"),
	"notify_resource_updated":      extUnsupported("resources (notify_resource_updated): dsh-wasm serves a plugin's tools only"),
	"notify_tool_list_changed":     extUnsupported("tool list changes (notify_tool_list_changed): a community plugin's tools are listed once, at load, and every agent sees that list until the plugin is reloaded"),
}

// keyArg reads the block at off as a key of at most MaxVarKey bytes.
func keyArg(x *Instance, off uint64) (string, error) {
	b, err := x.ReadBlock(off)
	if err != nil {
		return "", fmt.Errorf("key: %w", err)
	}
	if len(b) > MaxVarKey {
		return "", fmt.Errorf("key of %d bytes exceeds %d", len(b), MaxVarKey)
	}
	return string(b), nil
}

// answer writes b as a new block and returns its offset in stack[0]; nil
// or empty gives 0, the null offset.
func answer(x *Instance, stack []uint64, b []byte) error {
	off, err := x.WriteBlock(b)
	if err != nil {
		return err
	}
	stack[0] = off
	return nil
}

func extConfigGet(h Host, x *Instance, stack []uint64) error {
	k, err := keyArg(x, stack[0])
	if err != nil {
		return err
	}
	v, ok := h.Config(k)
	if !ok {
		stack[0] = 0
		return nil
	}
	return answer(x, stack, []byte(v))
}

func extVarGet(h Host, x *Instance, stack []uint64) error {
	k, err := keyArg(x, stack[0])
	if err != nil {
		return err
	}
	return answer(x, stack, x.vars[k])
}

func extVarSet(h Host, x *Instance, stack []uint64) error {
	k, err := keyArg(x, stack[0])
	if err != nil {
		return err
	}
	old, had := x.vars[k]
	if stack[1] == 0 {
		if had {
			x.varBytes -= len(k) + len(old)
			delete(x.vars, k)
		}
		return nil
	}
	v, err := x.ReadBlock(stack[1])
	if err != nil {
		return fmt.Errorf("value: %w", err)
	}
	size := x.varBytes + len(v)
	if had {
		size -= len(old)
	} else {
		size += len(k)
	}
	if size > MaxVarBytes {
		return fmt.Errorf("vars would hold %d bytes; the limit is %d", size, MaxVarBytes)
	}
	x.vars[k] = append([]byte(nil), v...)
	x.varBytes = size
	return nil
}

// httpRequest is the request JSON of Extism's http_request.
type httpRequest struct {
	URL     string            `json:"url"`
	Method  string            `json:"method"`
	Headers map[string]string `json:"headers"`
}

// extHTTPRequest fetches through the plugin's netguard Fetcher: the
// granted hosts are checked on the first URL and on every redirect, and
// private addresses are refused unless granted. A refusal fails the call
// with the reason (Extism's own host fails it too).
func extHTTPRequest(h Host, x *Instance, stack []uint64) error {
	rb, err := x.ReadBlock(stack[0])
	if err != nil {
		return fmt.Errorf("request: %w", err)
	}
	var r httpRequest
	if err := json.Unmarshal(rb, &r); err != nil {
		return fmt.Errorf("request is not {url, method, headers}: %w", err)
	}
	nr := netguard.Request{Method: r.Method, URL: r.URL, Headers: r.Headers}
	if stack[1] != 0 {
		body, err := x.ReadBlock(stack[1])
		if err != nil {
			return fmt.Errorf("body: %w", err)
		}
		nr.BodyBase64 = base64.StdEncoding.EncodeToString(body)
	}
	// grants.net.timeout bounds the request: its wait is left out of the
	// compute budget, not the wall-clock cap (as dsh:host/v1's).
	resp, err := h.Fetch(nr)
	if err != nil {
		return err
	}
	body := []byte(resp.Body)
	if resp.BodyBase64 != "" {
		if body, err = base64.StdEncoding.DecodeString(resp.BodyBase64); err != nil {
			return fmt.Errorf("response body: %w", err)
		}
	}
	x.httpStatus = int32(resp.Status)
	hdr := make(map[string]string, len(resp.Headers))
	for k, vs := range resp.Headers {
		hdr[strings.ToLower(k)] = strings.Join(vs, ", ")
	}
	x.httpHeaders, _ = json.Marshal(hdr)
	return answer(x, stack, body)
}

func extHTTPStatus(h Host, x *Instance, stack []uint64) error {
	stack[0] = api.EncodeI32(x.httpStatus)
	return nil
}

func extHTTPHeaders(h Host, x *Instance, stack []uint64) error {
	return answer(x, stack, x.httpHeaders)
}

// MaxLog caps one log message from an Extism plugin.
const MaxLog = 64 << 10

func extLog(level slog.Level) impl {
	return func(h Host, x *Instance, stack []uint64) error {
		if !h.Logger().Enabled(h.Context(), level) {
			return nil
		}
		b, err := x.ReadBlock(stack[0])
		if err != nil {
			return fmt.Errorf("message: %w", err)
		}
		msg := strings.ToValidUTF8(string(b[:min(len(b), MaxLog)]), "\uFFFD")
		h.RateLog(len(msg), func() { h.Logger().Log(h.Context(), level, msg, "stream", "extism") })
		return nil
	}
}

// extLogLevel answers Extism's levels: 0 trace, 1 debug, 2 info, 3 warn,
// 4 error, MaxInt32 off; the lowest the plugin's logger takes.
func extLogLevel(h Host, x *Instance, stack []uint64) error {
	lv := int32(math.MaxInt32)
	for i, l := range []slog.Level{slog.LevelDebug - 4, slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError} {
		if h.Logger().Enabled(h.Context(), l) {
			lv = int32(i)
			break
		}
	}
	stack[0] = api.EncodeI32(lv)
	return nil
}

func extUnsupported(what string) impl {
	return func(h Host, x *Instance, stack []uint64) error {
		return fmt.Errorf("%w: %s", ErrUnsupported, what)
	}
}

// extNotify logs an MCP notification (progress, logging message) the
// plugin sends: dsh-wasm has no MCP client to forward it to.
func extNotify(kind string) impl {
	return func(h Host, x *Instance, stack []uint64) error {
		b, err := x.ReadBlock(stack[0])
		if err != nil {
			return fmt.Errorf("notification: %w", err)
		}
		if !json.Valid(b) {
			return errors.New("notification is not JSON")
		}
		level := slog.LevelInfo
		var m struct {
			Level string `json:"level"`
		}
		if json.Unmarshal(b, &m) == nil {
			switch m.Level {
			case "debug":
				level = slog.LevelDebug
			case "warning":
				level = slog.LevelWarn
			case "error", "critical", "alert", "emergency":
				level = slog.LevelError
			}
		}
		if len(b) > MaxLog {
			b = b[:MaxLog]
		}
		h.RateLog(len(b), func() { h.Logger().Log(h.Context(), level, "mcp "+kind, "stream", "extism", "notification", string(b)) })
		return nil
	}
}
