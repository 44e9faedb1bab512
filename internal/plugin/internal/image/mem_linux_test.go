//go:build linux

package image

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

// A fresh memory becomes an image without a copy: the image holds the
// memory as it was when taken, the instance goes on writing and growing
// its own copy, and a memory made from the image starts from the image.
func TestFreshMemoryBecomesAnImage(t *testing.T) {
	var got Allocation
	lm := newAllocator(nil, &got).Allocate(2*PageSize, 64*PageSize)
	m, ok := lm.(*mmapMemory)
	if !ok || m.shm < 0 {
		t.Skipf("no memfd-backed memory here (%T)", lm)
	}
	buf := lm.Reallocate(2 * PageSize)
	for i := range buf {
		buf[i] = byte(i % 251)
	}
	buf = lm.Reallocate(3 * PageSize) // growth while shared
	buf[2*PageSize] = 42
	want := bytes.Clone(buf)

	img, ok := m.takeImage(3 * PageSize)
	if !ok {
		t.Fatal("takeImage refused a fresh shared memory")
	}
	defer img.release()
	if _, ok := m.takeImage(3 * PageSize); ok {
		t.Fatal("a memory became an image twice")
	}
	// The instance writes on and grows: none of it reaches the image.
	buf = lm.Reallocate(5 * PageSize)
	if !bytes.Equal(buf[:3*PageSize], want) {
		t.Fatal("the instance's memory changed when it became an image")
	}
	for i := range buf {
		buf[i] = 0xee
	}

	var got2 Allocation
	lm2 := newAllocator(img, &got2).Allocate(3*PageSize, 64*PageSize)
	if !got2.Imaged {
		t.Fatal("the memory made from the image did not map it")
	}
	buf2 := lm2.Reallocate(4 * PageSize)
	if !bytes.Equal(buf2[:3*PageSize], want) {
		t.Fatal("a memory made from the image does not hold the image")
	}
	if !bytes.Equal(buf2[3*PageSize:], make([]byte, PageSize)) {
		t.Fatal("growth past the image is not zero")
	}
	buf2[0] = 1
	lm2.Free()
	lm.Free()
	if m.shm >= 0 {
		t.Fatal("the memfd still belongs to the memory")
	}
}
