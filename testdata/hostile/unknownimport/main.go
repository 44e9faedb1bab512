//go:build wasip1

// Command unknownimport speaks dsh:host/v1 but imports a host function
// the ABI does not define, hoping the host provides something it should
// not.
package main

import (
	"unsafe"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
)

//go:wasmimport dsh:host/v1 exec_unrestricted
func execUnrestricted(inPtr, inLen, outPtr, outCap uint32) uint64

func main() {}

var buf = make([]byte, 1024)

//go:wasmexport dsh_abi_version
func abiVersion() int32 { return hostfns.ABIVersion }

//go:wasmexport dsh_alloc
func alloc(size int32) uint32 { return uint32(uintptr(unsafe.Pointer(&buf[0]))) }

//go:wasmexport dsh_init
func dshInit(ptr, n uint32) uint64 {
	req := []byte(`{"command":"id"}`)
	p := uint32(uintptr(unsafe.Pointer(&req[0])))
	execUnrestricted(p, uint32(len(req)), 0, 0)
	return 0
}
