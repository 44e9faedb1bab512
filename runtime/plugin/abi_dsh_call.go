package plugin

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/runtime/plugin/internal/abi/dsh"
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
		in.pending = nil // a payload not taken is gone at the next host call
		inPtr, inLen := uint32(stack[0]), uint32(stack[1])
		outPtr, outCap := uint32(stack[2]), uint32(stack[3])
		if err := cs.guard.Stopped(); err != nil {
			stack[0] = in.deliver(hostfns.ErrCanceled, []byte(f.Name+": the call was stopped: "+err.Error()), outPtr, outCap)
			return
		}
		var st hostfns.Status
		var payload []byte
		answered := false
		if cs.replay != nil {
			// A new load-time instance re-running the first one's history:
			// answered from the record, nothing done again (manifest.go).
			st, payload, answered = cs.replay.answer(in, f.Name, inPtr, inLen)
		}
		if !answered {
			st, payload = in.serve(f, impl, cs, inPtr, inLen, outPtr, outCap)
			if cs.rec != nil {
				cs.rec.note(in, f.Name, inPtr, inLen, st, payload)
			}
		}
		stack[0] = in.deliver(st, payload, outPtr, outCap)
	}
}

func (in *instance) serve(f hostfns.Func, impl dsh.Impl, cs *callState, inPtr, inLen, outPtr, outCap uint32) (st hostfns.Status, payload []byte) {
	defer func() {
		if r := recover(); r != nil {
			in.p.log.Error("host function panicked", "func", f.Name, "panic", r)
			st, payload = hostfns.ErrInternal, []byte(fmt.Sprintf("%s: internal error", f.Name))
		}
	}()
	memSize := in.mem.Size()
	if uint64(outPtr)+uint64(outCap) > uint64(memSize) {
		return hostfns.ErrBadPointer, []byte(fmt.Sprintf("%s: out buffer %#x+%d is outside guest memory (%d bytes)", f.Name, outPtr, outCap, memSize))
	}
	if st, payload := in.admit(f, cs, inLen); st != hostfns.StatusOK {
		return st, payload
	}
	req, ok := in.mem.Read(inPtr, inLen)
	if !ok {
		return hostfns.ErrBadPointer, []byte(fmt.Sprintf("%s: request %#x+%d is outside guest memory (%d bytes)", f.Name, inPtr, inLen, memSize))
	}
	if inLen > 0 && outCap > 0 && inPtr < outPtr+outCap && outPtr < inPtr+inLen {
		return hostfns.ErrBadPointer, []byte(fmt.Sprintf("%s: request %#x+%d overlaps the out buffer %#x+%d", f.Name, inPtr, inLen, outPtr, outCap))
	}
	return in.handle(f, impl, cs, req)
}

// admit checks a request's length against the function's limit and
// charges it to the call's host byte budget, before the host reads it.
func (in *instance) admit(f hostfns.Func, cs *callState, inLen uint32) (hostfns.Status, []byte) {
	if limit, why := in.p.requestLimit(f.Name); inLen > limit {
		return hostfns.ErrTooLarge, []byte(fmt.Sprintf("%s: request of %d bytes exceeds the limit of %d%s", f.Name, inLen, limit, why))
	}
	if !cs.chargeHost(in.p, int64(inLen)) {
		return hostfns.ErrLimit, []byte(fmt.Sprintf("%s: this call's host byte budget (grants.limits.host_bytes, %d bytes) is spent", f.Name, in.p.limits.HostBytes))
	}
	return hostfns.StatusOK, nil
}

// handle checks an admitted request's encoding and phase, runs impl, and
// charges the response. A recorded dsh_init is replayed through it too
// (manifest.go), so a replay answers as the live call would.
func (in *instance) handle(f hostfns.Func, impl dsh.Impl, cs *callState, req []byte) (hostfns.Status, []byte) {
	if !utf8.Valid(req) {
		return hostfns.ErrBadUTF8, []byte(f.Name + ": request is not valid UTF-8")
	}
	if f.Phase == hostfns.LoadInstance && (!in.loadTime || cs.setup) {
		return hostfns.ErrDenied, []byte(f.Name + ": only the load-time instance may do this (dsh_init, or an event that belongs to no agent); this call is in a per-agent instance or dsh_setup")
	}
	resp, st, msg := impl((*dshHost)(in), req)
	if st != hostfns.StatusOK {
		return st, []byte(f.Name + ": " + msg)
	}
	if !cs.chargeHost(in.p, int64(len(resp))) {
		return hostfns.ErrLimit, []byte(fmt.Sprintf("%s: a response of %d bytes would pass this call's host byte budget (grants.limits.host_bytes, %d bytes)", f.Name, len(resp), in.p.limits.HostBytes))
	}
	return hostfns.StatusOK, resp
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

// deliver writes payload to the out buffer if it fits, or keeps it for
// take, and returns the result word.
func (in *instance) deliver(st hostfns.Status, payload []byte, outPtr, outCap uint32) uint64 {
	n := uint32(len(payload))
	if n == 0 {
		return hostfns.Pack(st, 0)
	}
	if n <= outCap && in.mem.Write(outPtr, payload) {
		return hostfns.Pack(st, n)
	}
	in.pending = payload
	return hostfns.Pack(st, n)
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
	ptr, n := uint32(stack[0]), uint32(stack[1])
	if in == nil || in.cur == nil || in.pending == nil || uint32(len(in.pending)) != n || !in.mem.Write(ptr, in.pending) {
		stack[0] = api.EncodeI32(-1)
		return
	}
	in.pending = nil
	stack[0] = uint64(n)
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
