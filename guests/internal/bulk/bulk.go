// Package bulk scans byte slices a word at a time. It is for the built-in
// guests: Go's Wasm target has no SIMD, its bytes.IndexByte reads four
// bytes per step and bytes.Count one, and a compiled loop pays a fuel
// check at every iteration under the host's interrupt instrumentation.
// These functions read eight bytes per load and 32 per iteration, with
// the exact zero-byte test (no false positives), population count and
// trailing-zero count, which are single Wasm instructions. The loops are
// written out by hand: a call that is not inlined costs a Go Wasm guest
// more than the 32 bytes it would scan. (The four words' marks sit at
// distinct bit positions once shifted, so one population count covers
// them.)
package bulk

import (
	"math/bits"
	"unsafe"
)

const (
	lo = 0x0101010101010101
	hi = 0x8080808080808080
	m7 = 0x7f7f7f7f7f7f7f7f
)

// load reads eight bytes at p, little-endian (Wasm loads need no
// alignment).
func load(p unsafe.Pointer) uint64 { return *(*uint64)(p) }

// zeros marks, in the high bit of each byte, the bytes of v that are zero.
func zeros(v uint64) uint64 {
	return ^(((v & m7) + m7) | v) & hi
}

// Count counts the bytes of b equal to c.
func Count(b []byte, c byte) int {
	n := 0
	i := 0
	if len(b) >= 32 {
		pat := lo * uint64(c)
		base := unsafe.Pointer(unsafe.SliceData(b))
		for ; i+64 <= len(b); i += 64 {
			p := unsafe.Add(base, i)
			m0 := zeros(load(p) ^ pat)
			m1 := zeros(load(unsafe.Add(p, 8)) ^ pat)
			m2 := zeros(load(unsafe.Add(p, 16)) ^ pat)
			m3 := zeros(load(unsafe.Add(p, 24)) ^ pat)
			m4 := zeros(load(unsafe.Add(p, 32)) ^ pat)
			m5 := zeros(load(unsafe.Add(p, 40)) ^ pat)
			m6 := zeros(load(unsafe.Add(p, 48)) ^ pat)
			m7 := zeros(load(unsafe.Add(p, 56)) ^ pat)
			n += bits.OnesCount64(m0 | m1>>1 | m2>>2 | m3>>3 | m4>>4 | m5>>5 | m6>>6 | m7>>7)
		}
		for ; i+32 <= len(b); i += 32 {
			p := unsafe.Add(base, i)
			m0 := zeros(load(p) ^ pat)
			m1 := zeros(load(unsafe.Add(p, 8)) ^ pat)
			m2 := zeros(load(unsafe.Add(p, 16)) ^ pat)
			m3 := zeros(load(unsafe.Add(p, 24)) ^ pat)
			n += bits.OnesCount64(m0 | m1>>1 | m2>>2 | m3>>3)
		}
	}
	for ; i < len(b); i++ {
		if b[i] == c {
			n++
		}
	}
	return n
}

// Index returns the index of the first byte of b equal to c, or -1.
func Index(b []byte, c byte) int {
	i := 0
	if len(b) >= 32 {
		pat := lo * uint64(c)
		base := unsafe.Pointer(unsafe.SliceData(b))
		for ; i+32 <= len(b); i += 32 {
			p := unsafe.Add(base, i)
			m0 := zeros(load(p) ^ pat)
			m1 := zeros(load(unsafe.Add(p, 8)) ^ pat)
			m2 := zeros(load(unsafe.Add(p, 16)) ^ pat)
			m3 := zeros(load(unsafe.Add(p, 24)) ^ pat)
			if m0|m1|m2|m3 == 0 {
				continue
			}
			switch {
			case m0 != 0:
				return i + bits.TrailingZeros64(m0)/8
			case m1 != 0:
				return i + 8 + bits.TrailingZeros64(m1)/8
			case m2 != 0:
				return i + 16 + bits.TrailingZeros64(m2)/8
			default:
				return i + 24 + bits.TrailingZeros64(m3)/8
			}
		}
	}
	for ; i < len(b); i++ {
		if b[i] == c {
			return i
		}
	}
	return -1
}

// Index2 returns the index of the first byte of b equal to c1 or c2, or
// -1: two searches in one pass.
func Index2(b []byte, c1, c2 byte) int {
	i := 0
	if len(b) >= 16 {
		p1, p2 := lo*uint64(c1), lo*uint64(c2)
		base := unsafe.Pointer(unsafe.SliceData(b))
		for ; i+16 <= len(b); i += 16 {
			p := unsafe.Add(base, i)
			w0, w1 := load(p), load(unsafe.Add(p, 8))
			m0 := zeros(w0^p1) | zeros(w0^p2)
			m1 := zeros(w1^p1) | zeros(w1^p2)
			if m0 != 0 {
				return i + bits.TrailingZeros64(m0)/8
			}
			if m1 != 0 {
				return i + 8 + bits.TrailingZeros64(m1)/8
			}
		}
	}
	for ; i < len(b); i++ {
		if b[i] == c1 || b[i] == c2 {
			return i
		}
	}
	return -1
}

// Nth returns the index of the n-th byte (from 1) of b equal to c, or -1
// and the number of such bytes when b holds fewer than n.
func Nth(b []byte, c byte, n int) (index, count int) {
	if n < 1 {
		return -1, 0
	}
	i := 0
	if len(b) >= 8 {
		pat := lo * uint64(c)
		base := unsafe.Pointer(unsafe.SliceData(b))
		// Whole 64-byte blocks that end before the n-th are counted in one
		// step; the block that holds it is searched a word at a time.
		for ; i+64 <= len(b); i += 64 {
			p := unsafe.Add(base, i)
			m0 := zeros(load(p) ^ pat)
			m1 := zeros(load(unsafe.Add(p, 8)) ^ pat)
			m2 := zeros(load(unsafe.Add(p, 16)) ^ pat)
			m3 := zeros(load(unsafe.Add(p, 24)) ^ pat)
			m4 := zeros(load(unsafe.Add(p, 32)) ^ pat)
			m5 := zeros(load(unsafe.Add(p, 40)) ^ pat)
			m6 := zeros(load(unsafe.Add(p, 48)) ^ pat)
			m7 := zeros(load(unsafe.Add(p, 56)) ^ pat)
			k := bits.OnesCount64(m0 | m1>>1 | m2>>2 | m3>>3 | m4>>4 | m5>>5 | m6>>6 | m7>>7)
			if count+k >= n {
				break
			}
			count += k
		}
		for ; i+32 <= len(b); i += 32 {
			p := unsafe.Add(base, i)
			m0 := zeros(load(p) ^ pat)
			m1 := zeros(load(unsafe.Add(p, 8)) ^ pat)
			m2 := zeros(load(unsafe.Add(p, 16)) ^ pat)
			m3 := zeros(load(unsafe.Add(p, 24)) ^ pat)
			k := bits.OnesCount64(m0 | m1>>1 | m2>>2 | m3>>3)
			if count+k >= n {
				break
			}
			count += k
		}
		for ; i+8 <= len(b); i += 8 {
			m := zeros(load(unsafe.Add(base, i)) ^ pat)
			k := bits.OnesCount64(m)
			if count+k < n {
				count += k
				continue
			}
			for ; ; m &= m - 1 {
				count++
				if count == n {
					return i + bits.TrailingZeros64(m)/8, count
				}
			}
		}
	}
	for ; i < len(b); i++ {
		if b[i] == c {
			count++
			if count == n {
				return i, count
			}
		}
	}
	return -1, count
}

// IndexString returns the index of the first occurrence of sep in b, or
// -1. It finds candidates by sep's first byte, a word at a time.
func IndexString(b, sep []byte) int {
	if len(sep) == 0 {
		return 0
	}
	c := sep[0]
	for i := 0; i+len(sep) <= len(b); {
		j := Index(b[i:len(b)-len(sep)+1], c)
		if j < 0 {
			return -1
		}
		i += j
		if string(b[i:i+len(sep)]) == string(sep) {
			return i
		}
		i++
	}
	return -1
}
