//go:build !(386 || amd64 || arm64 || loong64 || ppc64le || riscv64 || wasm)

package jsonobj

import "encoding/binary"

// load64 reads b[i:i+8] as a little-endian word.
func load64(b []byte, i int) uint64 { return binary.LittleEndian.Uint64(b[i:]) }
