//go:build wasip1

// Command rawabi is a hostile plugin written against the raw dsh:host/v1
// ABI, without the guest SDK, so that its exports can lie: output
// pointers outside memory, lengths beyond the limit, unknown status
// bytes, a dsh_alloc that returns garbage, and an ABI version taken from
// the HOSTILE_ABI_VERSION environment variable.
package main

import (
	"os"
	"strconv"
	"unsafe"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
)

//go:wasmimport dsh:host/v1 tool_register
func toolRegister(inPtr, inLen, outPtr, outCap uint32) uint64

func main() {}

func addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

//go:wasmexport dsh_abi_version
func abiVersion() int32 {
	if v, err := strconv.Atoi(os.Getenv("HOSTILE_ABI_VERSION")); err == nil {
		return int32(v)
	}
	return hostfns.ABIVersion
}

var (
	inBuf []byte
	// allocLie, when set, is what the next dsh_alloc returns.
	allocLie *uint32
	out      []byte
)

//go:wasmexport dsh_alloc
func alloc(size int32) uint32 {
	if allocLie != nil {
		p := *allocLie
		allocLie = nil
		return p
	}
	if size <= 0 {
		size = 1
	}
	inBuf = make([]byte, size)
	return addr(inBuf)
}

var tools = []string{"raw_ok", "raw_oob", "raw_huge", "raw_status", "raw_novalue", "raw_badalloc", "raw_zeroalloc",
	"raw_result", "raw_result_notjson", "raw_result_meta_array", "raw_result_meta_huge", "raw_result_bad_code", "raw_result_long_name"}

//go:wasmexport dsh_init
func dshInit(ptr, n uint32) uint64 {
	res := make([]byte, 256)
	for _, t := range tools {
		req := []byte(`{"name":"` + t + `","description":"raw ABI tool"}`)
		if st, m := hostfns.Unpack(toolRegister(addr(req), uint32(len(req)), addr(res), uint32(len(res)))); st != hostfns.StatusOK {
			return respond(hostfns.OutError, "tool_register "+t+": "+st.String()+": "+string(res[:min(m, uint32(len(res)))]))
		}
	}
	return 0
}

// dsh_setup answers with OutResult, dsh_tool's status, when
// HOSTILE_SETUP_RESULT is set.
//
//go:wasmexport dsh_setup
func dshSetup(ptr, n uint32) uint64 {
	if os.Getenv("HOSTILE_SETUP_RESULT") != "" {
		return respond(hostfns.OutResult, `{"text":"set up?"}`)
	}
	return 0
}

func respond(st hostfns.OutStatus, msg string) uint64 {
	out = append([]byte{byte(st)}, msg...)
	return hostfns.PackPtr(addr(out), uint32(len(out)))
}

//go:wasmexport dsh_tool
func dshTool(ptr, n uint32) uint64 {
	if len(inBuf) == 0 || ptr != addr(inBuf) || n > uint32(len(inBuf)) {
		return respond(hostfns.OutError, "input is not where dsh_alloc put it")
	}
	frame := inBuf[:n]
	name := string(frame)
	for i, c := range frame {
		if c == hostfns.FrameSep {
			name = string(frame[:i])
			break
		}
	}
	switch name {
	case "raw_ok":
		return respond(hostfns.OutOK, "raw ok")
	case "raw_oob":
		return hostfns.PackPtr(0xffffff00, 0x1000)
	case "raw_huge":
		out = []byte{0}
		return hostfns.PackPtr(addr(out), hostfns.MaxOutputBytes+1)
	case "raw_status":
		return respond(hostfns.OutStatus(7), "status seven")
	case "raw_novalue":
		return respond(hostfns.OutNoValue, "")
	// OutResult, well formed and not.
	case "raw_result":
		return respond(hostfns.OutResult, `{"text":"failed here","meta":{"k":[1,2]},"error":{"name":"RawError","code":"RAW_1"}}`)
	case "raw_result_notjson":
		return respond(hostfns.OutResult, `{"text":"x"`)
	case "raw_result_meta_array":
		return respond(hostfns.OutResult, `{"text":"x","meta":[1,2,3]}`)
	case "raw_result_meta_huge":
		big := make([]byte, 0, hostfns.MaxToolMeta+64)
		big = append(big, `{"text":"x","meta":{"k":"`...)
		for len(big) < hostfns.MaxToolMeta+32 {
			big = append(big, 'a')
		}
		return respond(hostfns.OutResult, string(append(big, `"}}`...)))
	case "raw_result_bad_code":
		return respond(hostfns.OutResult, `{"text":"x","error":{"name":"FsError","code":"FS NOT\nOBSERVED"}}`)
	case "raw_result_long_name":
		long := make([]byte, hostfns.MaxToolErrorField+1)
		for i := range long {
			long[i] = 'E'
		}
		return respond(hostfns.OutResult, `{"text":"x","error":{"name":"`+string(long)+`","code":"C"}}`)
	case "raw_badalloc":
		p := uint32(0xfffffff0)
		allocLie = &p
		return respond(hostfns.OutOK, "the next dsh_alloc lies")
	case "raw_zeroalloc":
		p := uint32(0)
		allocLie = &p
		return respond(hostfns.OutOK, "the next dsh_alloc returns 0")
	}
	return respond(hostfns.OutError, "no tool "+name)
}
