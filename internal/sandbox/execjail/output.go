package execjail

import (
	"fmt"
	"sync"
)

// Output is what a command wrote to one stream, capped. When the stream was
// longer than the cap, Data holds its first half-cap bytes and its last
// half-cap bytes, and the bytes in between are dropped: the start of a
// command's output (what ran) and its end (how it finished) matter most.
type Output struct {
	// Data is the kept output: all of it, or head and tail concatenated.
	Data []byte `json:"data"`
	// Truncated reports that bytes were dropped.
	Truncated bool `json:"truncated,omitempty"`
	// OmittedAt is the offset in Data where the dropped bytes were.
	OmittedAt int `json:"omitted_at,omitempty"`
	// Omitted is the number of dropped bytes.
	Omitted int64 `json:"omitted,omitempty"`
	// Total is the number of bytes the command wrote.
	Total int64 `json:"total"`
}

// String renders Data with a visible marker where bytes were dropped.
func (o Output) String() string {
	if !o.Truncated {
		return string(o.Data)
	}
	return fmt.Sprintf("%s\n[... %d bytes omitted ...]\n%s", o.Data[:o.OmittedAt], o.Omitted, o.Data[o.OmittedAt:])
}

// capBuffer keeps the first headCap and the last len(ring) bytes written.
// It is safe for concurrent Write and snapshot.
type capBuffer struct {
	mu      sync.Mutex
	head    []byte
	headCap int
	ring    []byte
	ringPos int // next write position in ring
	ringLen int // valid bytes in ring
	total   int64
}

func newCapBuffer(limit int) *capBuffer {
	head := (limit + 1) / 2
	return &capBuffer{headCap: head, head: make([]byte, 0, min(head, 4096)), ring: make([]byte, limit-head)}
}

func (b *capBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.total += int64(n)
	if room := b.headCap - len(b.head); room > 0 {
		take := min(room, len(p))
		b.head = append(b.head, p[:take]...)
		p = p[take:]
	}
	if len(b.ring) == 0 || len(p) == 0 {
		return n, nil
	}
	if len(p) >= len(b.ring) {
		copy(b.ring, p[len(p)-len(b.ring):])
		b.ringPos, b.ringLen = 0, len(b.ring)
		return n, nil
	}
	c := copy(b.ring[b.ringPos:], p)
	copy(b.ring, p[c:])
	b.ringPos = (b.ringPos + len(p)) % len(b.ring)
	b.ringLen = min(b.ringLen+len(p), len(b.ring))
	return n, nil
}

func (b *capBuffer) snapshot() Output {
	b.mu.Lock()
	defer b.mu.Unlock()
	data := make([]byte, 0, len(b.head)+b.ringLen)
	data = append(data, b.head...)
	start := (b.ringPos - b.ringLen + len(b.ring)) % max(len(b.ring), 1)
	if b.ringLen > 0 {
		if start+b.ringLen <= len(b.ring) {
			data = append(data, b.ring[start:start+b.ringLen]...)
		} else {
			data = append(data, b.ring[start:]...)
			data = append(data, b.ring[:b.ringPos]...)
		}
	}
	out := Output{Data: data, Total: b.total}
	if kept := int64(len(data)); kept < b.total {
		out.Truncated = true
		out.OmittedAt = len(b.head)
		out.Omitted = b.total - kept
	}
	return out
}
