package plugin

import (
	"context"
	"fmt"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/abi/dsh"
	"github.com/tetratelabs/wazero/api"
)

// instantiateHostModule provides dsh:host/v1 in the plugin's runtime.
func (p *Plugin) instantiateHostModule(ctx context.Context) error {
	return dsh.Instantiate(ctx, p.rt, func(f hostfns.Func) (api.GoModuleFunc, error) {
		impl := dsh.Impls[f.Name]
		if impl == nil {
			return nil, fmt.Errorf("host function %s has no implementation", f.Name)
		}
		return p.wrapHost(f, impl), nil
	}, p.hostTake())
}

// requestLimit is the largest request the host reads for fn, and what
// sets it when that is not hostfns.MaxRequestBytes.
func (p *Plugin) requestLimit(fn string) (uint32, string) {
	return dsh.RequestLimit(fn, p.limits.PromptBytes)
}

// wrapHost adapts impl to the calling convention. It validates the
// pointers, the size and the UTF-8 of the request, charges the call's
// host byte budget, and delivers the result. The compute budget keeps
// running while the host works (see guard): only waits another grant
// bounds leave it out. A call that has been stopped (its budget, its wall
// cap, its caller, or the host) gets ErrCanceled from every later host
// call, before any work. It never panics: a panic in impl is recovered
// and reported to the guest as ErrInternal.
func (p *Plugin) wrapHost(f hostfns.Func, impl dsh.Impl) api.GoModuleFunc {
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		in := p.instanceOf(mod)
		if in == nil || in.cur == nil {
			// Called outside any call the host made (from _initialize, say).
			stack[0] = hostfns.Pack(hostfns.ErrDenied, 0)
			return
		}
		cs := in.cur
		if cs.setup && !dsh.SetupNeutral[f.Name] {
			cs.scoped = true // this dsh_setup's outcome may depend on the agent
		}
		h := (*dshHost)(in)
		h.scratch.Pending = nil // a payload not taken is gone at the next host call
		inPtr, inLen := uint32(stack[0]), uint32(stack[1])
		outPtr, outCap := uint32(stack[2]), uint32(stack[3])
		if err := cs.guard.Stopped(); err != nil {
			stack[0] = dsh.Deliver(h, hostfns.ErrCanceled, []byte(f.Name+": the call was stopped: "+err.Error()), outPtr, outCap)
			return
		}
		var st hostfns.Status
		var payload []byte
		answered := false
		if cs.replay != nil {
			// A new load-time instance re-running the first one's history:
			// answered from the record, nothing done again (manifest.go).
			st, payload, answered = cs.replay.Answer(in.mem, f.Name, inPtr, inLen)
		}
		if !answered {
			st, payload = dsh.Serve(h, f, impl, inPtr, inLen, outPtr, outCap)
			if cs.rec != nil {
				cs.rec.Note(in.mem, f.Name, inPtr, inLen, st, payload)
			}
		}
		stack[0] = dsh.Deliver(h, st, payload, outPtr, outCap)
	}
}

// replay serves one recorded request as dsh.Serve would have, without guest
// memory. The host functions see cs as the call in progress.
func (in *instance) replay(f hostfns.Func, cs *callState, req []byte) (hostfns.Status, []byte) {
	in.cur = cs
	defer func() { in.cur = nil }()
	h := (*dshHost)(in)
	if st, payload := dsh.Admit(h, f, uint32(len(req))); st != hostfns.StatusOK {
		return st, payload
	}
	return dsh.Handle(h, f, dsh.Impls[f.Name], req)
}

// chargeHost counts n bytes of host work against the call's host byte
// budget; false when it would pass it (nothing is charged then).
func (cs *callState) chargeHost(p *Plugin, n int64) bool {
	if cs.hostBytes+n > p.limits.HostBytes {
		return false
	}
	cs.hostBytes += n
	return true
}

// instanceOf returns the instance whose module is calling a host function.
func (p *Plugin) instanceOf(mod api.Module) *instance {
	in, _ := p.byModule.Load(mod)
	i, _ := in.(*instance)
	return i
}

// hostTake implements take(ptr, n) -> i32.
func (p *Plugin) hostTake() api.GoModuleFunc {
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		p.take(mod, stack)
	}
}

func (p *Plugin) take(mod api.Module, stack []uint64) {
	in := p.instanceOf(mod)
	if in == nil || in.cur == nil {
		stack[0] = api.EncodeI32(-1)
		return
	}
	stack[0] = dsh.Take((*dshHost)(in), uint32(stack[0]), uint32(stack[1]))
}

// boundedWait starts a wait another grant bounds (an exec timeout, the net
// timeout; later a subagent's own budget): it is left out of the compute
// budget, except in dsh_init and dsh_setup, whose budget counts every
// wait. It returns the context to wait under, which ends when the call is
// stopped. Pair it with endBoundedWait.
func (cs *callState) boundedWait() context.Context {
	if !cs.init && !cs.setup {
		cs.guard.BeginWait()
	}
	return cs.guard.HostCtx()
}

func (cs *callState) endBoundedWait() {
	if !cs.init && !cs.setup {
		cs.guard.EndWait()
	}
}
