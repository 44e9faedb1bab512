package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/dsh-wasm/dsh-wasm/runtime/model"
)

// ErrBadRecording: a session or override file cannot be read as one.
var ErrBadRecording = errors.New("replay: bad recording")

// Script is the model's side of one recorded session: its answers, one
// Step per (turn, step), in recorded order.
type Script struct {
	// Name says where the script came from (a file path), for errors.
	Name            string
	SessionID       string
	ParentSessionID string
	// CreatedAt is the header's creation time (ms since the epoch; 0 in
	// normalised recordings).
	CreatedAt int64
	// SeedLength is how many leading events a fork child copied from its
	// parent. They are not part of the script.
	SeedLength int
	Steps      []Step
	// Compactions are the recorded summaries of the session's
	// compactions, each with the (turn, step) of the step it prepared:
	// the answers to compaction requests (Meta.Purpose
	// model.PurposeCompaction).
	Compactions []Compaction
}

// Compaction is the recorded answer to one compaction request.
type Compaction struct {
	Turn, Step int
	Summary    string
}

// LookupCompaction returns the summary recorded for a compaction before
// (turn, step).
func (s *Script) LookupCompaction(turn, step int) (Compaction, bool) {
	for _, c := range s.Compactions {
		if c.Turn == turn && c.Step == step {
			return c, true
		}
	}
	return Compaction{}, false
}

// Step is the recorded answer to one model call.
type Step struct {
	Turn, Step int
	Chunks     []model.Chunk
}

// Finished reports whether the recorded stream reached its finish chunk.
func (s Step) Finished() bool {
	return len(s.Chunks) > 0 && s.Chunks[len(s.Chunks)-1].Type == model.ChunkFinish
}

// Lookup returns the answer recorded for (turn, step).
func (s *Script) Lookup(turn, step int) (Step, bool) {
	for _, st := range s.Steps {
		if st.Turn == turn && st.Step == step {
			return st, true
		}
	}
	return Step{}, false
}

// The header line of a session file.
type header struct {
	Type          string       `json:"type"`
	Version       *int         `json:"version"`
	ID            string       `json:"id"`
	CreatedAt     json.Number  `json:"createdAt"`
	ParentSession string       `json:"parentSession,omitempty"`
	SeedLength    *json.Number `json:"seedLength,omitempty"`
}

// An event line; only assistant/chunk data is decoded.
type event struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

type chunkEventData struct {
	Turn  *int         `json:"turn"`
	Step  *int         `json:"step"`
	Chunk *model.Chunk `json:"chunk"`
}

const (
	eventAssistantChunk = "assistant/chunk"
	eventCompactStart   = "compact/start"
	eventCompactSummary = "compact/summary"
	eventStepStart      = "step/start"
)

// compactData is what a compaction's events carry that replay needs.
type compactData struct {
	Turn    *int `json:"turn"`
	Summary []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"summary"`
	Step *int `json:"step"`
}

// LoadScript reads the session file at path.
func LoadScript(path string) (*Script, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	defer f.Close()
	return ReadScript(f, path)
}

// ReadScript reads a session in the JSONL session format (version 0): a
// header line, then events. It groups the assistant/chunk events after the
// fork seed by (turn, step), and keeps each compaction's summary
// (compact/summary) with the turn of its compact/start and the step of
// the step/start that follows it. It keeps nothing else; other event types,
// known or not, are skipped. A torn last line (no newline, not JSON), as a
// crash leaves it, is ignored. name labels errors.
func ReadScript(r io.Reader, name string) (*Script, error) {
	br := bufio.NewReader(r)
	bad := func(line int, format string, args ...any) error {
		return fmt.Errorf("%w: %s:%d: %s", ErrBadRecording, name, line, fmt.Sprintf(format, args...))
	}
	lineNo, events := 0, 0
	var s *Script
	index := map[[2]int]int{}
	var pending *Compaction // a summary waiting for the step it prepares
	for {
		raw, readErr := br.ReadBytes('\n')
		if readErr != nil && readErr != io.EOF {
			return nil, fmt.Errorf("replay: reading %s: %w", name, readErr)
		}
		torn := readErr == io.EOF // a last line without its newline
		line := bytes.TrimSpace(raw)
		if len(line) > 0 {
			lineNo++
			if s == nil {
				h, err := parseHeader(line)
				if err != nil {
					return nil, bad(lineNo, "%v", err)
				}
				h.Name = name
				s = h
			} else {
				var ev event
				if err := json.Unmarshal(line, &ev); err != nil || ev.Type == "" {
					if torn {
						break
					}
					if err == nil {
						err = errors.New("event without a type")
					}
					return nil, bad(lineNo, "%v", err)
				}
				events++
				if events <= s.SeedLength {
					continue
				}
				var err error
				switch ev.Type {
				case eventAssistantChunk:
					err = s.addChunk(ev.Data, index)
				case eventCompactStart, eventCompactSummary, eventStepStart:
					err = s.observeCompaction(ev, &pending)
				}
				if err != nil {
					return nil, bad(lineNo, "%v", err)
				}
			}
		}
		if readErr == io.EOF {
			break
		}
	}
	if s == nil {
		return nil, fmt.Errorf("%w: %s: no session header", ErrBadRecording, name)
	}
	if events < s.SeedLength {
		return nil, fmt.Errorf("%w: %s: seedLength %d but only %d events", ErrBadRecording, name, s.SeedLength, events)
	}
	return s, nil
}

func parseHeader(line []byte) (*Script, error) {
	var h header
	if err := json.Unmarshal(line, &h); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if h.Type != "session" {
		return nil, fmt.Errorf("header type %q, want \"session\"", h.Type)
	}
	if h.Version == nil || *h.Version != 0 {
		return nil, errors.New("header is not session format version 0")
	}
	s := &Script{SessionID: h.ID, ParentSessionID: h.ParentSession}
	if h.CreatedAt != "" {
		ms, err := millis(h.CreatedAt)
		if err != nil {
			return nil, fmt.Errorf("header createdAt: %w", err)
		}
		s.CreatedAt = ms
	}
	if h.SeedLength != nil {
		n, err := strconv.Atoi(h.SeedLength.String())
		if err != nil || n < 0 {
			return nil, fmt.Errorf("header seedLength %s is not a count", h.SeedLength)
		}
		s.SeedLength = n
	}
	return s, nil
}

// millis reads a JSON number of milliseconds, integral or not.
func millis(n json.Number) (int64, error) {
	if i, err := n.Int64(); err == nil {
		return i, nil
	}
	f, err := n.Float64()
	if err != nil || f < -(1<<62) || f > 1<<62 {
		return 0, fmt.Errorf("%s is not a time", n)
	}
	return int64(f), nil
}

func (s *Script) addChunk(data json.RawMessage, index map[[2]int]int) error {
	var d chunkEventData
	if err := json.Unmarshal(data, &d); err != nil {
		return fmt.Errorf("assistant/chunk: %w", err)
	}
	if d.Turn == nil || d.Step == nil || d.Chunk == nil {
		return errors.New("assistant/chunk without turn, step or chunk")
	}
	key := [2]int{*d.Turn, *d.Step}
	i, ok := index[key]
	if !ok {
		i = len(s.Steps)
		index[key] = i
		s.Steps = append(s.Steps, Step{Turn: *d.Turn, Step: *d.Step})
	}
	s.Steps[i].Chunks = append(s.Steps[i].Chunks, *d.Chunk)
	return nil
}

// observeCompaction follows a compaction's events: compact/start gives the
// turn, compact/summary the summary, and the next step/start the step.
// Compaction records of a shape it does not know are skipped, as a loader
// keeps event types it does not use; a step/start must be well formed.
func (s *Script) observeCompaction(ev event, pending **Compaction) error {
	var d compactData
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		if ev.Type == eventStepStart {
			return fmt.Errorf("%s: %v", ev.Type, err)
		}
		*pending = nil
		return nil
	}
	switch ev.Type {
	case eventCompactStart:
		*pending = nil
		if d.Turn != nil {
			*pending = &Compaction{Turn: *d.Turn, Step: -1}
		}
	case eventCompactSummary:
		if *pending == nil {
			return nil
		}
		var text bytes.Buffer
		for _, p := range d.Summary {
			if p.Type == model.BlockText {
				text.WriteString(p.Text)
			}
		}
		(*pending).Summary, (*pending).Step = text.String(), 0
	case eventStepStart:
		if c := *pending; c != nil && c.Step == 0 && d.Turn != nil && d.Step != nil && *d.Turn == c.Turn {
			c.Step = *d.Step
			s.Compactions = append(s.Compactions, *c)
		}
		*pending = nil
	}
	return nil
}
