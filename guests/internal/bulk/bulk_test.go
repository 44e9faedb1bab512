package bulk

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

func TestAgainstBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 3000; trial++ {
		n := r.IntN(200)
		b := make([]byte, n)
		for i := range b {
			// A small alphabet with the bytes the exact test must not
			// confuse: 0x00, 0x01, 0x80, 0xff around the target.
			b[i] = []byte{'\n', 'a', 0, 1, 0x80, 0xff, 0x0b, 0x09, 0x8a}[r.IntN(9)]
		}
		off := r.IntN(4) // unaligned starts
		if off > len(b) {
			off = len(b)
		}
		s := b[off:]
		for _, c := range []byte{'\n', 0, 0xff, 'z'} {
			if got, want := Count(s, c), bytes.Count(s, []byte{c}); got != want {
				t.Fatalf("Count(%q, %q) = %d, want %d", s, c, got, want)
			}
			want2 := -1
			for i, x := range s {
				if x == c || x == 0x8a {
					want2 = i
					break
				}
			}
			if got, want := Index2(s, c, 0x8a), want2; got != want {
				t.Fatalf("Index2(%q, %q, 0x8a) = %d, want %d", s, c, got, want)
			}
			if got, want := Index(s, c), bytes.IndexByte(s, c); got != want {
				t.Fatalf("Index(%q, %q) = %d, want %d", s, c, got, want)
			}
			total := bytes.Count(s, []byte{c})
			for k := 1; k <= total+1; k++ {
				got, cnt := Nth(s, c, k)
				want := -1
				seen := 0
				for i, x := range s {
					if x == c {
						seen++
						if seen == k {
							want = i
							break
						}
					}
				}
				if got != want || (want < 0 && cnt != total) {
					t.Fatalf("Nth(%q, %q, %d) = %d, %d; want %d (total %d)", s, c, k, got, cnt, want, total)
				}
			}
		}
		for _, sep := range [][]byte{{'\n'}, {'a', '\n'}, {0, 1}, {0xff, 0xff, 'a'}, b[len(b)/2:]} {
			if got, want := IndexString(s, sep), bytes.Index(s, sep); got != want {
				t.Fatalf("IndexString(%q, %q) = %d, want %d", s, sep, got, want)
			}
		}
	}
	if i, c := Nth([]byte("abc"), 'a', 0); i != -1 || c != 0 {
		t.Fatal("Nth 0")
	}
}
