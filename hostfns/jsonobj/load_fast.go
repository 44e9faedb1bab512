//go:build 386 || amd64 || arm64 || loong64 || ppc64le || riscv64 || wasm

package jsonobj

import "unsafe"

// load64 reads b[i:i+8] as a little-endian word in one load; the caller
// has checked the bounds. On these targets an unaligned 8-byte load is
// allowed and the byte order is little-endian; in Wasm it halves the cost
// of the string scan against encoding/binary, which the Go compiler does
// not fuse into one load there.
func load64(b []byte, i int) uint64 {
	return *(*uint64)(unsafe.Pointer(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), i)))
}

// loadString64 is load64 for a string.
func loadString64(s string, i int) uint64 {
	return *(*uint64)(unsafe.Pointer(unsafe.Add(unsafe.Pointer(unsafe.StringData(s)), i)))
}

// store64 writes x to b[i:i+8] little-endian in one store; the caller has
// checked the bounds.
func store64(b []byte, i int, x uint64) {
	*(*uint64)(unsafe.Pointer(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), i))) = x
}
