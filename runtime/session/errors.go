package session

import (
	"errors"
	"fmt"
)

// Errors returned by this package and the stores, wrapped with detail.
// Callers test with errors.Is.
var (
	// ErrNotFound: the store has no session with the requested id.
	ErrNotFound = errors.New("session not found")
	// ErrExists: Create found a session with the same id.
	ErrExists = errors.New("session already exists")
	// ErrInvalidID: a session id that cannot name a file (every store
	// keeps to the file store's rule, so sessions move between them).
	ErrInvalidID = errors.New("invalid session id")
	// ErrCorrupt: a session (a file, or a store's records) that cannot be
	// read. The error is a *CorruptError naming the file and line.
	ErrCorrupt = errors.New("corrupt session file")
	// ErrUnsupportedVersion: a header whose format version is not 0.
	ErrUnsupportedVersion = errors.New("unsupported session format version")
	// ErrInvalidEvent: Append, Create or Compact refused an event that
	// breaks the format (bad data shape, bad surface op, broken seed).
	ErrInvalidEvent = errors.New("invalid session event")
	// ErrWrongType: As was asked to decode an event of another type.
	ErrWrongType = errors.New("wrong session event type")
	// ErrClosed: the session was closed.
	ErrClosed = errors.New("session closed")
	// ErrLocked: the session is open elsewhere, in this process or
	// another.
	ErrLocked = errors.New("session in use")
	// ErrBroken: what reached the store is unknown, because a write failed
	// and could not be undone (for the file store: an fsync failed, or a
	// failed write could not be cut off). The session refuses further
	// writes; reopen it to recover from what the store holds.
	ErrBroken = errors.New("session file in unknown state after failed sync")
	// ErrNotStored: a Backend's Append stored none of the records and
	// changed nothing, so they can be offered again (see Backend).
	ErrNotStored = errors.New("session records not stored")
)

// CorruptError reports a session file that cannot be read: Path and the
// 1-based Line at fault (0 when the fault is not one line's). It matches
// ErrCorrupt under errors.Is.
type CorruptError struct {
	Path string
	Line int
	Err  error
}

func (e *CorruptError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%v: %s:%d: %v", ErrCorrupt, e.Path, e.Line, e.Err)
	}
	return fmt.Sprintf("%v: %s: %v", ErrCorrupt, e.Path, e.Err)
}

// Unwrap lets errors.Is match ErrCorrupt and the underlying cause.
func (e *CorruptError) Unwrap() []error { return []error{ErrCorrupt, e.Err} }
