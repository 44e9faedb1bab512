package filestore

import (
	"fmt"
	"os"

	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// file is the session.Backend of a session open through a Store: its
// file, opened for appending and locked.
type file struct {
	f    *os.File
	size int64  // bytes of the file known to be written
	lead []byte // written before the next records: the final newline a crash left out
}

// Append writes recs, a line each, in one write and fsyncs the file. A
// failed write is cut off again, so the records can be offered again
// (session.ErrNotStored); if that fails, or the fsync does, what the
// disk holds is unknown and the session breaks.
func (b *file) Append(recs []session.Record) error {
	var buf []byte
	buf = append(buf, b.lead...)
	for _, r := range recs {
		buf = append(append(buf, r.JSON...), '\n')
	}
	if _, werr := b.f.Write(buf); werr != nil {
		if err := b.f.Truncate(b.size); err != nil {
			return fmt.Errorf("write failed (%w) and the partial write could not be cut off (%w)", werr, err)
		}
		return notStored{werr}
	}
	if err := b.f.Sync(); err != nil {
		return err
	}
	b.size += int64(len(buf))
	b.lead = nil
	return nil
}

// Close closes the file, which releases its lock.
func (b *file) Close() error { return b.f.Close() }

// notStored is a write that was undone: it reads as the write's error
// and matches session.ErrNotStored.
type notStored struct{ err error }

func (e notStored) Error() string   { return e.err.Error() }
func (e notStored) Unwrap() []error { return []error{session.ErrNotStored, e.err} }

// flushError words a failed Append as Session.Flush does.
func flushError(id string, err error) error {
	if _, ok := err.(notStored); ok {
		return fmt.Errorf("session %s: flush: %w", id, err)
	}
	return fmt.Errorf("session %s: %w: %w", id, session.ErrBroken, err)
}
