package plugin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/netguard"
	"github.com/tetratelabs/wazero/api"
)

// ErrUnsupported: an Extism plugin called a host function this host does
// not offer (hyper-mcp's sampling, elicitation, roots, prompts and
// resources). The call fails; the agent gets an error result.
var ErrUnsupported = errors.New("unsupported host function")

// extismImpl serves one kernel Go function. It reads its parameters from
// stack and writes its results there; a non-nil error fails the call (the
// kernel traps on the abort flag and the host reports the error).
type extismImpl func(in *instance, x *extismState, cs *callState, stack []uint64) error

// wrapExtism adapts impl: it finds the calling instance from the kernel
// module, lets the compute budget run while the host works and answers a
// stopped call without working (exactly as wrapHost does for dsh:host/v1:
// keep the two in step), recovers panics, and turns an error into the
// abort flag.
func (p *Plugin) wrapExtism(name string, impl extismImpl) api.GoModuleFunc {
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		in := p.instanceOf(mod)
		var x *extismState
		if in != nil {
			x = extismOf(in)
		}
		if x == nil {
			clear(stack)
			return
		}
		cs := in.cur
		if cs == nil {
			// From _initialize: nothing of the host is available yet.
			x.abortErr = fmt.Errorf("%s: called outside a tool call (from _initialize?)", name)
			x.Abort()
			return
		}
		if why := cs.guard.Stopped(); why != nil {
			x.abortErr = fmt.Errorf("%s: the call was stopped: %w", name, why)
			x.Abort()
			return
		}
		err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					p.log.Error("extism host function panicked", "func", name, "panic", r)
					err = fmt.Errorf("%s: internal error", name)
				}
			}()
			return impl(in, x, cs, stack)
		}()
		if err != nil {
			x.abortErr = fmt.Errorf("%s: %w", name, err)
			x.Abort()
		}
	}
}

var extismImpls = map[string]extismImpl{
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

// keyArg reads the block at off as a key of at most maxExtismVarKey bytes.
func keyArg(x *extismState, off uint64) (string, error) {
	b, err := x.ReadBlock(off)
	if err != nil {
		return "", fmt.Errorf("key: %w", err)
	}
	if len(b) > maxExtismVarKey {
		return "", fmt.Errorf("key of %d bytes exceeds %d", len(b), maxExtismVarKey)
	}
	return string(b), nil
}

// answer writes b as a new block and returns its offset in stack[0]; nil
// or empty gives 0, the null offset.
func answer(x *extismState, stack []uint64, b []byte) error {
	off, err := x.WriteBlock(b)
	if err != nil {
		return err
	}
	stack[0] = off
	return nil
}

func extConfigGet(in *instance, x *extismState, cs *callState, stack []uint64) error {
	k, err := keyArg(x, stack[0])
	if err != nil {
		return err
	}
	v, ok := in.p.extConfig[k]
	if !ok {
		stack[0] = 0
		return nil
	}
	return answer(x, stack, []byte(v))
}

func extVarGet(in *instance, x *extismState, cs *callState, stack []uint64) error {
	k, err := keyArg(x, stack[0])
	if err != nil {
		return err
	}
	return answer(x, stack, x.vars[k])
}

func extVarSet(in *instance, x *extismState, cs *callState, stack []uint64) error {
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
	if size > maxExtismVarBytes {
		return fmt.Errorf("vars would hold %d bytes; the limit is %d", size, maxExtismVarBytes)
	}
	x.vars[k] = append([]byte(nil), v...)
	x.varBytes = size
	return nil
}

// extismHTTPRequest is the request JSON of Extism's http_request.
type extismHTTPRequest struct {
	URL     string            `json:"url"`
	Method  string            `json:"method"`
	Headers map[string]string `json:"headers"`
}

// extHTTPRequest fetches through the plugin's netguard Fetcher: the
// granted hosts are checked on the first URL and on every redirect, and
// private addresses are refused unless granted. A refusal fails the call
// with the reason (Extism's own host fails it too).
func extHTTPRequest(in *instance, x *extismState, cs *callState, stack []uint64) error {
	rb, err := x.ReadBlock(stack[0])
	if err != nil {
		return fmt.Errorf("request: %w", err)
	}
	var r extismHTTPRequest
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
	f := in.p.sandbox.net
	if f == nil {
		return fmt.Errorf("%w: plugin %q is not granted network access (grants.net.allowed_hosts); refused %s", ErrNotGranted, in.p.name, r.URL)
	}
	// grants.net.timeout bounds the request: its wait is left out of the
	// compute budget, not the wall-clock cap (as dsh:host/v1's).
	resp, err := f.Fetch(cs.boundedWait(), nr)
	cs.endBoundedWait()
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

func extHTTPStatus(in *instance, x *extismState, cs *callState, stack []uint64) error {
	stack[0] = api.EncodeI32(x.httpStatus)
	return nil
}

func extHTTPHeaders(in *instance, x *extismState, cs *callState, stack []uint64) error {
	return answer(x, stack, x.httpHeaders)
}

// maxExtismLog caps one log message from an Extism plugin.
const maxExtismLog = 64 << 10

func extLog(level slog.Level) extismImpl {
	return func(in *instance, x *extismState, cs *callState, stack []uint64) error {
		if !in.p.log.Enabled(cs.ctx, level) {
			return nil
		}
		b, err := x.ReadBlock(stack[0])
		if err != nil {
			return fmt.Errorf("message: %w", err)
		}
		msg := strings.ToValidUTF8(string(b[:min(len(b), maxExtismLog)]), "\uFFFD")
		in.p.rateLog(len(msg), func() { in.p.log.Log(cs.ctx, level, msg, "stream", "extism") })
		return nil
	}
}

// extLogLevel answers Extism's levels: 0 trace, 1 debug, 2 info, 3 warn,
// 4 error, MaxInt32 off; the lowest the plugin's logger takes.
func extLogLevel(in *instance, x *extismState, cs *callState, stack []uint64) error {
	lv := int32(math.MaxInt32)
	for i, l := range []slog.Level{slog.LevelDebug - 4, slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError} {
		if in.p.log.Enabled(cs.ctx, l) {
			lv = int32(i)
			break
		}
	}
	stack[0] = api.EncodeI32(lv)
	return nil
}

func extUnsupported(what string) extismImpl {
	return func(in *instance, x *extismState, cs *callState, stack []uint64) error {
		return fmt.Errorf("%w: %s", ErrUnsupported, what)
	}
}

// extNotify logs an MCP notification (progress, logging message) the
// plugin sends: dsh-wasm has no MCP client to forward it to.
func extNotify(kind string) extismImpl {
	return func(in *instance, x *extismState, cs *callState, stack []uint64) error {
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
		if len(b) > maxExtismLog {
			b = b[:maxExtismLog]
		}
		in.p.rateLog(len(b), func() { in.p.log.Log(cs.ctx, level, "mcp "+kind, "stream", "extism", "notification", string(b)) })
		return nil
	}
}
