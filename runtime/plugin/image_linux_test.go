//go:build linux

package plugin

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// An image is written with holes where the memory is zero; it must read
// back exactly, whatever the layout of zero and non-zero runs.
func TestWriteSparseReadsBackExactly(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i, n := range []int{0, 1, 4095, 4096, 4097, 3*4096 + 17, 64 << 10} {
		for _, layout := range []string{"zeros", "random", "mixed"} {
			data := make([]byte, n)
			switch layout {
			case "random":
				for j := range data {
					data[j] = byte(r.IntN(255) + 1)
				}
			case "mixed":
				for off := 0; off < n; off += 4096 {
					if r.IntN(2) == 0 {
						continue
					}
					// A single byte somewhere in the chunk, or all of it.
					end := min(off+4096, n)
					if r.IntN(2) == 0 {
						data[off+r.IntN(end-off)] = 7
					} else {
						for j := off; j < end; j++ {
							data[j] = byte(j)
						}
					}
				}
			}
			path := filepath.Join(t.TempDir(), "img")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := writeSparse(f, data); err != nil {
				t.Fatal(err)
			}
			f.Close()
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("case %d (%d bytes, %s): read back differs", i, n, layout)
			}
		}
	}
}
