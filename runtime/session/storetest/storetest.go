// Package storetest is the contract every session.Storage meets: the
// file store (runtime/session/filestore) and the PostgreSQL store run
// the same tests.
package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// Clock is a test clock that ticks one millisecond per reading, so two
// stores given equal clocks stamp equal times.
type Clock struct{ ms atomic.Int64 }

// NewClock starts a clock at startMs.
func NewClock(startMs int64) *Clock {
	c := &Clock{}
	c.ms.Store(startMs)
	return c
}

// Now is the clock's reading.
func (c *Clock) Now() time.Time { return time.UnixMilli(c.ms.Add(1)) }

// Emit appends e to s or fails t.
func Emit(t testing.TB, s *session.Session) func(session.Event) session.Event {
	return func(e session.Event) session.Event {
		t.Helper()
		got, err := s.Append(e)
		if err != nil {
			t.Fatalf("append %s: %v", e.Type, err)
		}
		return got
	}
}

// Turn writes a complete turn as the agent loop does: with tool set a
// first step calls a tool, then a step answers.
func Turn(turn int, tool bool, emit func(session.Event) session.Event) {
	emit(session.NewEvent(session.TurnStart{Turn: turn, Trigger: &session.Trigger{Kind: session.TriggerMessage, Source: &session.Source{Kind: session.SourceUser}}}))
	emit(session.NewEvent(session.UserMessage{Content: session.TextContent(fmt.Sprintf("prompt %d <é>", turn)), Source: session.Source{Kind: session.SourceUser}}))
	step := 1
	if tool {
		call := toolCall(turn, step, emit)
		emit(session.NewEvent(session.ToolResult{Turn: turn, Step: step, CallID: call.CallID, Content: session.TextContent("ok\n")}).WithSources(call.seq))
		emit(session.NewEvent(session.StepEnd{Turn: turn, Step: step}))
		step++
	}
	emit(session.NewEvent(session.StepStart{Turn: turn, Step: step}))
	c := emit(session.NewEvent(session.AssistantChunk{Turn: turn, Step: step, Chunk: model.Chunk{Type: model.ChunkTextDelta, Index: 0, Text: "DONE"}}))
	emit(session.NewEvent(session.AssistantMessage{Turn: turn, Step: step, Content: session.TextContent("DONE"),
		Usage: &model.Usage{InputTokens: 10, OutputTokens: 2}}).WithSources(c.Seq))
	emit(session.NewEvent(session.StepEnd{Turn: turn, Step: step}))
	emit(session.NewEvent(session.TurnEnd{Turn: turn, Reason: session.EndReason{Kind: session.EndCompleted}}))
}

// loggedCall is a logged tool call.
type loggedCall struct {
	CallID string
	seq    int64
}

// toolCall opens a step whose answer calls the tool "bash", up to the
// tool/call event.
func toolCall(turn, step int, emit func(session.Event) session.Event) loggedCall {
	emit(session.NewEvent(session.StepStart{Turn: turn, Step: step}))
	id := fmt.Sprintf("call_%d_%d", turn, step)
	emit(session.NewEvent(session.AssistantMessage{Turn: turn, Step: step, Content: session.Parts{
		{Type: model.BlockToolCall, ID: id, Name: "bash", Arguments: `{"command":"true"}`},
	}}))
	e := emit(session.NewEvent(session.ToolCall{Turn: turn, Step: step, CallID: id, Name: "bash", Arguments: `{"command":"true"}`}))
	return loggedCall{CallID: id, seq: e.Seq}
}

// jsonl is the session file the events of s make: what Export writes.
func jsonl(t testing.TB, h session.Header, evs []session.Event) []byte {
	t.Helper()
	b, err := h.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	buf := append(b, '\n')
	for _, e := range evs {
		b, err := e.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		buf = append(append(buf, b...), '\n')
	}
	return buf
}

// Factory makes an empty store whose clock is now.
type Factory func(t *testing.T, now func() time.Time) session.Storage

// Run runs the contract against the stores newStore makes.
func Run(t *testing.T, newStore Factory) {
	t.Run("RoundTrip", func(t *testing.T) { roundTrip(t, newStore) })
	t.Run("Exists", func(t *testing.T) { exists(t, newStore) })
	t.Run("NotFound", func(t *testing.T) { notFound(t, newStore) })
	t.Run("OneWriter", func(t *testing.T) { oneWriter(t, newStore) })
	t.Run("RepairOpenTurn", func(t *testing.T) { repairOpenTurn(t, newStore) })
	t.Run("List", func(t *testing.T) { list(t, newStore) })
	t.Run("Seed", func(t *testing.T) { seed(t, newStore) })
}

func closeOK(t *testing.T, s *session.Session) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func export(t *testing.T, st session.Storage, id string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := st.Export(id, &buf); err != nil {
		t.Fatalf("export %s: %v", id, err)
	}
	return buf.Bytes()
}

func roundTrip(t *testing.T, newStore Factory) {
	st := newStore(t, NewClock(1_700_000_000_000).Now)
	s, err := st.Create(session.Header{ID: "rt", Cwd: "/work/a"})
	if err != nil {
		t.Fatal(err)
	}
	emit := Emit(t, s)
	Turn(1, true, emit)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	Turn(2, false, emit)
	wantEvents, wantMsgs, h := s.Events(), s.Messages(), s.Header()
	closeOK(t, s) // Close flushes turn 2

	s, err = st.Open("rt")
	if err != nil {
		t.Fatal(err)
	}
	defer closeOK(t, s)
	if s.Recovery().Repaired() {
		t.Errorf("a cleanly closed session was repaired: %s", s.Recovery())
	}
	gh, _ := s.Header().MarshalJSON()
	wh, _ := h.MarshalJSON()
	if !bytes.Equal(gh, wh) {
		t.Errorf("header %s, want %s", gh, wh)
	}
	got := s.Events()
	if len(got) != len(wantEvents) {
		t.Fatalf("%d events after reopening, want %d", len(got), len(wantEvents))
	}
	for i := range got {
		a, _ := got[i].MarshalJSON()
		b, _ := wantEvents[i].MarshalJSON()
		if !bytes.Equal(a, b) {
			t.Errorf("event %d reads back as\n%s\nwant\n%s", i, a, b)
		}
	}
	if !reflect.DeepEqual(s.Messages(), wantMsgs) {
		t.Errorf("messages differ after reopening")
	}
	if got, want := export(t, st, "rt"), jsonl(t, h, wantEvents); !bytes.Equal(got, want) {
		t.Errorf("export:\n%s\nwant\n%s", got, want)
	}
	// The session goes on where it stopped.
	e := Emit(t, s)(session.NewEvent(session.TurnStart{Turn: 3, Trigger: &session.Trigger{Kind: session.TriggerMessage, Source: &session.Source{Kind: session.SourceUser}}}))
	if e.Seq != int64(len(wantEvents)) {
		t.Errorf("next seq %d, want %d", e.Seq, len(wantEvents))
	}
}

func exists(t *testing.T, newStore Factory) {
	st := newStore(t, nil)
	s, err := st.Create(session.Header{ID: "dup"})
	if err != nil {
		t.Fatal(err)
	}
	closeOK(t, s)
	if _, err := st.Create(session.Header{ID: "dup"}); !errors.Is(err, session.ErrExists) {
		t.Fatalf("second Create: %v, want ErrExists", err)
	}
	if _, err := st.Create(session.Header{ID: "a/b"}); !errors.Is(err, session.ErrInvalidID) {
		t.Fatalf("Create with a slash: %v, want ErrInvalidID", err)
	}
}

func notFound(t *testing.T, newStore Factory) {
	st := newStore(t, nil)
	if _, err := st.Open("missing"); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("Open: %v, want ErrNotFound", err)
	}
	if _, err := st.Header("missing"); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("Header: %v, want ErrNotFound", err)
	}
	if err := st.Export("missing", &bytes.Buffer{}); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("Export: %v, want ErrNotFound", err)
	}
}

func oneWriter(t *testing.T, newStore Factory) {
	st := newStore(t, nil)
	s, err := st.Create(session.Header{ID: "one"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Open("one"); !errors.Is(err, session.ErrLocked) {
		t.Fatalf("Open of a session open elsewhere: %v, want ErrLocked", err)
	}
	closeOK(t, s)
	s, err = st.Open("one")
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	if _, err := st.Open("one"); !errors.Is(err, session.ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	closeOK(t, s)
}

// A turn left open (its user message and a tool call stored, then the
// writer gone) is closed as interrupted on the next Open, and the repair
// is stored.
func repairOpenTurn(t *testing.T, newStore Factory) {
	st := newStore(t, NewClock(1_700_000_000_000).Now)
	s, err := st.Create(session.Header{ID: "open-turn"})
	if err != nil {
		t.Fatal(err)
	}
	emit := Emit(t, s)
	Turn(1, true, emit)
	emit(session.NewEvent(session.TurnStart{Turn: 2, Trigger: &session.Trigger{Kind: session.TriggerMessage, Source: &session.Source{Kind: session.SourceUser}}}))
	user := emit(session.NewEvent(session.UserMessage{Content: session.TextContent("long task"), Source: session.Source{Kind: session.SourceUser}}))
	call := toolCall(2, 1, emit)
	kept := len(s.Events())
	closeOK(t, s)

	s, err = st.Open("open-turn")
	if err != nil {
		t.Fatal(err)
	}
	rec := s.Recovery()
	if len(rec.Closed) == 0 {
		t.Fatal("the open turn was not closed")
	}
	evs := s.Events()
	if len(evs) != kept+len(rec.Closed) {
		t.Fatalf("%d events, want %d kept and %d added", len(evs), kept, len(rec.Closed))
	}
	if got, _ := session.As[session.UserMessage](evs[user.Seq]); got.Content == nil {
		t.Errorf("the open turn's user message is gone")
	}
	var answered bool
	for _, e := range rec.Closed {
		if r, err := session.As[session.ToolResult](e); err == nil && r.CallID == call.CallID && r.IsError {
			answered = true
		}
	}
	if !answered {
		t.Errorf("the unanswered tool call got no error result: %v", rec.Closed)
	}
	end, err := session.As[session.TurnEnd](evs[len(evs)-1])
	if err != nil || end.Turn != 2 || end.Reason.Kind != session.EndInterrupted {
		t.Errorf("last event %s %+v (%v), want turn/end of turn 2, interrupted", evs[len(evs)-1].Type, end, err)
	}
	closeOK(t, s)
	s, err = st.Open("open-turn")
	if err != nil {
		t.Fatal(err)
	}
	defer closeOK(t, s)
	if s.Recovery().Repaired() {
		t.Errorf("the repair was not stored: repaired again (%s)", s.Recovery())
	}
	if len(s.Events()) != len(evs) {
		t.Errorf("%d events after the repair was stored, want %d", len(s.Events()), len(evs))
	}
}

func list(t *testing.T, newStore Factory) {
	st := newStore(t, NewClock(1_700_000_000_000).Now)
	for _, id := range []string{"first", "second", "third"} {
		s, err := st.Create(session.Header{ID: id, Cwd: "/w/" + id})
		if err != nil {
			t.Fatal(err)
		}
		closeOK(t, s)
	}
	hs, err := st.List()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, h := range hs {
		ids = append(ids, h.ID+"@"+h.Cwd)
	}
	if want := []string{"first@/w/first", "second@/w/second", "third@/w/third"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("List: %v, want %v", ids, want)
	}
}

// A session created with initial events (a fork's seed) keeps them, seq
// and time included.
func seed(t *testing.T, newStore Factory) {
	st := newStore(t, NewClock(1_700_000_000_000).Now)
	parent, err := st.Create(session.Header{ID: "parent"})
	if err != nil {
		t.Fatal(err)
	}
	Turn(1, true, Emit(t, parent))
	evs := parent.Events()
	closeOK(t, parent)
	child, err := st.Create(session.Header{ID: "child", SeedLength: len(evs)}, evs...)
	if err != nil {
		t.Fatal(err)
	}
	closeOK(t, child)
	child, err = st.Open("child")
	if err != nil {
		t.Fatal(err)
	}
	defer closeOK(t, child)
	if got, want := jsonl(t, child.Header(), child.Events()), jsonl(t, child.Header(), evs); !bytes.Equal(got, want) {
		t.Errorf("seeded events read back differently")
	}
	if _, err := st.Create(session.Header{ID: "bad-seed", SeedLength: len(evs) + 1}, evs...); !errors.Is(err, session.ErrInvalidEvent) {
		t.Errorf("seedLength past the events: %v, want ErrInvalidEvent", err)
	}
}
