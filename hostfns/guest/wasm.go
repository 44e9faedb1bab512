//go:build wasip1

package guest

import (
	"unsafe"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
)

// The dsh:host/v1 imports. Each has the signature of hostfns's calling
// convention; TestImportsMatchABI keeps this list equal to hostfns.Funcs.

//go:wasmimport dsh:host/v1 take
func hostTake(ptr, n uint32) int32

//go:wasmimport dsh:host/v1 log
func hostLog(inPtr, inLen, outPtr, outCap uint32) uint64

//go:wasmimport dsh:host/v1 section_register
func hostSectionRegister(inPtr, inLen, outPtr, outCap uint32) uint64

//go:wasmimport dsh:host/v1 section_unregister
func hostSectionUnregister(inPtr, inLen, outPtr, outCap uint32) uint64

//go:wasmimport dsh:host/v1 variable_register
func hostVariableRegister(inPtr, inLen, outPtr, outCap uint32) uint64

//go:wasmimport dsh:host/v1 variable_unregister
func hostVariableUnregister(inPtr, inLen, outPtr, outCap uint32) uint64

//go:wasmimport dsh:host/v1 tool_register
func hostToolRegister(inPtr, inLen, outPtr, outCap uint32) uint64

//go:wasmimport dsh:host/v1 tool_unregister
func hostToolUnregister(inPtr, inLen, outPtr, outCap uint32) uint64

//go:wasmimport dsh:host/v1 event_subscribe
func hostEventSubscribe(inPtr, inLen, outPtr, outCap uint32) uint64

//go:wasmimport dsh:host/v1 event_emit
func hostEventEmit(inPtr, inLen, outPtr, outCap uint32) uint64

//go:wasmimport dsh:host/v1 capabilities_declare
func hostCapabilities(inPtr, inLen, outPtr, outCap uint32) uint64

//go:wasmimport dsh:host/v1 state_get
func hostStateGet(inPtr, inLen, outPtr, outCap uint32) uint64

//go:wasmimport dsh:host/v1 state_set
func hostStateSet(inPtr, inLen, outPtr, outCap uint32) uint64

//go:wasmimport dsh:host/v1 env_get
func hostEnvGet(inPtr, inLen, outPtr, outCap uint32) uint64

//go:wasmimport dsh:host/v1 exec_run
func hostExecRun(inPtr, inLen, outPtr, outCap uint32) uint64

//go:wasmimport dsh:host/v1 exec_start
func hostExecStart(inPtr, inLen, outPtr, outCap uint32) uint64

//go:wasmimport dsh:host/v1 exec_poll
func hostExecPoll(inPtr, inLen, outPtr, outCap uint32) uint64

//go:wasmimport dsh:host/v1 exec_kill
func hostExecKill(inPtr, inLen, outPtr, outCap uint32) uint64

//go:wasmimport dsh:host/v1 http_request
func hostHTTPRequest(inPtr, inLen, outPtr, outCap uint32) uint64

//go:wasmimport dsh:host/v1 session_event_append
func hostSessionEventAppend(inPtr, inLen, outPtr, outCap uint32) uint64

//go:wasmimport dsh:host/v1 subagent_providers
func hostSubagentProviders(inPtr, inLen, outPtr, outCap uint32) uint64

//go:wasmimport dsh:host/v1 subagent_run
func hostSubagentRun(inPtr, inLen, outPtr, outCap uint32) uint64

var importByName = map[string]func(inPtr, inLen, outPtr, outCap uint32) uint64{
	hostfns.FnLog:                hostLog,
	hostfns.FnSectionRegister:    hostSectionRegister,
	hostfns.FnSectionUnregister:  hostSectionUnregister,
	hostfns.FnVariableRegister:   hostVariableRegister,
	hostfns.FnVariableUnregister: hostVariableUnregister,
	hostfns.FnToolRegister:       hostToolRegister,
	hostfns.FnToolUnregister:     hostToolUnregister,
	hostfns.FnEventSubscribe:     hostEventSubscribe,
	hostfns.FnEventEmit:          hostEventEmit,
	hostfns.FnCapabilities:       hostCapabilities,
	hostfns.FnStateGet:           hostStateGet,
	hostfns.FnStateSet:           hostStateSet,
	hostfns.FnEnvGet:             hostEnvGet,
	hostfns.FnExecRun:            hostExecRun,
	hostfns.FnExecStart:          hostExecStart,
	hostfns.FnExecPoll:           hostExecPoll,
	hostfns.FnExecKill:           hostExecKill,
	hostfns.FnHTTPRequest:        hostHTTPRequest,
	hostfns.FnSessionEventAppend: hostSessionEventAppend,
	hostfns.FnSubagentProviders:  hostSubagentProviders,
	hostfns.FnSubagentRun:        hostSubagentRun,
}

// outScratch receives host-function results that fit; larger ones are
// taken into a fresh buffer.
var outScratch = make([]byte, 4096)

func ptrOf(b []byte) uint32 {
	if len(b) == 0 {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

func hostCall(fn string, in []byte) (hostfns.Status, []byte) {
	imp := importByName[fn]
	if imp == nil {
		return hostfns.ErrNotFound, []byte("guest SDK: no host function " + fn)
	}
	r := imp(ptrOf(in), uint32(len(in)), ptrOf(outScratch), uint32(len(outScratch)))
	st, n := hostfns.Unpack(r)
	var out []byte
	if n <= uint32(len(outScratch)) {
		out = append([]byte(nil), outScratch[:n]...)
	} else {
		out = make([]byte, n)
		if hostTake(ptrOf(out), n) != int32(n) {
			return hostfns.ErrInternal, []byte("guest SDK: take failed")
		}
	}
	return st, out
}

//go:wasmexport dsh_abi_version
func exportABIVersion() int32 { return hostfns.ABIVersion }

// inBuf holds the input of the export call in progress.
var inBuf []byte

//go:wasmexport dsh_alloc
func exportAlloc(size int32) uint32 {
	if size < 0 {
		return 0
	}
	if int(size) > cap(inBuf) {
		inBuf = make([]byte, size)
	}
	inBuf = inBuf[:size]
	if size == 0 {
		return ptrOf(inBuf[:cap(inBuf)])
	}
	return ptrOf(inBuf)
}

// lastOut keeps the previous export's output alive until the host has read
// it, which it does before its next call.
var lastOut []byte

// input returns the n bytes the host wrote at ptr, which must be the
// buffer dsh_alloc handed out; anything else is refused (nil, false).
func input(ptr, n uint32) ([]byte, bool) {
	if n == 0 {
		return nil, true
	}
	if n > uint32(cap(inBuf)) || ptr != ptrOf(inBuf[:cap(inBuf)]) {
		return nil, false
	}
	return inBuf[:n], true
}

var badInput = []byte("input is not where dsh_alloc put it")

func serve(ptr, n uint32, h func([]byte) ([]byte, hostfns.OutStatus)) uint64 {
	in, ok := input(ptr, n)
	if !ok {
		return output(badInput, hostfns.OutError)
	}
	return output(h(in))
}

func setupHandler(init bool) func([]byte) ([]byte, hostfns.OutStatus) {
	return func(in []byte) ([]byte, hostfns.OutStatus) { return handleSetup(in, init) }
}

func output(payload []byte, st hostfns.OutStatus) uint64 {
	if st == hostfns.OutOK && len(payload) == 0 {
		return 0
	}
	if cap(lastOut) < len(payload)+1 {
		lastOut = make([]byte, 0, len(payload)+1)
	}
	lastOut = append(append(lastOut[:0], byte(st)), payload...)
	return hostfns.PackPtr(ptrOf(lastOut), uint32(len(lastOut)))
}

//go:wasmexport dsh_init
func exportInit(ptr, n uint32) uint64 { return serve(ptr, n, setupHandler(true)) }

//go:wasmexport dsh_setup
func exportSetup(ptr, n uint32) uint64 { return serve(ptr, n, setupHandler(false)) }

//go:wasmexport dsh_section
func exportSection(ptr, n uint32) uint64 { return serve(ptr, n, handleSection) }

//go:wasmexport dsh_variable
func exportVariable(ptr, n uint32) uint64 { return serve(ptr, n, handleVariable) }

//go:wasmexport dsh_tool
func exportTool(ptr, n uint32) uint64 { return serve(ptr, n, handleTool) }

//go:wasmexport dsh_event
func exportEvent(ptr, n uint32) uint64 { return serve(ptr, n, handleEvent) }

// RawCall calls host function fn with raw pointers and returns the raw
// result word, bypassing every check the SDK makes. It exists for hosts'
// conformance and hostile-plugin tests; plugins use the typed helpers.
func RawCall(fn string, inPtr, inLen, outPtr, outCap uint32) uint64 {
	if fn == hostfns.FnTake {
		return uint64(uint32(hostTake(inPtr, inLen)))
	}
	imp := importByName[fn]
	if imp == nil {
		return hostfns.Pack(hostfns.ErrNotFound, 0)
	}
	return imp(inPtr, inLen, outPtr, outCap)
}

// Addr returns the guest address of b's first byte, for RawCall.
func Addr(b []byte) uint32 { return ptrOf(b) }
