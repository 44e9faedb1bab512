package filestore

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/testcorpus"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// corpusFiles returns the corpus's session files, the hook scenarios
// included: this package knows their event types.
func corpusFiles(t *testing.T) []string { return testcorpus.SessionFiles(t) }

// clock is a test clock: every reading is one millisecond after the last.
type clock struct{ ms atomic.Int64 }

func newClock(startMs int64) *clock {
	c := &clock{}
	c.ms.Store(startMs)
	return c
}

func (c *clock) now() time.Time { return time.UnixMilli(c.ms.Add(1)) }

func newTestStore(t *testing.T) (*Store, string) {
	t.Helper()
	root := t.TempDir()
	return New(root, Options{Now: newClock(1_700_000_000_000).now}), root
}

func mustAppend(t *testing.T, s *session.Session, e session.Event) session.Event {
	t.Helper()
	got, err := s.Append(e)
	if err != nil {
		t.Fatalf("Append(%s): %v", e.Type, err)
	}
	return got
}

// script is the events of complete turns, as an agent loop writes them.
// With tool set, the turn's first step calls a tool and a second step
// answers. emit appends one event and returns it as logged.
func script(turn int, tool bool, emit func(session.Event) session.Event) {
	emit(session.NewEvent(session.TurnStart{Turn: turn, Trigger: &session.Trigger{Kind: session.TriggerMessage, Source: &session.Source{Kind: session.SourceUser}}}))
	emit(session.NewEvent(session.UserMessage{Content: session.TextContent("prompt <" + string(rune('a'+turn)) + ">"), Source: session.Source{Kind: session.SourceUser}}))
	step := 1
	if tool {
		scriptToolStep(turn, step, emit)
		step++
	}
	emit(session.NewEvent(session.StepStart{Turn: turn, Step: step}))
	var seqs []int64
	for _, c := range []model.Chunk{
		{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockText},
		{Type: model.ChunkTextDelta, Index: 0, Text: "DO"},
		{Type: model.ChunkTextDelta, Index: 0, Text: "NE"},
		{Type: model.ChunkBlockEnd, Index: 0, Block: &model.Part{Type: model.BlockText, Text: "DONE"}},
		{Type: model.ChunkFinish, Reason: &model.FinishReason{Kind: model.FinishStop}},
	} {
		seqs = append(seqs, emit(session.NewEvent(session.AssistantChunk{Turn: turn, Step: step, Chunk: c})).Seq)
	}
	emit(session.NewEvent(session.AssistantMessage{Turn: turn, Step: step, Content: session.TextContent("DONE"),
		Usage: &model.Usage{InputTokens: 10, OutputTokens: 2}}).WithSources(seqs...))
	emit(session.NewEvent(session.StepEnd{Turn: turn, Step: step}))
	emit(session.NewEvent(session.TurnEnd{Turn: turn, Reason: session.EndReason{Kind: session.EndCompleted}}))
}

// scriptToolStep writes a step whose answer calls the tool "bash" and
// the tool's result. It returns the tool/call event.
func scriptToolStep(turn, step int, emit func(session.Event) session.Event) session.Event {
	call := scriptToolCall(turn, step, emit)
	emit(session.NewEvent(session.ToolResult{Turn: turn, Step: step, CallID: callID(turn, step),
		Content: session.TextContent("ok\n")}).WithSources(call.Seq))
	emit(session.NewEvent(session.StepEnd{Turn: turn, Step: step}))
	return call
}

// scriptToolCall opens a step whose answer calls the tool "bash", up to
// the tool/call event, which it returns.
func scriptToolCall(turn, step int, emit func(session.Event) session.Event) session.Event {
	emit(session.NewEvent(session.StepStart{Turn: turn, Step: step}))
	id := callID(turn, step)
	var seqs []int64
	for _, c := range []model.Chunk{
		{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockToolCall},
		{Type: model.ChunkToolCallDelta, Index: 0, ID: id, Name: "bash", ArgumentsDelta: `{"command":"true"}`},
		{Type: model.ChunkBlockEnd, Index: 0},
		{Type: model.ChunkFinish, Reason: &model.FinishReason{Kind: model.FinishToolCalls}},
	} {
		seqs = append(seqs, emit(session.NewEvent(session.AssistantChunk{Turn: turn, Step: step, Chunk: c})).Seq)
	}
	emit(session.NewEvent(session.AssistantMessage{Turn: turn, Step: step, Content: session.Parts{
		{Type: model.BlockReasoning, Text: "run it"},
		{Type: model.BlockToolCall, ID: id, Name: "bash", Arguments: `{"command":"true"}`},
	}}).WithSources(seqs...))
	return emit(session.NewEvent(session.ToolCall{Turn: turn, Step: step, CallID: id, Name: "bash", Arguments: `{"command":"true"}`}))
}

func callID(turn, step int) string {
	return "call_" + string(rune('0'+turn)) + "_" + string(rune('0'+step))
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("unmarshal %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

// writeFile writes a session file for a test and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// eventTypes lists the types of events.
func eventTypes(evs []session.Event) []string {
	var ts []string
	for _, e := range evs {
		ts = append(ts, e.Type)
	}
	return ts
}

// memLog builds the text of a session file in memory, as a writer would.
type memLog struct {
	t   testing.TB
	st  struct{ events []session.Event }
	buf bytes.Buffer
}

func newMemLog(t testing.TB, h session.Header) *memLog {
	t.Helper()
	m := &memLog{t: t}
	b, err := h.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	m.buf.Write(append(b, '\n'))
	return m
}

func (m *memLog) emit(e session.Event) session.Event {
	m.t.Helper()
	e.Seq, e.Time = int64(len(m.st.events)), 1000+int64(len(m.st.events))
	line, err := e.MarshalJSON()
	if err != nil {
		m.t.Fatalf("emit %s: %v", e.Type, err)
	}
	m.st.events = append(m.st.events, e)
	m.buf.Write(append(line, '\n'))
	return e
}

func (m *memLog) String() string { return m.buf.String() }

var testHeader = session.Header{ID: "s1", CreatedAt: 5, Cwd: "/home/u/ws"}

// A session cut off after a tool call: two complete turns, then a third
// that called a tool and got no result.
func crashedLog(t *testing.T) (*memLog, session.Event) {
	m := newMemLog(t, testHeader)
	script(1, false, m.emit)
	script(2, true, m.emit)
	m.emit(session.NewEvent(session.TurnStart{Turn: 3, Trigger: &session.Trigger{Kind: session.TriggerMessage, Source: &session.Source{Kind: session.SourceUser}}}))
	m.emit(session.NewEvent(session.UserMessage{Content: session.TextContent("third"), Source: session.Source{Kind: session.SourceUser}}))
	call := scriptToolCall(3, 1, m.emit)
	return m, call
}

func relName(path string) string {
	return filepath.Base(filepath.Dir(path)) + "/" + filepath.Base(path)
}
