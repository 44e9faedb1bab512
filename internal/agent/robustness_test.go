package agent

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/replay"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

// A Prompt refused with ErrTurnRunning queues nothing: its message must
// not ride along, unannounced, in the next caller's turn.
func TestRefusedPromptQueuesNothing(t *testing.T) {
	hang, _ := replay.New(&replay.Script{Name: "x"}, replay.Options{Override: []replay.Entry{{Kind: replay.KindHang}, {Kind: replay.KindChunks, Chunks: textAnswer("ok")}}})
	started := make(chan struct{})
	var once sync.Once
	f := newFixture(t, Options{Provider: hang, OnEvent: func(e session.Event) {
		if e.Type == session.TypeAssistantChunk {
			once.Do(func() { close(started) })
		}
	}})
	done := make(chan struct{})
	go func() { f.Prompt(context.Background(), "first"); close(done) }()
	<-started
	if _, err := f.Prompt(context.Background(), "second (refused)"); !errors.Is(err, ErrTurnRunning) {
		t.Errorf("a Prompt during a running turn: err = %v, want ErrTurnRunning", err)
	}
	f.Cancel("test")
	<-done
	f.prompt(t, "third")
	var users []string
	for _, e := range f.sess.Events() {
		if e.Type == session.TypeUserMessage {
			m, _ := session.As[session.UserMessage](e)
			users = append(users, m.Content.Text())
		}
	}
	t.Logf("user messages: %q", users)
	for _, u := range users {
		if strings.Contains(u, "refused") {
			t.Errorf("a message whose Prompt returned ErrTurnRunning was recorded in a later turn")
		}
	}
}

// A tool runner that panics (a host bug) gives the model an error result;
// the turn goes on and closes properly.
func TestToolRunnerPanicIsAnErrorResult(t *testing.T) {
	prov := scripted(t, step(1, 1, callAnswer(call{"c1", "echo", `{}`})), step(1, 2, textAnswer("done")))
	tools := &fakeTools{fn: func(context.Context, string, []byte) (tool.Result, error) { panic("host bug") }}
	f := newFixture(t, Options{Provider: prov, Tools: tools})
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("panic escaped RunTurn: %v; turn left open, events: %v", r, types(f.sess.Events()))
		}
	}()
	res, err := f.Prompt(context.Background(), "go")
	if err != nil || res.End.Kind != session.EndCompleted {
		t.Fatalf("turn = %+v, %v; want completed", res, err)
	}
	rs := ofType[session.ToolResult](t, f.sess.Events())
	const want = `Error: tool "echo" failed: the tool runner panicked: host bug`
	if len(rs) != 1 || !rs[0].IsError || rs[0].Error == nil || rs[0].Error.Code != CodePluginFailure || rs[0].Content.Text() != want {
		t.Fatalf("tool results = %+v; want one error result %q", rs, want)
	}
	// And that is what the model is sent in the next step.
	reqs := f.prov.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if last.Role != model.RoleTool || last.ToolCallID != "c1" || !last.IsError || len(last.Content) != 1 || last.Content[0].Text != want {
		t.Fatalf("the model was sent %+v", last)
	}
}

// Cancel arriving while the provider returns a complete answer without
// tool calls still ends the turn "aborted".
func TestCancelDuringLastStreamAborts(t *testing.T) {
	var f *fixture
	prov := model.ProviderFunc(func(ctx context.Context, req *model.Request, emit func(model.Chunk) error) error {
		for i, c := range textAnswer("hi") {
			if i == 2 {
				f.Cancel("user")
				time.Sleep(10 * time.Millisecond)
			}
			if err := emit(c); err != nil {
				return err
			}
		}
		return nil
	})
	f = newFixture(t, Options{Provider: prov})
	res := f.prompt(t, "x")
	t.Logf("end=%+v", res.End)
	if res.End.Kind != session.EndAborted {
		t.Errorf("cancelled during the stream, turn ended %q", res.End.Kind)
	}
}

var _ = os.Getenv

// A Cancel that lands while Prompt holds the turn but has not started it
// is kept, and the turn it was meant for ends aborted.
func TestCancelBeforeTheTurnStarts(t *testing.T) {
	f := newFixture(t, Options{Provider: scripted(t, step(1, 1, textAnswer("never")), step(2, 1, textAnswer("ok")))})
	f.Agent.mu.Lock()
	f.Agent.starting = true
	f.Agent.mu.Unlock()
	if !f.Cancel("early") {
		t.Fatal("Cancel during a starting turn reported nothing to cancel")
	}
	if err := f.Enqueue(session.UserMessage{Content: session.TextContent("one")}); err != nil {
		t.Fatal(err)
	}
	res, err := f.RunTurn(context.Background())
	if err != nil || res.End.Kind != session.EndAborted {
		t.Fatalf("turn = %+v, %v; want aborted", res, err)
	}
	if res := f.prompt(t, "two"); res.End.Kind != session.EndCompleted {
		t.Fatalf("the next turn = %+v", res)
	}
}
