package replay

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/dsh-wasm/dsh-wasm/runtime/model"
)

// ErrUnknownSession: the recorder has seen no model call of that session.
var ErrUnknownSession = errors.New("replay: no recorded session")

// Recorder is a model.Provider that passes requests to another provider
// and keeps every chunk it emitted, per session and (turn, step), so the
// calls can be written out as session files that Open replays.
//
// When a session repeats a (turn, step) — a retried call — the new answer
// replaces the old one. A Recorder is safe for concurrent use.
type Recorder struct {
	inner model.Provider
	w     io.Writer
	now   func() time.Time

	mu       sync.Mutex
	sessions []*recSession // in order of their first call
	byID     map[string]*recSession
	lastTime int64 // latest createdAt handed out, kept increasing
	closed   bool
}

type recSession struct {
	id, parent string
	createdAt  int64
	steps      []*recStep
	byKey      map[[3]int]int // (turn, step, 1 for a compaction) → index into steps
}

type recStep struct {
	turn, step int
	compaction bool // the summary request of a compaction before (turn, step)
	chunks     []recChunk
}

type recChunk struct {
	chunk model.Chunk
	time  int64
}

// NewRecorder records what inner answers. Close writes the first session
// that called the model (the parent) to w; WriteFiles writes them all.
func NewRecorder(inner model.Provider, w io.Writer) *Recorder {
	return &Recorder{inner: inner, w: w, now: time.Now, byID: map[string]*recSession{}}
}

// Generate asks the inner provider, recording each chunk before passing
// it to emit.
func (r *Recorder) Generate(ctx context.Context, req *model.Request, emit func(model.Chunk) error) error {
	if req == nil {
		return errors.New("replay: nil request")
	}
	step, err := r.begin(req.Meta)
	if err != nil {
		return err
	}
	return r.inner.Generate(ctx, req, func(c model.Chunk) error {
		r.mu.Lock()
		step.chunks = append(step.chunks, recChunk{chunk: cloneChunk(c), time: r.now().UnixMilli()})
		r.mu.Unlock()
		return emit(c)
	})
}

// begin registers a call and returns the (fresh) step its chunks go to.
func (r *Recorder) begin(meta model.RequestMeta) (*recStep, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errors.New("replay: recorder is closed")
	}
	s, ok := r.byID[meta.SessionID]
	if !ok {
		created := max(r.now().UnixMilli(), r.lastTime+1)
		r.lastTime = created
		s = &recSession{id: meta.SessionID, parent: meta.ParentSessionID, createdAt: created, byKey: map[[3]int]int{}}
		r.sessions = append(r.sessions, s)
		r.byID[meta.SessionID] = s
	}
	compaction := meta.Purpose == model.PurposeCompaction
	step := &recStep{turn: meta.Turn, step: meta.Step, compaction: compaction}
	key := [3]int{meta.Turn, meta.Step, 0}
	if compaction {
		key[2] = 1
	}
	if i, ok := s.byKey[key]; ok {
		s.steps[i] = step
	} else {
		s.byKey[key] = len(s.steps)
		s.steps = append(s.steps, step)
	}
	return step, nil
}

// Sessions returns the recorded session ids in the order they first
// called the model.
func (r *Recorder) Sessions() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, len(r.sessions))
	for i, s := range r.sessions {
		ids[i] = s.id
	}
	return ids
}

// WriteSession writes one session's recording as a session file: the
// header, then its assistant/chunk events, step by step in the order the
// steps were first asked for. A compaction's summary request is written
// as the session records one, compact/start and compact/summary (its
// text), followed by the step/start of the step it prepares, so that the
// file replays it.
func (r *Recorder) WriteSession(w io.Writer, sessionID string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.byID[sessionID]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownSession, sessionID)
	}
	return s.write(w)
}

// Close writes the first session's recording to the writer given to
// NewRecorder; later calls to Generate fail. With nothing recorded it
// writes nothing.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	if len(r.sessions) == 0 || r.w == nil {
		return nil
	}
	return r.sessions[0].write(r.w)
}

// WriteFiles writes the first session to path and each later one, in
// the order they first called the model, to PREFIX.N.jsonl beside it
// (PREFIX being path without .jsonl): the layout Open reads back.
func (r *Recorder) WriteFiles(path string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sessions) == 0 {
		return fmt.Errorf("%w: nothing recorded", ErrUnknownSession)
	}
	prefix := strings.TrimSuffix(path, ".jsonl")
	for i, s := range r.sessions {
		name := path
		if i > 0 {
			name = fmt.Sprintf("%s.%d.jsonl", prefix, i)
		}
		if err := writeFile(name, s); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(name string, s *recSession) error {
	f, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	if err := s.write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("replay: writing %s: %w", name, err)
	}
	return nil
}

type recordedEvent struct {
	Type string         `json:"type"`
	Seq  int            `json:"seq"`
	Time int64          `json:"time"`
	Data chunkEventJSON `json:"data"`
}

type chunkEventJSON struct {
	Turn  int         `json:"turn"`
	Step  int         `json:"step"`
	Chunk model.Chunk `json:"chunk"`
}

func (s *recSession) write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	h := struct {
		Type          string `json:"type"`
		Version       int    `json:"version"`
		ID            string `json:"id"`
		CreatedAt     int64  `json:"createdAt"`
		ParentSession string `json:"parentSession,omitempty"`
	}{"session", 0, s.id, s.createdAt, s.parent}
	if err := enc.Encode(h); err != nil {
		return fmt.Errorf("replay: writing session %q: %w", s.id, err)
	}
	seq := 0
	for _, st := range s.steps {
		if st.compaction {
			var text strings.Builder
			var last int64
			for _, c := range st.chunks {
				if c.chunk.Type == model.ChunkTextDelta {
					text.WriteString(c.chunk.Text)
				}
				last = c.time
			}
			summary := []model.Part{{Type: model.BlockText, Text: text.String()}}
			for _, ev := range []any{
				map[string]any{"type": eventCompactStart, "seq": seq, "time": last, "data": map[string]int{"turn": st.turn}},
				map[string]any{"type": eventCompactSummary, "seq": seq + 1, "time": last, "data": map[string]any{"summary": summary}},
				map[string]any{"type": eventStepStart, "seq": seq + 2, "time": last, "data": map[string]int{"turn": st.turn, "step": st.step}},
			} {
				if err := enc.Encode(ev); err != nil {
					return fmt.Errorf("replay: writing session %q: %w", s.id, err)
				}
			}
			seq += 3
			continue
		}
		for _, c := range st.chunks {
			ev := recordedEvent{Type: eventAssistantChunk, Seq: seq, Time: c.time,
				Data: chunkEventJSON{Turn: st.turn, Step: st.step, Chunk: c.chunk}}
			if err := enc.Encode(ev); err != nil {
				return fmt.Errorf("replay: writing session %q: %w", s.id, err)
			}
			seq++
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("replay: writing session %q: %w", s.id, err)
	}
	return nil
}
