package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/dsh-wasm/dsh-wasm/runtime/model"
)

// Kinds of override entries.
const (
	// KindChunks streams Chunks as a normal answer.
	KindChunks = "chunks"
	// KindHang streams a text block containing "partial", then blocks
	// until the request is cancelled.
	KindHang = "hang"
	// KindThrow streams Chunks, then fails the call with a
	// *model.APIError carrying Message, Code and Status.
	KindThrow = "throw"
)

// HangText is the text a hang entry streams before it blocks.
const HangText = "partial"

// Entry is one element of an override file: the answer to one model call
// of the parent session.
type Entry struct {
	Kind    string
	Chunks  []model.Chunk
	Message string
	Code    string
	Status  int
}

type entryJSON struct {
	Kind    string          `json:"kind"`
	Chunks  []model.Chunk   `json:"chunks,omitempty"`
	Message string          `json:"message,omitempty"`
	Code    json.RawMessage `json:"code,omitempty"`
	Status  int             `json:"status,omitempty"`
}

// UnmarshalJSON reads an entry, rejecting unknown kinds and fields a kind
// does not take. A code may be a JSON string or number.
func (e *Entry) UnmarshalJSON(b []byte) error {
	if err := e.decode(b); err != nil {
		return fmt.Errorf("replay: override entry: %w", err)
	}
	return nil
}

// decode is UnmarshalJSON without the package prefix, for ReadOverride,
// which names the file and the entry itself.
func (e *Entry) decode(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var j entryJSON
	if err := dec.Decode(&j); err != nil {
		return err
	}
	*e = Entry{Kind: j.Kind, Chunks: j.Chunks, Message: j.Message, Status: j.Status}
	if len(j.Code) > 0 && string(j.Code) != "null" {
		var s string
		var n json.Number
		switch {
		case json.Unmarshal(j.Code, &s) == nil:
			e.Code = s
		case json.Unmarshal(j.Code, &n) == nil:
			e.Code = n.String()
		default:
			return fmt.Errorf("code %s is not a string or number", j.Code)
		}
	}
	return e.validate()
}

// MarshalJSON writes the entry in the override file format.
func (e Entry) MarshalJSON() ([]byte, error) {
	j := entryJSON{Kind: e.Kind, Chunks: e.Chunks, Message: e.Message, Status: e.Status}
	if e.Code != "" {
		j.Code, _ = json.Marshal(e.Code)
	}
	if e.Kind != KindHang && j.Chunks == nil {
		j.Chunks = []model.Chunk{}
	}
	return json.Marshal(j)
}

func (e *Entry) validate() error {
	switch e.Kind {
	case KindChunks:
		if e.Message != "" || e.Code != "" || e.Status != 0 {
			return errors.New("a chunks entry takes no message, code or status")
		}
	case KindHang:
		if len(e.Chunks) > 0 || e.Message != "" || e.Code != "" || e.Status != 0 {
			return errors.New("a hang entry takes nothing but its kind")
		}
	case KindThrow:
		if e.Message == "" {
			return errors.New("a throw entry needs a message")
		}
		if e.Status < 0 {
			return fmt.Errorf("throw status %d", e.Status)
		}
	default:
		return fmt.Errorf("unknown override kind %q", e.Kind)
	}
	return nil
}

// LoadOverride reads an override file (replay.override.json).
func LoadOverride(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	defer f.Close()
	return ReadOverride(f, path)
}

// ReadOverride reads an override: a JSON array of entries, entry N
// answering the parent session's Nth model call. name labels errors.
func ReadOverride(r io.Reader, name string) ([]Entry, error) {
	dec := json.NewDecoder(r)
	var raw []json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%w: override %s: %v", ErrBadRecording, name, err)
	}
	if raw == nil {
		return nil, fmt.Errorf("%w: override %s is not a JSON array", ErrBadRecording, name)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: override %s: data after the array", ErrBadRecording, name)
	}
	entries := make([]Entry, len(raw))
	for i, r := range raw {
		if err := entries[i].decode(r); err != nil {
			return nil, fmt.Errorf("%w: override %s: entry %d: %v", ErrBadRecording, name, i, err)
		}
	}
	return entries, nil
}
