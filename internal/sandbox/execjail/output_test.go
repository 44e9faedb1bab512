package execjail

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"
)

func TestCapBufferMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, limit := range []int{1, 2, 3, 7, 10, 64, 1000} {
		for trial := 0; trial < 50; trial++ {
			b := newCapBuffer(limit)
			var all []byte
			for w := rng.Intn(20); w > 0; w-- {
				chunk := make([]byte, rng.Intn(3*limit+2))
				for i := range chunk {
					chunk[i] = byte('a' + rng.Intn(26))
				}
				n, err := b.Write(chunk)
				if n != len(chunk) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
				all = append(all, chunk...)
			}
			got := b.snapshot()
			if got.Total != int64(len(all)) {
				t.Fatalf("Total = %d, want %d", got.Total, len(all))
			}
			if len(all) <= limit {
				if got.Truncated || !bytes.Equal(got.Data, all) {
					t.Fatalf("limit %d: untruncated output %q, want %q", limit, got.Data, all)
				}
				continue
			}
			head := (limit + 1) / 2
			want := append(append([]byte(nil), all[:head]...), all[len(all)-(limit-head):]...)
			if !got.Truncated || !bytes.Equal(got.Data, want) || got.OmittedAt != head || got.Omitted != int64(len(all)-limit) {
				t.Fatalf("limit %d, %d bytes: got %+v, want data %q", limit, len(all), got, want)
			}
		}
	}
}

func TestOutputString(t *testing.T) {
	o := Output{Data: []byte("headtail"), Truncated: true, OmittedAt: 4, Omitted: 10, Total: 18}
	if got, want := o.String(), "head\n[... 10 bytes omitted ...]\ntail"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := (Output{Data: []byte("all")}).String(); got != "all" {
		t.Errorf("String() = %q", got)
	}
	if !strings.Contains(o.String(), "omitted") {
		t.Error("no marker")
	}
}
