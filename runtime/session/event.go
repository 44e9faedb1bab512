package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// FormatVersion is the session format version this package reads and
// writes.
const FormatVersion = 0

const typeSession = "session"

// Header is the first line of a session file.
//
// Unknown keys of a header read from a file are kept and written back, in
// their original order.
type Header struct {
	Version int
	ID      string
	// CreatedAt is the creation time in Unix milliseconds. Recorded
	// files may carry 0.
	CreatedAt int64
	// Cwd is the working directory of the session; empty for a cwd-less
	// session.
	Cwd string
	// ParentSession is the id of the session that spawned or forked this
	// one; empty for a top-level session.
	ParentSession string
	// SeedLength is the number of leading events copied from the parent
	// by a fork; 0 when the session has no seed.
	SeedLength int

	extra []field  // unknown keys, verbatim
	keys  []string // key order as read; nil for a header built in code
}

// Event is one line of a session file after the header.
//
// Unknown keys of an event read from a file are kept and written back, in
// their original order, so a file written back through this package
// matches the one read byte for byte when its lines were compact JSON.
type Event struct {
	Type string
	// Seq is the event's position in the log: the first event is 0 and
	// each next one is one more.
	Seq int64
	// Time is when the event was appended, in Unix milliseconds.
	Time int64
	// Data is the event's payload: see the Payload types, and As to
	// decode it. It is shared, not copied: do not modify it.
	Data json.RawMessage
	// SurfaceOp says how the event enters the model-visible conversation;
	// nil for events the model does not see.
	SurfaceOp *SurfaceOp
	// SourceEventSeqs cites earlier events this one was built from: the
	// chunks of an assistant message, the call of a tool result, the
	// replaced messages of a compaction.
	SourceEventSeqs []int64

	extra []field  // unknown keys, verbatim
	keys  []string // key order as read; nil for an event built in code
	err   error    // encoding error deferred by NewEvent, reported by Append
}

// Surface operations.
const (
	// SurfaceAppend adds the event at the end of the model-visible
	// conversation.
	SurfaceAppend = "append"
	// SurfaceReplace puts the event in place of a run of model-visible
	// events (compaction).
	SurfaceReplace = "replace"
)

// SurfaceOp says how an event enters the model-visible conversation (the
// surface: the ordered list of events the model sees).
type SurfaceOp struct {
	// Op is SurfaceAppend or SurfaceReplace.
	Op string
	// Range is the run of surface events a replace takes the place of.
	// A replace with no Range replaces the whole surface before it.
	// Always nil for an append.
	Range *SurfaceRange
}

// SurfaceRange names a run of surface events by the seqs of its first and
// last events, both included, in surface order.
type SurfaceRange struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// MarshalJSON writes "append", "replace", or the ranged form
// {"op":"replace","start":S,"end":E}.
func (op SurfaceOp) MarshalJSON() ([]byte, error) {
	switch {
	case op.Op == SurfaceAppend && op.Range == nil:
		return []byte(`"append"`), nil
	case op.Op == SurfaceReplace && op.Range == nil:
		return []byte(`"replace"`), nil
	case op.Op == SurfaceReplace:
		var o object
		o.addRaw("op", []byte(`"replace"`))
		o.addRaw("start", strconv.AppendInt(nil, op.Range.Start, 10))
		o.addRaw("end", strconv.AppendInt(nil, op.Range.End, 10))
		return o.bytes(), nil
	}
	return nil, fmt.Errorf("invalid surface op %q", op.Op)
}

// UnmarshalJSON reads a surface op. Besides the forms MarshalJSON writes it
// accepts {"op":"append"} and startSeq/endSeq for start/end.
func (op *SurfaceOp) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		switch s {
		case SurfaceAppend, SurfaceReplace:
			*op = SurfaceOp{Op: s}
			return nil
		}
		return fmt.Errorf("unknown surface op %q", s)
	}
	var o struct {
		Op       string `json:"op"`
		Start    *int64 `json:"start"`
		End      *int64 `json:"end"`
		StartSeq *int64 `json:"startSeq"`
		EndSeq   *int64 `json:"endSeq"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return fmt.Errorf("surface op: %w", err)
	}
	start, end := cmpOr(o.Start, o.StartSeq), cmpOr(o.End, o.EndSeq)
	switch {
	case o.Op == SurfaceAppend && start == nil && end == nil:
		*op = SurfaceOp{Op: SurfaceAppend}
	case o.Op == SurfaceReplace && start != nil && end != nil:
		*op = SurfaceOp{Op: SurfaceReplace, Range: &SurfaceRange{Start: *start, End: *end}}
	case o.Op == SurfaceReplace && start == nil && end == nil:
		*op = SurfaceOp{Op: SurfaceReplace}
	default:
		return fmt.Errorf("invalid surface op %s", b)
	}
	return nil
}

func cmpOr(a, b *int64) *int64 {
	if a != nil {
		return a
	}
	return b
}

// Event keys in the order this package writes them.
var eventKeys = []string{"type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp"}

// knownField encodes the field for key, reporting false when key is not a
// field of Event or the field is absent.
func (e *Event) knownField(key string) ([]byte, bool, error) {
	switch key {
	case "type":
		b, err := marshal(e.Type)
		return b, true, err
	case "seq":
		return strconv.AppendInt(nil, e.Seq, 10), true, nil
	case "time":
		return strconv.AppendInt(nil, e.Time, 10), true, nil
	case "data":
		if e.Data == nil {
			return []byte("null"), true, nil
		}
		return e.Data, true, nil
	case "sourceEventSeqs":
		if e.SourceEventSeqs == nil {
			return nil, false, nil
		}
		return appendInts(nil, e.SourceEventSeqs), true, nil
	case "surfaceOp":
		if e.SurfaceOp == nil {
			return nil, false, nil
		}
		b, err := e.SurfaceOp.MarshalJSON()
		return b, true, err
	}
	return nil, false, nil
}

// MarshalJSON writes the event as one line of a session file, without
// escaping HTML characters.
func (e Event) MarshalJSON() ([]byte, error) {
	if e.err != nil {
		return nil, e.err
	}
	return marshalObject(e.keys, eventKeys, e.extra, func(key string, _ bool) ([]byte, bool, error) {
		return e.knownField(key)
	})
}

// UnmarshalJSON reads an event line. type, seq, time and data are
// required; unknown keys are kept.
func (e *Event) UnmarshalJSON(b []byte) error {
	fields, err := readObject(b)
	if err != nil {
		return err
	}
	var ev Event
	for _, f := range fields {
		ev.keys = append(ev.keys, f.key)
		switch f.key {
		case "type":
			err = json.Unmarshal(f.value, &ev.Type)
		case "seq":
			err = json.Unmarshal(f.value, &ev.Seq)
		case "time":
			err = json.Unmarshal(f.value, &ev.Time)
		case "data":
			ev.Data = f.value
		case "sourceEventSeqs":
			if string(f.value) == "null" {
				err = errors.New("want an array")
			} else {
				err = json.Unmarshal(f.value, &ev.SourceEventSeqs)
			}
		case "surfaceOp":
			ev.SurfaceOp = new(SurfaceOp)
			err = ev.SurfaceOp.UnmarshalJSON(f.value)
		default:
			ev.extra = append(ev.extra, f)
		}
		if err != nil {
			return fmt.Errorf("event key %q: %w", f.key, err)
		}
	}
	for _, k := range eventKeys[:4] {
		if !slices.Contains(ev.keys, k) {
			return fmt.Errorf("event has no %q", k)
		}
	}
	*e = ev
	return nil
}

// Header keys in the order this package writes them.
var headerKeys = []string{"type", "version", "id", "createdAt", "cwd", "parentSession", "seedLength"}

// knownField encodes the field for key, reporting false when key is not a
// field of Header or the field is absent. read says the key was in the
// file the header came from, which keeps an optional key with a zero value.
func (h *Header) knownField(key string, read bool) ([]byte, bool, error) {
	switch key {
	case "type":
		return []byte(`"session"`), true, nil
	case "version":
		return strconv.AppendInt(nil, int64(h.Version), 10), true, nil
	case "id":
		b, err := marshal(h.ID)
		return b, true, err
	case "createdAt":
		return strconv.AppendInt(nil, h.CreatedAt, 10), true, nil
	case "cwd":
		b, err := marshal(h.Cwd)
		return b, read || h.Cwd != "", err
	case "parentSession":
		b, err := marshal(h.ParentSession)
		return b, read || h.ParentSession != "", err
	case "seedLength":
		return strconv.AppendInt(nil, int64(h.SeedLength), 10), read || h.SeedLength != 0, nil
	}
	return nil, false, nil
}

// MarshalJSON writes the header line.
func (h Header) MarshalJSON() ([]byte, error) {
	return marshalObject(h.keys, headerKeys, h.extra, h.knownField)
}

// UnmarshalJSON reads a header line: type must be "session"; version, id
// and createdAt are required; cwd, parentSession and seedLength are
// optional; unknown keys are kept.
func (h *Header) UnmarshalJSON(b []byte) error {
	fields, err := readObject(b)
	if err != nil {
		return err
	}
	var hd Header
	var typ string
	for _, f := range fields {
		hd.keys = append(hd.keys, f.key)
		switch f.key {
		case "type":
			err = json.Unmarshal(f.value, &typ)
		case "version":
			err = json.Unmarshal(f.value, &hd.Version)
		case "id":
			err = json.Unmarshal(f.value, &hd.ID)
		case "createdAt":
			err = json.Unmarshal(f.value, &hd.CreatedAt)
		case "cwd":
			err = json.Unmarshal(f.value, &hd.Cwd)
		case "parentSession":
			err = json.Unmarshal(f.value, &hd.ParentSession)
		case "seedLength":
			err = json.Unmarshal(f.value, &hd.SeedLength)
		default:
			hd.extra = append(hd.extra, f)
		}
		if err != nil {
			return fmt.Errorf("header key %q: %w", f.key, err)
		}
	}
	if typ != typeSession {
		return fmt.Errorf("header type is %q, want %q", typ, typeSession)
	}
	for _, k := range headerKeys[1:4] {
		if !slices.Contains(hd.keys, k) {
			return fmt.Errorf("header has no %q", k)
		}
	}
	if hd.ID == "" {
		return errors.New("header has an empty id")
	}
	if hd.SeedLength < 0 {
		return fmt.Errorf("header seedLength %d is negative", hd.SeedLength)
	}
	*h = hd
	return nil
}

// field is one key of a JSON object with its raw value.
type field struct {
	key   string
	value json.RawMessage
}

// readObject splits a JSON object into its keys and raw values, in order.
// Duplicate keys are an error: which one counts would be ambiguous.
func readObject(b []byte) ([]field, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var fields []field
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		for _, f := range fields {
			if f.key == key {
				return nil, fmt.Errorf("duplicate key %q", key)
			}
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		fields = append(fields, field{key, v})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	return fields, nil
}

// marshalObject writes a JSON object. A header or event built in code
// (order nil) is written in canonical key order. One read from a file is
// written in its original key order, followed by any known keys it lacked
// that are now set. known encodes a known key; its bool argument says
// whether the key was in the file, which keeps an optional key whose value
// is zero.
func marshalObject(order, canonical []string, extra []field,
	known func(key string, read bool) ([]byte, bool, error)) ([]byte, error) {
	var o object
	addKnown := func(k string, read bool) error {
		v, ok, err := known(k, read)
		if err != nil {
			return fmt.Errorf("key %q: %w", k, err)
		}
		if ok {
			o.addRaw(k, v)
		}
		return nil
	}
	for _, k := range order {
		if slices.Contains(canonical, k) {
			if err := addKnown(k, true); err != nil {
				return nil, err
			}
			continue
		}
		if i := slices.IndexFunc(extra, func(f field) bool { return f.key == k }); i >= 0 {
			o.addRaw(k, extra[i].value)
		}
	}
	for _, k := range canonical {
		if !slices.Contains(order, k) {
			if err := addKnown(k, false); err != nil {
				return nil, err
			}
		}
	}
	for _, f := range extra {
		if !slices.Contains(order, f.key) {
			o.addRaw(f.key, f.value)
		}
	}
	return o.bytes(), nil
}

// object builds a JSON object from raw values.
type object struct{ b []byte }

func (o *object) addRaw(key string, raw []byte) {
	if len(o.b) == 0 {
		o.b = append(o.b, '{')
	} else {
		o.b = append(o.b, ',')
	}
	k, _ := marshal(key) // a string always encodes
	o.b = append(o.b, k...)
	o.b = append(o.b, ':')
	o.b = append(o.b, raw...)
}

func (o *object) bytes() []byte {
	if len(o.b) == 0 {
		return []byte("{}")
	}
	return append(o.b, '}')
}

// marshal encodes v as compact JSON without escaping <, > and &, as the
// reference harness (JSON.stringify) writes them.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

func appendInts(b []byte, v []int64) []byte {
	b = append(b, '[')
	for i, n := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, n, 10)
	}
	return append(b, ']')
}
