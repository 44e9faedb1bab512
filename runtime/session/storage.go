package session

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
)

// Storage is where sessions persist. The stores are packages of their
// own (runtime/session/filestore keeps JSONL files, runtime/session/pgstore
// PostgreSQL rows); they keep the events and build their Sessions with
// Prepare, Restore, Decode and Resume, so the format, its checks and the
// repair of a crashed turn stay here.
//
// Open takes the session for one writer: a second Open of a session that
// is open fails with ErrLocked until the first is closed (or, for a
// shared store, until its holder is gone).
type Storage interface {
	Create(h Header, initial ...Event) (*Session, error)
	Open(id string) (*Session, error)
	List() ([]Header, error)
	// Header reads one session's header without opening it; ErrNotFound
	// for an unknown id.
	Header(id string) (Header, error)
	// Export writes the session as a JSONL session file: the header line
	// then one line per stored event, byte for byte as the file store
	// writes them.
	Export(id string, w io.Writer) error
}

// Record is one event as a store keeps it: its seq and its exact JSON
// text (one line of a session file, without the newline).
type Record struct {
	Seq  int64
	JSON []byte
}

// Backend is where an open Session's new events go.
type Backend interface {
	// Append stores recs durably after the records stored before, in one
	// step: all of them or none. An error that matches ErrNotStored says
	// none was stored and nothing else changed: the records stay queued
	// and the next Flush offers them again. Any other error leaves the
	// session broken (ErrBroken): it must be reopened, and Open reads what
	// was stored.
	Append(recs []Record) error
	// Close releases what the backend holds for the session (its lease).
	Close() error
}

// queue adds an encoded event to what the next Flush writes.
func (s *Session) queue(seq int64, line []byte) {
	s.recs = append(s.recs, Record{Seq: seq, JSON: line[:len(line)-1]})
}

// Prepared is a new session, checked and encoded for a store's Create.
type Prepared struct {
	// Header is the header's JSON text, and Records a record per initial
	// event: what the store keeps.
	Header  []byte
	Records []Record
	// Log is the session as those make it, its header completed (the ID
	// and CreatedAt Prepare chose). Once the store keeps the session, it
	// opens it with Resume(name, Log, ...).
	Log *Log
}

// Prepare checks a new session for a store's Create and encodes it. An
// empty ID gets a random UUID and a zero CreatedAt the time now returns
// (nil: the system clock).
//
// initial are events stored with the header, keeping their Seq and Time:
// a fork's seed, copied from its parent (see ClosedPrefix), or the events
// of a session being copied. SeedLength, which a fork sets to the length
// of its seed, may not exceed their number, and neither the seed nor all
// of initial may end inside a turn.
func Prepare(h Header, now func() time.Time, initial ...Event) (*Prepared, error) {
	if now == nil {
		now = time.Now
	}
	h, buf, st, err := prepare(h, func() int64 { return now().UnixMilli() }, initial)
	if err != nil {
		return nil, err
	}
	p := &Prepared{Log: &Log{Header: h, Events: st.events, st: st}}
	lines := bytes.SplitAfter(buf, []byte("\n"))
	p.Header = bytes.TrimSuffix(lines[0], []byte("\n"))
	for i, l := range lines[1:] {
		if len(l) == 0 {
			continue
		}
		p.Records = append(p.Records, Record{Seq: initial[i].Seq, JSON: bytes.TrimSuffix(l, []byte("\n"))})
	}
	return p, nil
}

// prepare is Prepare's checking and encoding: the header completed, the
// session's text and the state it makes.
func prepare(h Header, nowMs func() int64, initial []Event) (Header, []byte, *state, error) {
	if h.Version != FormatVersion {
		return h, nil, nil, fmt.Errorf("session: create: %w: %d", ErrUnsupportedVersion, h.Version)
	}
	if h.ID == "" {
		h.ID = newID()
	}
	if err := CheckID(h.ID); err != nil {
		return h, nil, nil, fmt.Errorf("session: create: %w", err)
	}
	if h.CreatedAt == 0 {
		h.CreatedAt = nowMs()
	}
	if h.SeedLength < 0 || h.SeedLength > len(initial) {
		return h, nil, nil, fmt.Errorf("session: create %s: %w: seedLength %d, but %d initial events",
			h.ID, ErrInvalidEvent, h.SeedLength, len(initial))
	}
	st := &state{header: h}
	buf, err := h.MarshalJSON()
	if err != nil {
		return h, nil, nil, fmt.Errorf("session: create %s: encode header: %w", h.ID, err)
	}
	buf = append(buf, '\n')
	for i, e := range initial {
		if i == h.SeedLength && st.turn.open {
			return h, nil, nil, fmt.Errorf("session: create %s: %w: the seed ends inside turn %d", h.ID, ErrInvalidEvent, st.turn.turn)
		}
		err := normalize(&e)
		var line []byte
		if err == nil {
			line, err = encodeLine(&e)
		}
		if err == nil {
			err = st.add(e)
		}
		if err != nil {
			return h, nil, nil, fmt.Errorf("session: create %s: %w: initial event %d: %w", h.ID, ErrInvalidEvent, e.Seq, err)
		}
		buf = append(buf, line...)
	}
	if st.turn.open {
		return h, nil, nil, fmt.Errorf("session: create %s: %w: the initial events end inside turn %d", h.ID, ErrInvalidEvent, st.turn.turn)
	}
	return h, buf, st, nil
}

// Restore opens a session a store keeps as header and recs (in seq
// order), with new events going to b. It reads them as Decode reads a
// file, name standing for the file in errors, and repairs the same
// way: a turn left open is closed with an error result for each
// unanswered tool call, step/end for an open step and turn/end kind
// interrupted; the repairs are stored through b before Restore returns
// (see Session.Recovery). A record whose text is not one event is
// ErrCorrupt: a store has no torn lines. now stamps new events (nil: the
// system clock); release, when not nil, is called once by Close.
func Restore(name string, header []byte, recs []Record, b Backend, now func() time.Time, release func()) (*Session, error) {
	var data bytes.Buffer
	data.Write(header)
	data.WriteByte('\n')
	for i, r := range recs {
		if r.Seq != int64(i) {
			return nil, &CorruptError{Path: name, Line: i + 2, Err: fmt.Errorf("record %d has seq %d", i, r.Seq)}
		}
		if bytes.ContainsAny(r.JSON, "\r\n") {
			return nil, &CorruptError{Path: name, Line: i + 2, Err: errors.New("line break inside the record")}
		}
		data.Write(r.JSON)
		data.WriteByte('\n')
	}
	l, err := Decode(name, data.Bytes())
	if err != nil {
		return nil, err
	}
	if l.Recovery.TornLine > 0 || l.Recovery.AddedNewline {
		return nil, &CorruptError{Path: name, Line: l.Recovery.TornLine, Err: errors.New("a record is not one JSON event")}
	}
	s, err := Resume(name, l, b, now, release)
	if err != nil {
		return nil, fmt.Errorf("session: open %s: store repairs: %w", name, err)
	}
	return s, nil
}

// Resume opens the session l holds, with new events going to b: l comes
// from Prepare, once the store keeps what Prepare encoded, or from Decode
// (or ReadFile) of what the store kept, and b stores after it. name
// stands for the session in errors and is its Path. Of the damage Decode
// reports in l.Recovery, the store has dealt with what is its own (a torn
// last line, a missing final newline); Resume stores the events that
// close a turn left open (l.Recovery.Closed) through b before it
// returns, and returns the error as Flush words it if that fails, so the
// store can say what it was doing. now stamps new events (nil: the system
// clock); release, when not nil, is called once by Close.
//
// l belongs to the session afterwards: do not use it again.
func Resume(name string, l *Log, b Backend, now func() time.Time, release func()) (*Session, error) {
	if l.st == nil {
		return nil, fmt.Errorf("session: resume %s: the log was not made by Prepare or Decode, or was resumed already", name)
	}
	if now == nil {
		now = time.Now
	}
	nowMs := func() int64 { return now().UnixMilli() }
	s := &Session{path: name, nowMs: nowMs, release: release, backend: b, st: l.st, recovery: l.Recovery}
	l.st = nil
	for _, e := range l.Recovery.Closed {
		line, err := encodeLine(&e)
		if err != nil {
			return nil, err
		}
		s.queue(e.Seq, line)
	}
	if err := s.Flush(); err != nil {
		return nil, err
	}
	return s, nil
}
