package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/runtime/model"
)

// scripted is a live provider stand-in: its answer depends on the
// request's session, turn and step.
func scripted(ctx context.Context, req *model.Request, emit func(model.Chunk) error) error {
	m := req.Meta
	text := fmt.Sprintf("%s t%d s%d", m.SessionID, m.Turn, m.Step)
	chunks := textAnswer(text)
	if m.Step == 2 { // a tool call with split arguments
		chunks = []model.Chunk{
			{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockReasoning},
			{Type: model.ChunkReasoningDelta, Index: 0, Text: "think"},
			{Type: model.ChunkBlockStart, Index: 1, BlockType: model.BlockToolCall},
			{Type: model.ChunkToolCallDelta, Index: 1, ID: "call_1", Name: "bash", ArgumentsDelta: `{"command":`},
			{Type: model.ChunkToolCallDelta, Index: 1, ArgumentsDelta: `"ls <x> & y"}`},
			{Type: model.ChunkBlockEnd, Index: 0, Block: &model.Part{Type: model.BlockReasoning, Text: "think"}},
			{Type: model.ChunkBlockEnd, Index: 1, Block: &model.Part{Type: model.BlockToolCall, ID: "call_1", Name: "bash", Arguments: `{"command":"ls <x> & y"}`}},
			{Type: model.ChunkUsage, Usage: &model.Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, ReasoningTokens: 4}},
			{Type: model.ChunkFinish, Reason: &model.FinishReason{Kind: model.FinishToolCalls}},
		}
	}
	if m.Step == 3 { // a failure mid-stream
		if err := emit(chunks[0]); err != nil {
			return err
		}
		return &model.APIError{Status: 500, Message: "boom"}
	}
	for _, c := range chunks {
		if err := emit(c); err != nil {
			return err
		}
	}
	return nil
}

// streamOf collects what p answers.
func streamOf(t *testing.T, p model.Provider, meta model.RequestMeta) ([]model.Chunk, error) {
	t.Helper()
	var chunks []model.Chunk
	err := p.Generate(context.Background(), &model.Request{Meta: meta}, func(c model.Chunk) error {
		chunks = append(chunks, c)
		return nil
	})
	return chunks, err
}

func TestRecorderRoundTrip(t *testing.T) {
	var parentOut bytes.Buffer
	rec := NewRecorder(model.ProviderFunc(scripted), &parentOut)
	clock := time.UnixMilli(1_000)
	rec.now = func() time.Time { return clock } // every session starts "at once"

	calls := []model.RequestMeta{
		{SessionID: "parent", Turn: 1, Step: 1},
		{SessionID: "parent", Turn: 1, Step: 2},
		{SessionID: "child", ParentSessionID: "parent", Turn: 1, Step: 1},
		{SessionID: "child", ParentSessionID: "parent", Turn: 1, Step: 2},
		{SessionID: "parent", Turn: 1, Step: 3},
		{SessionID: "parent", Turn: 2, Step: 1},
	}
	live := map[model.RequestMeta][]model.Chunk{}
	for _, m := range calls {
		chunks, err := streamOf(t, rec, m)
		if m.Step == 3 {
			if !errors.As(err, new(*model.APIError)) {
				t.Fatalf("recorder hid the inner error: %v", err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
		live[m] = chunks
	}
	if got := rec.Sessions(); !reflect.DeepEqual(got, []string{"parent", "child"}) {
		t.Fatalf("Sessions = %v", got)
	}

	path := filepath.Join(t.TempDir(), "rec.jsonl")
	if err := rec.WriteFiles(path); err != nil {
		t.Fatal(err)
	}
	p, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open(recording): %v", err)
	}
	scripts := p.Scripts()
	if len(scripts) != 2 || scripts[1].ParentSessionID != "parent" || scripts[1].CreatedAt <= scripts[0].CreatedAt {
		t.Fatalf("recorded scripts: %+v", scripts)
	}
	for _, m := range calls {
		replayMeta := m
		replayMeta.SessionID = "re-" + m.SessionID // other ids: binding is by order
		got, err := streamOf(t, p, replayMeta)
		if m.Step == 3 {
			if !errors.Is(err, model.ErrStreamCut) {
				t.Fatalf("replay of the failed call = %v, want ErrStreamCut", err)
			}
		} else if err != nil {
			t.Fatalf("replay %+v: %v", m, err)
		}
		if !reflect.DeepEqual(got, live[m]) {
			t.Fatalf("replay %+v:\n got %s\nwant %s", m, mustJSON(t, got), mustJSON(t, live[m]))
		}
	}

	// Close writes the parent session to the writer, readable on its own.
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := ReadScript(&parentOut, "parent")
	if err != nil {
		t.Fatal(err)
	}
	if s.SessionID != "parent" || len(s.Steps) != 4 {
		t.Fatalf("parent recording: %+v", s)
	}
	if _, err := streamOf(t, rec, calls[0]); err == nil {
		t.Fatal("Generate after Close succeeded")
	}
}

func TestRecorderRetriedStepReplaces(t *testing.T) {
	n := 0
	inner := model.ProviderFunc(func(ctx context.Context, req *model.Request, emit func(model.Chunk) error) error {
		n++
		for _, c := range textAnswer(fmt.Sprint("attempt ", n)) {
			if err := emit(c); err != nil {
				return err
			}
		}
		return nil
	})
	var out bytes.Buffer
	rec := NewRecorder(inner, &out)
	meta := model.RequestMeta{SessionID: "s", Turn: 1, Step: 1}
	for i := 0; i < 2; i++ {
		if _, err := streamOf(t, rec, meta); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	recorded := out.String()
	s, err := ReadScript(&out, "out")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := New(s, Options{})
	if got, err := replyText(t, p, "x", 1, 1); err != nil || got != "attempt 2" {
		t.Fatalf("replayed %q, %v; want the last attempt", got, err)
	}
	if strings.Count(recorded, "\n") != 1+len(textAnswer("")) {
		t.Fatalf("recording has stale events:\n%s", recorded)
	}
}

func TestRecorderUnknownSession(t *testing.T) {
	rec := NewRecorder(model.ProviderFunc(scripted), nil)
	if err := rec.WriteSession(&bytes.Buffer{}, "nobody"); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("WriteSession = %v", err)
	}
	if err := rec.WriteFiles(filepath.Join(t.TempDir(), "x.jsonl")); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("WriteFiles with nothing recorded = %v", err)
	}
}

// A compaction's summary request, which carries the (turn, step) of the
// step it prepares, is recorded apart from that step's answer and replays
// as the summary.
func TestRecorderCompactionReplays(t *testing.T) {
	var out bytes.Buffer
	rec := NewRecorder(model.ProviderFunc(func(ctx context.Context, req *model.Request, emit func(model.Chunk) error) error {
		text := "answer"
		if req.Meta.Purpose == model.PurposeCompaction {
			text = "SUMMARY of <it> & more"
		}
		for _, c := range textAnswer(text) {
			if err := emit(c); err != nil {
				return err
			}
		}
		return nil
	}), &out)
	comp := model.RequestMeta{SessionID: "s", Turn: 2, Step: 1, Purpose: model.PurposeCompaction}
	step := model.RequestMeta{SessionID: "s", Turn: 2, Step: 1}
	for _, m := range []model.RequestMeta{{SessionID: "s", Turn: 1, Step: 1}, comp, step} {
		if _, err := streamOf(t, rec, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := ReadScript(bytes.NewReader(out.Bytes()), "rec")
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := s.LookupCompaction(2, 1); !ok || c.Summary != "SUMMARY of <it> & more" {
		t.Fatalf("compaction = %+v, %v; recording:\n%s", c, ok, out.Bytes())
	}
	p, err := New(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for m, want := range map[model.RequestMeta]string{comp: "SUMMARY of <it> & more", step: "answer"} {
		chunks, err := streamOf(t, p, m)
		var acc model.Accumulator
		for _, c := range chunks {
			acc.Add(c)
		}
		if err != nil || acc.Complete() != nil || acc.Message().Content[len(acc.Message().Content)-1].Text != want {
			t.Fatalf("replay of %+v = %+v, %v", m, acc.Parts(), err)
		}
	}
}
