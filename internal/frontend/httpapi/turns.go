package httpapi

import (
	"context"
	"errors"
	"sync"

	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
)

// TurnSlots counts each tenant's running turns against its limit. The
// PostgreSQL store's slots (pgstore.TurnSlots) count across every worker
// on the database, and free a dead worker's slots when their lease
// expires; without it the count is this worker's (LocalSlots).
type TurnSlots interface {
	// Acquire takes one of tenant's limit slots and returns the function
	// that gives it back, or ok false when all are taken.
	Acquire(ctx context.Context, tenant string, limit int) (release func(), ok bool, err error)
}

// LocalSlots counts turns in this process. The zero value is ready.
type LocalSlots struct {
	mu sync.Mutex
	n  map[string]int
}

// Acquire implements TurnSlots.
func (l *LocalSlots) Acquire(_ context.Context, tenant string, limit int) (func(), bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[tenant] >= limit {
		return nil, false, nil
	}
	if l.n == nil {
		l.n = map[string]int{}
	}
	l.n[tenant]++
	return func() {
		l.mu.Lock()
		if l.n[tenant]--; l.n[tenant] <= 0 {
			delete(l.n, tenant)
		}
		l.mu.Unlock()
	}, true, nil
}

// turnEntry is a prompt of a session on this worker, from the moment its
// request is read: a cancel that comes before the turn starts (while the
// session opens, or on another worker's NOTIFY) is kept by cancelling
// ctx, so the turn starts cancelled and ends aborted.
type turnEntry struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	sess   *deploy.Session // nil until the session is open
}

// earlyCancel is the cause of a turn cancelled before it started; its
// text is the reason the client gave.
type earlyCancel struct{ reason string }

func (e *earlyCancel) Error() string { return e.reason }

// register notes a prompt of session id on this worker, or returns nil
// when one is already here (the session is busy).
func (s *Server) register(parent context.Context, id string) *turnEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[id] != nil {
		return nil
	}
	ctx, cancel := context.WithCancelCause(parent)
	e := &turnEntry{ctx: ctx, cancel: cancel}
	s.running[id] = e
	return e
}

func (s *Server) unregister(id string, e *turnEntry) {
	s.mu.Lock()
	if s.running[id] == e {
		delete(s.running, id)
	}
	s.mu.Unlock()
	e.cancel(nil)
}

// opened gives the entry its session.
func (s *Server) opened(e *turnEntry, sess *deploy.Session) {
	s.mu.Lock()
	e.sess = sess
	s.mu.Unlock()
}

// CancelLocal cancels the turn of session id if a prompt of it is on
// this worker: a running turn through its agent (which says whether the
// turn will end aborted), one not started yet by its context, so that it
// starts cancelled.
func (s *Server) CancelLocal(id, reason string) bool {
	s.mu.Lock()
	e := s.running[id]
	var sess *deploy.Session
	if e != nil {
		sess = e.sess
	}
	s.mu.Unlock()
	if e == nil {
		return false
	}
	if sess != nil && sess.Cancel(reason) {
		return true
	}
	if errors.Is(e.ctx.Err(), context.Canceled) {
		return true // cancelled already
	}
	e.cancel(&earlyCancel{reason: reason})
	return true
}
