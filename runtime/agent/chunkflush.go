package agent

import (
	"errors"
	"sync"
	"time"

	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// DefaultChunkFlush is how long a streamed chunk waits, at most, for the
// flush that lets OnEvent see it (Options.ChunkFlush).
const DefaultChunkFlush = 50 * time.Millisecond

// chunkFlusher batches the flushes of a step's streamed chunks: the first
// chunk not yet stored arms a timer, and when it fires one Flush stores
// every chunk recorded by then. So a front end sees chunks at most one
// interval (plus a write) after they arrive, and a session pays one write
// per interval while the model streams, not one per chunk. A failed
// flush leaves its records queued (or the session broken), and the
// turn's next own flush reports it.
type chunkFlusher struct {
	a  *Agent
	mu sync.Mutex
	t  *time.Timer // armed, not yet fired; nil otherwise
	// stopped: the stream is over and the step's own flush takes over.
	stopped bool
}

func (a *Agent) chunkFlusher() *chunkFlusher { return &chunkFlusher{a: a} }

// arm schedules a flush unless one is pending. With a negative
// ChunkFlush it does nothing: chunks wait for the message's flush.
func (f *chunkFlusher) arm() {
	if f.a.chunks < 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.t != nil || f.stopped {
		return
	}
	f.t = time.AfterFunc(f.a.chunks, f.fire)
}

func (f *chunkFlusher) fire() {
	f.mu.Lock()
	if f.stopped {
		f.mu.Unlock()
		return
	}
	f.t = nil
	f.mu.Unlock()
	if err := f.a.sess.Flush(); err != nil && !errors.Is(err, session.ErrClosed) {
		f.a.log.Warn("agent: chunk flush failed; the next flush retries", "agent", f.a.facts.ID, "err", err)
	}
}

// stop cancels a pending flush: the step's next flush stores the rest.
func (f *chunkFlusher) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	if f.t != nil {
		f.t.Stop()
		f.t = nil
	}
}
