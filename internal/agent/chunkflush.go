package agent

import (
	"errors"
	"fmt"
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
// per interval while the model streams, not one per chunk. A flush that
// fails (after the store's own retries) ends the stream: the next chunk
// gets its error, and the turn cannot go on.
type chunkFlusher struct {
	a  *Agent
	mu sync.Mutex
	// t is the pending flush, from arming until its Flush has returned:
	// one flush at a time, so a slow store is not queued a flush per chunk.
	t *time.Timer
	// dirty: chunks came while a flush was pending; it re-arms.
	dirty bool
	// stopped: the stream is over and the step's own flush takes over.
	stopped bool
	err     error // of the last flush, if it failed
}

func (a *Agent) chunkFlusher() *chunkFlusher { return &chunkFlusher{a: a} }

// arm schedules a flush unless one is pending, or returns the error of
// a flush that failed. With a negative ChunkFlush it does nothing: chunks
// wait for the message's flush.
func (f *chunkFlusher) arm() error {
	if f.a.chunks < 0 {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.err != nil:
		return f.err
	case f.stopped:
	case f.t != nil:
		f.dirty = true
	default:
		f.t = time.AfterFunc(f.a.chunks, f.fire)
	}
	return nil
}

func (f *chunkFlusher) fire() {
	f.mu.Lock()
	if f.stopped {
		f.mu.Unlock()
		return
	}
	f.dirty = false
	f.mu.Unlock()
	err := f.a.sess.Flush()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = nil
	switch {
	case err != nil && !errors.Is(err, session.ErrClosed):
		f.err = fmt.Errorf("store the streamed chunks: %w", err)
	case f.dirty && !f.stopped:
		f.t = time.AfterFunc(f.a.chunks, f.fire)
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
