//go:build wasip1

// spinabi: dsh_abi_version never returns (after the first N calls).
package main

import (
	"os"
	"unsafe"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
)

func main() {}

func addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

var calls int
var sink int

//go:wasmexport dsh_abi_version
func abiVersion() int32 {
	calls++
	if os.Getenv("SPIN_ALWAYS") != "" || calls > 1 {
		for {
			sink++
		}
	}
	return hostfns.ABIVersion
}

var inBuf []byte

//go:wasmexport dsh_alloc
func alloc(size int32) uint32 {
	if size <= 0 {
		size = 1
	}
	inBuf = make([]byte, size)
	return addr(inBuf)
}

//go:wasmexport dsh_init
func dshInit(ptr, n uint32) uint64 { return 0 }
