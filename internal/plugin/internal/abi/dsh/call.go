package dsh

import (
	"fmt"
	"unicode/utf8"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/tetratelabs/wazero/api"
)

// The calling convention of dsh:host/v1: a host function gets a request
// (in_ptr, in_len) and an out buffer (out_ptr, out_cap) in guest memory,
// and returns a result word (hostfns.Pack); a payload that does not fit
// the out buffer waits for take.

// Serve answers one host call of f with impl: it checks the out buffer
// and the request against guest memory, admits the request (Admit),
// reads it and hands it to Handle.
func Serve(h Host, f hostfns.Func, impl Impl, inPtr, inLen, outPtr, outCap uint32) (hostfns.Status, []byte) {
	mem := h.Memory()
	memSize := mem.Size()
	if uint64(outPtr)+uint64(outCap) > uint64(memSize) {
		return hostfns.ErrBadPointer, []byte(fmt.Sprintf("%s: out buffer %#x+%d is outside guest memory (%d bytes)", f.Name, outPtr, outCap, memSize))
	}
	if st, payload := Admit(h, f, inLen); st != hostfns.StatusOK {
		return st, payload
	}
	req, ok := mem.Read(inPtr, inLen)
	if !ok {
		return hostfns.ErrBadPointer, []byte(fmt.Sprintf("%s: request %#x+%d is outside guest memory (%d bytes)", f.Name, inPtr, inLen, memSize))
	}
	if inLen > 0 && outCap > 0 && inPtr < outPtr+outCap && outPtr < inPtr+inLen {
		return hostfns.ErrBadPointer, []byte(fmt.Sprintf("%s: request %#x+%d overlaps the out buffer %#x+%d", f.Name, inPtr, inLen, outPtr, outCap))
	}
	return Handle(h, f, impl, req)
}

// Admit checks a request's length against the function's limit and
// charges it to the call's host byte budget, before the host reads it.
func Admit(h Host, f hostfns.Func, inLen uint32) (hostfns.Status, []byte) {
	if limit, why := RequestLimit(f.Name, h.Limits().PromptBytes); inLen > limit {
		return hostfns.ErrTooLarge, []byte(fmt.Sprintf("%s: request of %d bytes exceeds the limit of %d%s", f.Name, inLen, limit, why))
	}
	if !h.ChargeHost(int64(inLen)) {
		return hostfns.ErrLimit, []byte(fmt.Sprintf("%s: this call's host byte budget (grants.limits.host_bytes, %d bytes) is spent", f.Name, h.Limits().HostBytes))
	}
	return hostfns.StatusOK, nil
}

// Handle checks an admitted request's encoding and phase, runs impl, and
// charges the response. A recorded dsh_init is replayed through it too,
// so a replay answers as the live call would. It never panics: a panic
// in impl is recovered and answered ErrInternal.
func Handle(h Host, f hostfns.Func, impl Impl, req []byte) (st hostfns.Status, payload []byte) {
	defer func() {
		if r := recover(); r != nil {
			h.Logger().Error("host function panicked", "func", f.Name, "panic", r)
			st, payload = hostfns.ErrInternal, []byte(fmt.Sprintf("%s: internal error", f.Name))
		}
	}()
	if !utf8.Valid(req) {
		return hostfns.ErrBadUTF8, []byte(f.Name + ": request is not valid UTF-8")
	}
	if c := h.Call(); f.Phase == hostfns.LoadInstance && (!c.LoadTime || c.Setup) {
		return hostfns.ErrDenied, []byte(f.Name + ": only the load-time instance may do this (dsh_init, or an event that belongs to no agent); this call is in a per-agent instance or dsh_setup")
	}
	resp, st, msg := impl(h, req)
	if st != hostfns.StatusOK {
		return st, []byte(f.Name + ": " + msg)
	}
	if !h.ChargeHost(int64(len(resp))) {
		return hostfns.ErrLimit, []byte(fmt.Sprintf("%s: a response of %d bytes would pass this call's host byte budget (grants.limits.host_bytes, %d bytes)", f.Name, len(resp), h.Limits().HostBytes))
	}
	return hostfns.StatusOK, resp
}

// Deliver writes payload to the out buffer if it fits, or keeps it for
// take, and returns the result word.
func Deliver(h Host, st hostfns.Status, payload []byte, outPtr, outCap uint32) uint64 {
	n := uint32(len(payload))
	if n == 0 {
		return hostfns.Pack(st, 0)
	}
	if n <= outCap && h.Memory().Write(outPtr, payload) {
		return hostfns.Pack(st, n)
	}
	h.Scratch().Pending = payload
	return hostfns.Pack(st, n)
}

// Take implements take(ptr, n) -> i32: the payload awaiting take, of
// exactly n bytes, written at ptr; -1 when there is none, n is not its
// length or ptr+n is outside guest memory.
func Take(h Host, ptr, n uint32) uint64 {
	sc := h.Scratch()
	if sc.Pending == nil || uint32(len(sc.Pending)) != n || !h.Memory().Write(ptr, sc.Pending) {
		return api.EncodeI32(-1)
	}
	sc.Pending = nil
	return uint64(n)
}
