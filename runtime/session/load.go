package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// Log is a session file read into memory.
type Log struct {
	Header Header
	// Events are the file's events, followed by those Recovery.Closed
	// added.
	Events []Event
	// Recovery says what reading repaired.
	Recovery Recovery

	st *state // what Resume opens; nil once it has
}

// Recovery says what was repaired when a session file was read: the
// damage a crash can leave.
type Recovery struct {
	// TornLine is the 1-based number of a torn last line that was dropped
	// (an incomplete write: not valid JSON); 0 when there was none.
	TornLine int
	// TornBytes is the number of bytes dropped with it.
	TornBytes int64
	// AddedNewline: the last line was complete but lacked its newline.
	AddedNewline bool
	// Closed are the events added to close a turn left open: an error
	// tool/result ("interrupted: ...") for each unanswered tool call, a
	// step/end if a step was open, and turn/end with kind interrupted.
	Closed []Event
}

// Repaired reports whether anything was repaired.
func (r Recovery) Repaired() bool {
	return r.TornLine > 0 || r.AddedNewline || len(r.Closed) > 0
}

// String describes the repairs, or says there were none.
func (r Recovery) String() string {
	var parts []string
	if r.TornLine > 0 {
		parts = append(parts, fmt.Sprintf("dropped torn line %d (%d bytes)", r.TornLine, r.TornBytes))
	}
	if r.AddedNewline {
		parts = append(parts, "added the missing final newline")
	}
	if n := len(r.Closed); n > 0 {
		turn := -1
		if te, err := As[TurnEnd](r.Closed[n-1]); err == nil {
			turn = te.Turn
		}
		answered := 0
		for _, e := range r.Closed {
			if e.Type == TypeToolResult {
				answered++
			}
		}
		parts = append(parts, fmt.Sprintf("closed turn %d as interrupted (%d unanswered tool calls failed)", turn, answered))
	}
	if len(parts) == 0 {
		return "no repairs"
	}
	return strings.Join(parts, "; ")
}

// ReadFile reads a session file (one a store's Export wrote, or one the
// file store keeps) without changing it. The repairs a store's Open
// would make (see Recovery) are made in memory only.
func ReadFile(path string) (*Log, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("session: read %s: %w", path, err)
	}
	return Decode(path, data)
}

// Decode reads the text of a session file, name standing for it in
// errors. It reads what a crash leaves as a store's Open does, and makes
// the repairs in memory only: a torn last line is dropped (its bytes are
// the last Recovery.TornBytes of data), a missing final newline noted,
// and a turn left open closed by the events in Recovery.Closed. Any other
// fault is ErrCorrupt, a *CorruptError naming the line.
func Decode(name string, data []byte) (*Log, error) {
	st, rec, _, err := parse(data, name, func() int64 { return time.Now().UnixMilli() })
	if err != nil {
		return nil, err
	}
	return &Log{Header: st.header, Events: st.events, Recovery: rec, st: st}, nil
}

// parse reads a session file's contents. It returns the state (the
// closing events of Recovery included), what was repaired, and how many
// leading bytes of data are sound: all of it unless a torn line was
// dropped. now stamps the closing events.
func parse(data []byte, path string, now func() int64) (*state, Recovery, int64, error) {
	type line struct {
		no         int
		start, end int // data[start:end] is the line, without its newline
		newline    bool
	}
	var lines []line
	for off, no := 0, 1; off < len(data); no++ {
		l := line{no: no, start: off, end: len(data)}
		if i := bytes.IndexByte(data[off:], '\n'); i >= 0 {
			l.end, l.newline = off+i, true
		}
		off = l.end + 1
		if len(bytes.TrimSpace(data[l.start:l.end])) > 0 {
			lines = append(lines, l)
		}
	}
	corrupt := func(no int, err error) error {
		return &CorruptError{Path: path, Line: no, Err: err}
	}
	if len(lines) == 0 {
		return nil, Recovery{}, 0, corrupt(0, fmt.Errorf("no header"))
	}
	if lines[0].no != 1 {
		return nil, Recovery{}, 0, corrupt(1, fmt.Errorf("blank line before the header"))
	}

	var rec Recovery
	sound := int64(len(data))
	last := lines[len(lines)-1]
	switch text := data[last.start:last.end]; {
	case !json.Valid(text):
		if len(lines) == 1 {
			return nil, Recovery{}, 0, corrupt(1, fmt.Errorf("torn header"))
		}
		rec.TornLine, rec.TornBytes = last.no, int64(len(data)-last.start)
		sound = int64(last.start)
		lines = lines[:len(lines)-1]
	case !last.newline:
		rec.AddedNewline = true
	}

	st := &state{}
	if err := json.Unmarshal(data[lines[0].start:lines[0].end], &st.header); err != nil {
		return nil, Recovery{}, 0, corrupt(1, err)
	}
	if v := st.header.Version; v != FormatVersion {
		return nil, Recovery{}, 0, fmt.Errorf("session: %s: %w: %d", path, ErrUnsupportedVersion, v)
	}
	for _, l := range lines[1:] {
		var e Event
		if err := json.Unmarshal(data[l.start:l.end], &e); err != nil {
			return nil, Recovery{}, 0, corrupt(l.no, err)
		}
		if err := st.add(e); err != nil {
			return nil, Recovery{}, 0, corrupt(l.no, err)
		}
	}
	if n := st.header.SeedLength; n > len(st.events) {
		return nil, Recovery{}, 0, corrupt(1, fmt.Errorf("seedLength %d exceeds the %d events", n, len(st.events)))
	}

	for _, e := range st.turn.closing() {
		// The closers stand for the moment of the crash: they carry the
		// time of the last event, as the reference's repair does.
		e.Seq, e.Time = int64(len(st.events)), st.events[len(st.events)-1].Time
		if err := st.add(e); err != nil {
			return nil, Recovery{}, 0, corrupt(0, fmt.Errorf("closing the interrupted turn: %w", err))
		}
		rec.Closed = append(rec.Closed, e)
	}
	return st, rec, sound, nil
}
