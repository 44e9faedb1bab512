package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

// memBackend keeps what a session stores, for tests that ask what was
// durable at a given moment.
type memBackend struct {
	mu     sync.Mutex
	stored []session.Record
}

func (b *memBackend) Append(recs []session.Record) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range recs {
		b.stored = append(b.stored, session.Record{Seq: r.Seq, JSON: bytes.Clone(r.JSON)})
	}
	return nil
}

func (b *memBackend) Close() error { return nil }

// holds reports whether the backend stores e exactly as it was recorded.
func (b *memBackend) holds(e session.Event) bool {
	line, err := e.MarshalJSON()
	if err != nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return e.Seq < int64(len(b.stored)) && bytes.Equal(b.stored[e.Seq].JSON, line)
}

func memSession(t *testing.T) (*session.Session, *memBackend) {
	t.Helper()
	p, err := session.Prepare(session.Header{Cwd: "/srv/project"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &memBackend{}
	s, err := session.Resume("mem", p.Log, b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, b
}

// TestOnEventSeesOnlyStoredEvents: every event a front end hears of is
// already durable, exactly as it was told: chunks, tool calls and
// results, plugin events, turn ends.
func TestOnEventSeesOnlyStoredEvents(t *testing.T) {
	sess, b := memSession(t)
	var mu sync.Mutex
	var seen []session.Event
	var early []string
	f := newFixture(t, Options{
		Session: sess,
		Provider: scripted(t,
			step(1, 1, callAnswer(call{"c1", "echo", `{"x":1}`}, call{"c2", "echo", `{"x":2}`})),
			step(1, 2, textAnswer("done"))),
		OnEvent: func(e session.Event) {
			mu.Lock()
			defer mu.Unlock()
			if !b.holds(e) {
				early = append(early, e.Type)
			}
			seen = append(seen, e)
		},
	})
	f.prompt(t, "go")
	mu.Lock()
	defer mu.Unlock()
	if len(early) > 0 {
		t.Fatalf("OnEvent saw events before they were stored: %v", early)
	}
	all := sess.Events()
	if len(seen) != len(all) {
		t.Fatalf("OnEvent saw %d events, the session holds %d", len(seen), len(all))
	}
	for i, e := range seen {
		if e.Seq != int64(i) {
			t.Fatalf("OnEvent's event %d has seq %d: out of order", i, e.Seq)
		}
	}
}

// TestToolCallIsStoredBeforeTheToolRuns: the call is on record before
// its side effect, so a crash while it runs is repaired with it.
func TestToolCallIsStoredBeforeTheToolRuns(t *testing.T) {
	sess, b := memSession(t)
	var missing []string
	tools := &fakeTools{fn: func(_ context.Context, name string, args []byte) (tool.Result, error) {
		found := false
		for _, e := range sess.Events() {
			if e.Type == session.TypeToolCall {
				c, _ := session.As[session.ToolCall](e)
				if c.Arguments == string(args) && b.holds(e) {
					found = true
				}
			}
		}
		if !found {
			missing = append(missing, string(args))
		}
		return tool.Result{Text: "ok"}, nil
	}}
	f := newFixture(t, Options{
		Session: sess,
		Tools:   tools,
		Provider: scripted(t,
			step(1, 1, callAnswer(call{"c1", "echo", `{"x":1}`}, call{"c2", "echo", `{"x":2}`})),
			step(1, 2, textAnswer("done"))),
	})
	f.prompt(t, "go")
	if len(f.tools.called()) != 2 {
		t.Fatalf("tools called: %v", f.tools.called())
	}
	if len(missing) > 0 {
		t.Fatalf("these calls ran before their tool/call was stored: %v", missing)
	}
}

// TestChunksReachOnEventWhileTheModelStreams: chunks are not held back
// until the answer ends; the batched flush makes them durable, and so
// visible, while the stream is still open.
func TestChunksReachOnEventWhileTheModelStreams(t *testing.T) {
	sess, _ := memSession(t)
	sawChunk := make(chan struct{})
	var once sync.Once
	prov := model.ProviderFunc(func(ctx context.Context, req *model.Request, emit func(model.Chunk) error) error {
		ans := textAnswer("hello")
		for _, c := range ans[:5] {
			if err := emit(c); err != nil {
				return err
			}
		}
		// The stream stays open until a front end has seen a chunk.
		select {
		case <-sawChunk:
		case <-time.After(30 * time.Second):
			return errors.New("no chunk reached OnEvent while the stream was open")
		}
		for _, c := range ans[5:] {
			if err := emit(c); err != nil {
				return err
			}
		}
		return nil
	})
	f := newFixture(t, Options{
		Session:  sess,
		Provider: prov,
		OnEvent: func(e session.Event) {
			if e.Type == session.TypeAssistantChunk {
				once.Do(func() { close(sawChunk) })
			}
		},
	})
	res := f.prompt(t, "go")
	if res.End.Kind != session.EndCompleted {
		t.Fatalf("turn ended %+v: %v", res.End, res.Err)
	}
}

// failingBackend stores nothing once failing is set.
type failingBackend struct {
	memBackend
	failing atomic.Bool
}

func (b *failingBackend) Append(recs []session.Record) error {
	if b.failing.Load() {
		return fmt.Errorf("the store is away: %w", session.ErrNotStored)
	}
	return b.memBackend.Append(recs)
}

// TestAFailedChunkFlushEndsTheStream: chunks that cannot be stored are
// seen by nobody, so the stream that makes them stops and the turn fails
// at once, instead of streaming on in the dark.
func TestAFailedChunkFlushEndsTheStream(t *testing.T) {
	p, err := session.Prepare(session.Header{Cwd: "/srv/project"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &failingBackend{}
	sess, err := session.Resume("mem", p.Log, b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	var stopped atomic.Bool
	prov := model.ProviderFunc(func(ctx context.Context, req *model.Request, emit func(model.Chunk) error) error {
		if err := emit(model.Chunk{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockReasoning}); err != nil {
			return err
		}
		b.failing.Store(true)
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
			if err := emit(model.Chunk{Type: model.ChunkReasoningDelta, Index: 0, Text: "hm"}); err != nil {
				stopped.Store(true)
				return err
			}
			time.Sleep(5 * time.Millisecond)
		}
		for _, c := range []model.Chunk{{Type: model.ChunkBlockEnd, Index: 0}, finish(model.FinishStop)} {
			if err := emit(c); err != nil {
				return err
			}
		}
		return nil
	})
	f := newFixture(t, Options{Session: sess, Provider: prov, ChunkFlush: 10 * time.Millisecond})
	if _, err := f.Prompt(context.Background(), "go"); !errors.Is(err, session.ErrNotStored) {
		t.Fatalf("Prompt: %v, want an error matching ErrNotStored", err)
	}
	if !stopped.Load() {
		t.Fatal("the model streamed on although its chunks could not be stored")
	}
}
