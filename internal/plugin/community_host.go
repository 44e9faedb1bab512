package plugin

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/abi/extism"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/netguard"
	"github.com/tetratelabs/wazero/api"
)

// ErrUnsupported: an Extism plugin called a host function this host does
// not offer (hyper-mcp's sampling, elicitation, roots, prompts and
// resources). The call fails; the agent gets an error result.
var ErrUnsupported = extism.ErrUnsupported

// wrapExtism serves the kernel Go function name (extism.Instance.Serve):
// it finds the calling instance from the kernel module, lets the compute
// budget run while the host works and answers a stopped call without
// working (exactly as wrapHost does for dsh:host/v1: keep the two in
// step).
func (p *Plugin) wrapExtism(name string) api.GoModuleFunc {
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		in := p.instanceOf(mod)
		var x *extism.Instance
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
			x.Fail(fmt.Errorf("%s: called outside a tool call (from _initialize?)", name))
			return
		}
		if why := cs.guard.Stopped(); why != nil {
			x.Fail(fmt.Errorf("%s: the call was stopped: %w", name, why))
			return
		}
		x.Serve((*extismHost)(in), name, stack)
	}
}

// extismHost is an instance seen by the Extism host functions
// (extism.Host), for the call in progress.
type extismHost instance

func (h *extismHost) Context() context.Context  { return h.cur.ctx }
func (h *extismHost) Logger() *slog.Logger      { return h.p.log }
func (h *extismHost) RateLog(n int, log func()) { h.p.rateLog(n, log) }
func (h *extismHost) Config(k string) (string, bool) {
	v, ok := h.p.extConfig[k]
	return v, ok
}

// Fetch goes through the plugin's netguard Fetcher: the granted hosts are
// checked on the first URL and on every redirect, and private addresses
// are refused unless granted. grants.net.timeout bounds the request, so
// its wait is left out of the compute budget, not the wall-clock cap.
func (h *extismHost) Fetch(r netguard.Request) (netguard.Response, error) {
	f := h.p.sandbox.net
	if f == nil {
		return netguard.Response{}, fmt.Errorf("%w: plugin %q is not granted network access (grants.net.allowed_hosts); refused %s", ErrNotGranted, h.p.name, r.URL)
	}
	resp, err := f.Fetch(h.cur.boundedWait(), r)
	h.cur.endBoundedWait()
	return resp, err
}
