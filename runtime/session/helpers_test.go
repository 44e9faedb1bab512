package session

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/testcorpus"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
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

func mustAppend(t *testing.T, s *Session, e Event) Event {
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
func script(turn int, tool bool, emit func(Event) Event) {
	emit(NewEvent(TurnStart{Turn: turn, Trigger: &Trigger{Kind: TriggerMessage, Source: &Source{Kind: SourceUser}}}))
	emit(NewEvent(UserMessage{Content: TextContent("prompt <" + string(rune('a'+turn)) + ">"), Source: Source{Kind: SourceUser}}))
	step := 1
	if tool {
		scriptToolStep(turn, step, emit)
		step++
	}
	emit(NewEvent(StepStart{Turn: turn, Step: step}))
	var seqs []int64
	for _, c := range []model.Chunk{
		{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockText},
		{Type: model.ChunkTextDelta, Index: 0, Text: "DO"},
		{Type: model.ChunkTextDelta, Index: 0, Text: "NE"},
		{Type: model.ChunkBlockEnd, Index: 0, Block: &model.Part{Type: model.BlockText, Text: "DONE"}},
		{Type: model.ChunkFinish, Reason: &model.FinishReason{Kind: model.FinishStop}},
	} {
		seqs = append(seqs, emit(NewEvent(AssistantChunk{Turn: turn, Step: step, Chunk: c})).Seq)
	}
	emit(NewEvent(AssistantMessage{Turn: turn, Step: step, Content: TextContent("DONE"),
		Usage: &model.Usage{InputTokens: 10, OutputTokens: 2}}).WithSources(seqs...))
	emit(NewEvent(StepEnd{Turn: turn, Step: step}))
	emit(NewEvent(TurnEnd{Turn: turn, Reason: EndReason{Kind: EndCompleted}}))
}

// scriptToolStep writes a step whose answer calls the tool "bash" and
// the tool's result. It returns the tool/call event.
func scriptToolStep(turn, step int, emit func(Event) Event) Event {
	call := scriptToolCall(turn, step, emit)
	emit(NewEvent(ToolResult{Turn: turn, Step: step, CallID: callID(turn, step),
		Content: TextContent("ok\n")}).WithSources(call.Seq))
	emit(NewEvent(StepEnd{Turn: turn, Step: step}))
	return call
}

// scriptToolCall opens a step whose answer calls the tool "bash", up to
// the tool/call event, which it returns.
func scriptToolCall(turn, step int, emit func(Event) Event) Event {
	emit(NewEvent(StepStart{Turn: turn, Step: step}))
	id := callID(turn, step)
	var seqs []int64
	for _, c := range []model.Chunk{
		{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockToolCall},
		{Type: model.ChunkToolCallDelta, Index: 0, ID: id, Name: "bash", ArgumentsDelta: `{"command":"true"}`},
		{Type: model.ChunkBlockEnd, Index: 0},
		{Type: model.ChunkFinish, Reason: &model.FinishReason{Kind: model.FinishToolCalls}},
	} {
		seqs = append(seqs, emit(NewEvent(AssistantChunk{Turn: turn, Step: step, Chunk: c})).Seq)
	}
	emit(NewEvent(AssistantMessage{Turn: turn, Step: step, Content: Parts{
		{Type: model.BlockReasoning, Text: "run it"},
		{Type: model.BlockToolCall, ID: id, Name: "bash", Arguments: `{"command":"true"}`},
	}}).WithSources(seqs...))
	return emit(NewEvent(ToolCall{Turn: turn, Step: step, CallID: id, Name: "bash", Arguments: `{"command":"true"}`}))
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
func eventTypes(evs []Event) []string {
	var ts []string
	for _, e := range evs {
		ts = append(ts, e.Type)
	}
	return ts
}
