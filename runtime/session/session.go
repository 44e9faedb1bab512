package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/dsh-wasm/dsh-wasm/runtime/model"
)

// Session is a session open for appending. Appends are kept in memory
// until Flush, which the agent loop calls at the end of each turn, hands
// them to the store's Backend. A Session is safe for concurrent use.
type Session struct {
	path    string
	nowMs   func() int64
	release func() // called once by Close; nil when nothing is held
	backend Backend

	flushMu  sync.Mutex    // held by Flush and Close, outside mu: writes do not block Append
	onStored func([]Event) // guarded by flushMu

	mu       sync.Mutex
	closed   bool
	st       *state
	recs     []Record // the records not yet stored
	recovery Recovery
	broken   error // set when what the store holds is unknown
	// redact, when set, rewrites each appended event's JSON values
	// (SetRedact).
	redact func([]byte) []byte
}

// SetRedact makes every event appended from now on pass through redact
// before it is checked, stored and returned: its data and unknown keys
// (JSON values) are replaced by what redact returns for them, which must
// be JSON. The event as the log holds it, its followers see it, the
// model's messages derive from it and exports print it is then the
// redacted one. A deployment sets it to keep its secrets out of sessions
// (runtime/redact).
func (s *Session) SetRedact(redact func([]byte) []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.redact = redact
}

// Path is where the session is kept: its file for the file store, the
// name its store gave it otherwise.
func (s *Session) Path() string { return s.path }

// Header returns the session's header.
func (s *Session) Header() Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.header
}

// Recovery says what Open repaired; the zero Recovery for a session made
// by Create.
func (s *Session) Recovery() Recovery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recovery
}

// Events returns a copy of the log, seed and repairs included. The events
// share their Data, SourceEventSeqs and SurfaceOp with the session: do not
// modify those.
func (s *Session) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.st.events)
}

// Surface returns the events the model sees, in the order it sees them:
// the events behind Messages. A compaction picks a run of them to replace.
// As with Events, do not modify what the events share with the session.
func (s *Session) Surface() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	evs := make([]Event, len(s.st.surf.nodes))
	for i, n := range s.st.surf.nodes {
		evs[i] = s.st.events[n.seq]
	}
	return evs
}

// Messages returns the conversation the model sees (see the package
// function Messages for the rules). The result shares nothing with the
// session.
func (s *Session) Messages() []model.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.surf.messages()
}

// Append adds e to the log and returns it as logged, with Seq (the next
// in the log) and Time (now, in Unix milliseconds) set. The event is in
// memory until the next Flush.
//
// It fails with ErrInvalidEvent when e breaks the format: no type, data
// that is not JSON or does not fit a known type's shape, a surface op on
// an event that is not a message or naming events not on the surface,
// sources that are not earlier events.
func (s *Session) Append(e Event) (Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appendLocked(e)
}

func (s *Session) appendLocked(e Event) (Event, error) {
	if s.closed {
		return Event{}, fmt.Errorf("session %s: append: %w", s.st.header.ID, ErrClosed)
	}
	if s.broken != nil {
		return Event{}, s.broken
	}
	e.Seq, e.Time = int64(len(s.st.events)), s.nowMs()
	err := normalize(&e)
	if err == nil && s.redact != nil {
		e.Data = s.redact(e.Data)
		for i := range e.extra {
			e.extra[i].value = s.redact(e.extra[i].value)
		}
	}
	if err == nil {
		err = checkOwn(e)
	}
	var line []byte
	if err == nil {
		line, err = encodeLine(&e)
	}
	if err == nil {
		err = s.st.add(e)
	}
	if err != nil {
		return Event{}, fmt.Errorf("session %s: append %s: %w: %w", s.st.header.ID, e.Type, ErrInvalidEvent, err)
	}
	s.queue(e.Seq, line)
	return e, nil
}

// normalize makes e safe to write as one line: it reports an encoding
// error NewEvent deferred, checks that Data and unknown keys are JSON and
// copies them without line breaks, and copies the other slices, so the
// caller's memory is not kept.
func normalize(e *Event) error {
	if e.err != nil {
		return e.err
	}
	if e.Data == nil {
		return errors.New("event has no data")
	}
	var err error
	if e.Data, err = compact(e.Data); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	if e.SourceEventSeqs != nil {
		e.SourceEventSeqs = slices.Clone(e.SourceEventSeqs)
	}
	if e.SurfaceOp != nil {
		op := *e.SurfaceOp
		if op.Range != nil {
			r := *op.Range
			op.Range = &r
		}
		e.SurfaceOp = &op
	}
	extra := make([]field, len(e.extra))
	for i, f := range e.extra {
		v, err := compact(f.value)
		if err != nil {
			return fmt.Errorf("key %q: %w", f.key, err)
		}
		extra[i] = field{f.key, v}
	}
	e.extra = extra
	return nil
}

// compact returns a copy of the JSON value raw that has no line breaks.
// A value without them is copied as it is, so events read from a file
// are written back unchanged.
func compact(raw []byte) ([]byte, error) {
	if !bytes.ContainsAny(raw, "\r\n") {
		if !json.Valid(raw) {
			return nil, errors.New("invalid JSON")
		}
		return bytes.Clone(raw), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// checkOwn holds events written by this process to the shapes of this
// package, for the types a loaded file is not checked on: chunks and
// compaction records.
func checkOwn(e Event) error {
	var err error
	switch e.Type {
	case TypeAssistantChunk:
		_, err = As[AssistantChunk](e)
	case TypeCompactStart:
		_, err = As[CompactStart](e)
	case TypeCompactSummary:
		_, err = As[CompactSummary](e)
	case TypeCompactEnd:
		_, err = As[CompactEnd](e)
	}
	return err
}

func encodeLine(e *Event) ([]byte, error) {
	b, err := e.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Flush writes the appended events to the store (for the file store:
// to the file, then fsyncs it). When it returns nil they are durable.
// The agent loop calls it at the end of each turn.
//
// If the write fails and the store undid it (the file store cuts the
// file back to what it held before) the events stay pending, so a later
// Flush retries. If what the store holds is unknown (a failed fsync, a
// write that could not be undone), the session then fails every write
// with ErrBroken, and must be reopened.
func (s *Session) Flush() error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	return s.flush()
}

// flush does Flush with flushMu held.
func (s *Session) flush() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("session %s: flush: %w", s.st.header.ID, ErrClosed)
	}
	if s.broken != nil {
		s.mu.Unlock()
		return s.broken
	}
	recs, id := s.recs, s.st.header.ID
	s.recs = nil
	s.mu.Unlock()
	if len(recs) == 0 {
		return nil
	}

	err := s.backend.Append(recs)
	if err == nil {
		if s.onStored != nil {
			s.mu.Lock()
			evs := slices.Clone(s.st.events[recs[0].Seq : recs[len(recs)-1].Seq+1])
			s.mu.Unlock()
			s.onStored(evs)
		}
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if errors.Is(err, ErrNotStored) {
		s.recs = append(recs, s.recs...)
		return fmt.Errorf("session %s: flush: %w", id, err)
	}
	s.broken = fmt.Errorf("session %s: %w: %w", id, ErrBroken, err)
	return s.broken
}

// OnStored makes fn the one reader of what the store holds: each Flush
// that stores events calls it with them, in seq order, once the store
// holds them (for the file store: after the fsync; for PostgreSQL: after
// the commit), and before Flush returns. Calls never overlap, so fn sees
// every stored event once and in order; it runs with the session's flush
// lock held and must not call Flush or Close. Events appended but not yet
// flushed, and the repairs Open stored, are not passed. This is how an
// event reaches anyone outside the process only once it is durable.
func (s *Session) OnStored(fn func([]Event)) {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.onStored = fn
}

// Close flushes the session and closes it in its store (for the file
// store: closes its file). Closing a closed session
// does nothing. If the flush fails, the unflushed events are lost, and
// the error says so.
func (s *Session) Close() error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil
	}
	ferr := s.flush()
	s.mu.Lock()
	cerr := s.backend.Close()
	s.closed = true
	s.recs = nil
	id := s.st.header.ID
	release := s.release
	s.mu.Unlock()
	if release != nil {
		release()
	}
	if ferr != nil {
		ferr = fmt.Errorf("unflushed events lost: %w", ferr)
	}
	if cerr != nil {
		cerr = fmt.Errorf("session %s: close: %w", id, cerr)
	}
	return errors.Join(ferr, cerr)
}
