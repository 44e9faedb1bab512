//go:build !(386 || amd64 || arm64 || loong64 || ppc64le || riscv64 || wasm)

package jsonobj

import "encoding/binary"

// load64 reads b[i:i+8] as a little-endian word.
func load64(b []byte, i int) uint64 { return binary.LittleEndian.Uint64(b[i:]) }

// loadString64 is load64 for a string.
func loadString64(s string, i int) uint64 {
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// store64 writes x to b[i:i+8] little-endian.
func store64(b []byte, i int, x uint64) { binary.LittleEndian.PutUint64(b[i:], x) }
