package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/internal/replay"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

func TestTextTurn(t *testing.T) {
	f := newFixture(t, Options{Model: "m1", Provider: scripted(t, step(1, 1, textAnswer("PONG")))})
	res := f.prompt(t, "Reply PONG")
	if res.End.Kind != session.EndCompleted || res.Text != "PONG" || res.Steps != 1 || res.Turn != 1 || res.Err != nil {
		t.Fatalf("result = %+v", res)
	}
	evs := f.sess.Events()
	want := []string{"turn/start", "user/message", "step/start", "assistant/message", "step/end", "turn/end"}
	if got := types(evs); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	// Every chunk is recorded, and the message cites them all.
	var chunkSeqs []int64
	for _, e := range evs {
		if e.Type == session.TypeAssistantChunk {
			chunkSeqs = append(chunkSeqs, e.Seq)
		}
	}
	if len(chunkSeqs) != len(textAnswer("")) {
		t.Fatalf("%d chunks recorded, want %d", len(chunkSeqs), len(textAnswer("")))
	}
	for _, e := range evs {
		if e.Type == session.TypeAssistantMessage && !slices.Equal(e.SourceEventSeqs, chunkSeqs) {
			t.Fatalf("assistant/message sources = %v, want %v", e.SourceEventSeqs, chunkSeqs)
		}
	}
	msg := ofType[session.AssistantMessage](t, evs)[0]
	if msg.Usage == nil || msg.Usage.InputTokens != 100 || len(msg.Content) != 2 || msg.Content[0].Type != model.BlockReasoning {
		t.Fatalf("assistant message = %+v", msg)
	}

	reqs := f.prov.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Model != "m1" || r.System != prompt.Identity+"\n\n"+testPersona ||
		len(r.Tools) != 1 || r.Tools[0].Name != "echo" ||
		r.Meta != (model.RequestMeta{SessionID: f.sess.Header().ID, Turn: 1, Step: 1}) {
		t.Fatalf("request = %+v", r)
	}
	if len(r.Messages) != 1 || r.Messages[0].Role != model.RoleUser || r.Messages[0].Content[0].Text != "Reply PONG" {
		t.Fatalf("request messages = %+v", r.Messages)
	}

	// The turn is on disk.
	log, err := session.ReadFile(f.sess.Path())
	if err != nil {
		t.Fatal(err)
	}
	if len(log.Events) != len(evs) || log.Recovery.Repaired() {
		t.Fatalf("file has %d events (recovery %v), want %d", len(log.Events), log.Recovery, len(evs))
	}
}

func TestToolCallTurn(t *testing.T) {
	f := newFixture(t, Options{Provider: scripted(t,
		step(1, 1, callAnswer(call{"c1", "echo", `{"text":"hi"}`})),
		step(1, 2, textAnswer("DONE")),
	)})
	res := f.prompt(t, "use echo")
	if res.End.Kind != session.EndCompleted || res.Text != "DONE" || res.Steps != 2 {
		t.Fatalf("result = %+v", res)
	}
	if got := f.tools.called(); !slices.Equal(got, []string{`echo {"text":"hi"}`}) {
		t.Fatalf("tool calls = %q", got)
	}
	evs := f.sess.Events()
	want := []string{"turn/start", "user/message",
		"step/start", "assistant/message", "tool/call", "tool/result", "step/end",
		"step/start", "assistant/message", "step/end", "turn/end"}
	if got := types(evs); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	var callSeq int64
	for _, e := range evs {
		switch e.Type {
		case session.TypeToolCall:
			callSeq = e.Seq
			if e.SurfaceOp != nil {
				t.Error("tool/call has a surface op")
			}
		case session.TypeToolResult:
			if !slices.Equal(e.SourceEventSeqs, []int64{callSeq}) {
				t.Errorf("tool/result sources = %v, want [%d]", e.SourceEventSeqs, callSeq)
			}
		}
	}
	tc := ofType[session.ToolCall](t, evs)[0]
	tr := ofType[session.ToolResult](t, evs)[0]
	if tc != (session.ToolCall{Turn: 1, Step: 1, CallID: "c1", Name: "echo", Arguments: `{"text":"hi"}`}) {
		t.Fatalf("tool/call = %+v", tc)
	}
	if tr.CallID != "c1" || tr.IsError || tr.Content.Text() != `echo: {"text":"hi"}` || tr.Error != nil {
		t.Fatalf("tool/result = %+v", tr)
	}
	// The second request carries the call and its result.
	msgs := f.prov.requests()[1].Messages
	if len(msgs) != 3 || msgs[1].Role != model.RoleAssistant || msgs[2].Role != model.RoleTool ||
		msgs[2].ToolCallID != "c1" || msgs[2].Content[0].Text != `echo: {"text":"hi"}` {
		t.Fatalf("second request messages = %+v", msgs)
	}
	if m := f.prov.requests()[1].Meta; m.Turn != 1 || m.Step != 2 {
		t.Fatalf("second request meta = %+v", m)
	}
}

func TestMultiStepTurns(t *testing.T) {
	f := newFixture(t, Options{Provider: scripted(t,
		step(1, 1, callAnswer(call{"a", "echo", `{"n":1}`}, call{"b", "echo", `{"n":2}`})),
		step(1, 2, callAnswer(call{"c", "echo", `{"n":3}`})),
		step(1, 3, textAnswer("three calls")),
		step(2, 1, textAnswer("second turn")),
	)})
	res := f.prompt(t, "go")
	if res.End.Kind != session.EndCompleted || res.Steps != 3 || res.Text != "three calls" {
		t.Fatalf("turn 1 = %+v", res)
	}
	res = f.prompt(t, "again")
	if res.Turn != 2 || res.End.Kind != session.EndCompleted || res.Text != "second turn" {
		t.Fatalf("turn 2 = %+v", res)
	}
	// Calls run one at a time, in order, each result right after its call.
	var seq []string
	for _, e := range f.sess.Events() {
		switch e.Type {
		case session.TypeToolCall:
			c, _ := session.As[session.ToolCall](e)
			seq = append(seq, fmt.Sprintf("call %s %d.%d", c.CallID, c.Turn, c.Step))
		case session.TypeToolResult:
			r, _ := session.As[session.ToolResult](e)
			seq = append(seq, "result "+r.CallID)
		}
	}
	want := []string{"call a 1.1", "result a", "call b 1.1", "result b", "call c 1.2", "result c"}
	if !slices.Equal(seq, want) {
		t.Fatalf("tool events = %v, want %v", seq, want)
	}
	// Turn 2 sees the whole of turn 1.
	reqs := f.prov.requests()
	last := reqs[len(reqs)-1]
	roles := make([]string, len(last.Messages))
	for i, m := range last.Messages {
		roles[i] = m.Role
	}
	wantRoles := []string{"user", "assistant", "tool", "tool", "assistant", "tool", "assistant", "user"}
	if !slices.Equal(roles, wantRoles) || last.Meta.Turn != 2 || last.Meta.Step != 1 {
		t.Fatalf("turn 2 request roles = %v meta %+v, want %v", roles, last.Meta, wantRoles)
	}
}

func TestToolFailuresGoBackToModel(t *testing.T) {
	tools := &fakeTools{fn: func(_ context.Context, name string, args []byte) (tool.Result, error) {
		switch name {
		case "failing":
			return tool.Result{Text: "no such file", IsError: true}, nil
		case "broken":
			return tool.Result{}, fmt.Errorf("%w: unreachable", plugin.ErrTrap)
		}
		return tool.Result{Text: "ok " + string(args)}, nil
	}}
	f := newFixture(t, Options{
		Registry: newRegistry(t, testPersona, "echo", "failing", "broken"),
		Tools:    tools,
		Provider: scripted(t,
			step(1, 1, callAnswer(
				call{"u", "nope", `{}`},
				call{"j", "echo", `{"text":`},
				call{"k", "echo", `[1,2]`},
				call{"f", "failing", `{}`},
				call{"b", "broken", `{}`},
				call{"e", "echo", ``},
			)),
			step(1, 2, textAnswer("handled")),
		),
	})
	res := f.prompt(t, "try things")
	if res.End.Kind != session.EndCompleted || res.Steps != 2 || res.Text != "handled" {
		t.Fatalf("result = %+v", res)
	}
	// JSON that is not an object goes to the tool, which refuses it.
	if got, want := tools.called(), []string{"echo [1,2]", "failing {}", "broken {}", "echo {}"}; !slices.Equal(got, want) {
		t.Fatalf("tools run = %q, want %q", got, want)
	}
	results := ofType[session.ToolResult](t, f.sess.Events())
	type outcome struct {
		isError    bool
		name, code string
		text       string
	}
	want := map[string]outcome{
		"u": {true, ToolNotFoundName, CodeUnknownTool, `Error: unknown tool "nope"`},
		"j": {true, ToolArgsErrorName, CodeInvalidArguments, "Error: invalid arguments: not valid JSON"},
		"k": {false, "", "", "ok [1,2]"},
		"f": {true, "", "", "no such file"},
		"b": {true, ToolErrorName, CodePluginFailure, "plugin trapped"},
		"e": {false, "", "", "ok {}"},
	}
	if len(results) != len(want) {
		t.Fatalf("%d results, want %d", len(results), len(want))
	}
	for _, r := range results {
		w := want[r.CallID]
		name, code := "", ""
		if r.Error != nil {
			name, code = r.Error.Name, r.Error.Code
		}
		if r.IsError != w.isError || code != w.code || name != w.name || !strings.Contains(r.Content.Text(), w.text) {
			t.Errorf("result %s = isError %v code %q %q, want %+v", r.CallID, r.IsError, code, r.Content.Text(), w)
		}
	}
	// The model is told, in the next request, about every failure.
	msgs := f.prov.requests()[1].Messages
	errs := 0
	for _, m := range msgs {
		if m.Role == model.RoleTool && m.IsError {
			errs++
		}
	}
	if errs != 4 {
		t.Fatalf("the model saw %d error results, want 4", errs)
	}
}

func TestModelThrows(t *testing.T) {
	partial := []model.Chunk{
		{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockText},
		{Type: model.ChunkTextDelta, Index: 0, Text: "I will"},
	}
	prov, err := replay.New(&replay.Script{Name: "throw"}, replay.Options{Override: []replay.Entry{
		{Kind: replay.KindThrow, Chunks: partial, Message: "server overloaded", Code: "overloaded", Status: 503},
		{Kind: replay.KindChunks, Chunks: textAnswer("recovered")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, Options{Provider: prov})
	res := f.prompt(t, "first")
	var apiErr *model.APIError
	if res.End.Kind != session.EndError || res.End.Step != 1 || res.End.Code != CodeServer ||
		!errors.Is(res.Err, ErrModel) || !errors.As(res.Err, &apiErr) || apiErr.Status != 503 ||
		!strings.Contains(res.End.Message, "server overloaded") {
		t.Fatalf("result = %+v", res)
	}
	want := []string{"turn/start", "user/message", "step/start", "step/end", "turn/end"}
	if got := types(f.sess.Events()); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if n := len(ofType[session.AssistantChunk](t, f.sess.Events())); n != 2 {
		t.Fatalf("%d chunks recorded, want the 2 streamed", n)
	}
	// The agent accepts the next message, and the failed answer is not
	// part of the conversation.
	res = f.prompt(t, "second")
	if res.End.Kind != session.EndCompleted || res.Text != "recovered" || res.Turn != 2 {
		t.Fatalf("next turn = %+v", res)
	}
	msgs := f.prov.requests()[1].Messages
	if len(msgs) != 2 || msgs[0].Role != model.RoleUser || msgs[1].Role != model.RoleUser {
		t.Fatalf("next request messages = %+v", msgs)
	}
}

func TestMalformedStreamEndsTurnError(t *testing.T) {
	bad := []model.Chunk{
		{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockText},
		{Type: model.ChunkTextDelta, Index: 3, Text: "to a block never opened"},
	}
	cut := []model.Chunk{
		{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockText},
		{Type: model.ChunkTextDelta, Index: 0, Text: "cut"},
	}
	f := newFixture(t, Options{Provider: scripted(t, step(1, 1, bad), step(2, 1, cut), step(3, 1, textAnswer("fine")))})
	res := f.prompt(t, "one")
	if res.End.Kind != session.EndError || !errors.Is(res.Err, model.ErrMalformedStream) {
		t.Fatalf("malformed: %+v", res)
	}
	if n := len(ofType[session.AssistantChunk](t, f.sess.Events())); n != 2 {
		t.Fatalf("%d chunks recorded, want both: the session keeps what the model sent, the bad chunk included", n)
	}
	res = f.prompt(t, "two")
	if res.End.Kind != session.EndError || !errors.Is(res.Err, model.ErrStreamCut) {
		t.Fatalf("cut: %+v", res)
	}
	if res = f.prompt(t, "three"); res.End.Kind != session.EndCompleted {
		t.Fatalf("after failures: %+v", res)
	}
}

func TestCancelMidStream(t *testing.T) {
	prov, err := replay.New(&replay.Script{Name: "cancel"}, replay.Options{Override: []replay.Entry{
		{Kind: replay.KindHang},
		{Kind: replay.KindChunks, Chunks: textAnswer("after cancel")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var a *Agent
	f := newFixture(t, Options{Provider: prov, OnEvent: func(e session.Event) {
		if e.Type == session.TypeAssistantChunk && strings.Contains(string(e.Data), `"text":"partial"`) {
			a.Cancel("session/cancel")
		}
	}})
	a = f.Agent
	res := f.prompt(t, "long task")
	if res.End != (session.EndReason{Kind: session.EndAborted, Reason: "session/cancel"}) || !errors.Is(res.Err, ErrCancelled) {
		t.Fatalf("result = %+v", res)
	}
	want := []string{"turn/start", "user/message", "step/start", "step/end", "turn/end"}
	if got := types(f.sess.Events()); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if res = f.prompt(t, "next"); res.End.Kind != session.EndCompleted || res.Text != "after cancel" {
		t.Fatalf("next turn = %+v", res)
	}
	if f.Cancel("late") {
		t.Fatal("Cancel reported a running turn between turns")
	}
}

func TestCancelByCallerContext(t *testing.T) {
	prov, err := replay.New(&replay.Script{Name: "ctx"}, replay.Options{Override: []replay.Entry{{Kind: replay.KindHang}}})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, Options{Provider: prov})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := f.Enqueue(session.UserMessage{Content: session.TextContent("hang")}); err != nil {
		t.Fatal(err)
	}
	res, err := f.RunTurn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.End != (session.EndReason{Kind: session.EndAborted, Reason: context.DeadlineExceeded.Error()}) || !errors.Is(res.Err, context.DeadlineExceeded) {
		t.Fatalf("result = %+v", res)
	}
	// turn/end is recorded and flushed although the context is done.
	log, err := session.ReadFile(f.sess.Path())
	if err != nil {
		t.Fatal(err)
	}
	if got := log.Events[len(log.Events)-1].Type; got != session.TypeTurnEnd {
		t.Fatalf("last event on disk = %s", got)
	}
}

func TestListenerFailures(t *testing.T) {
	f := newFixture(t, Options{Provider: scripted(t,
		step(2, 1, callAnswer(call{"x", "echo", `{}`}, call{"y", "echo", `{}`})),
		step(2, 2, textAnswer("went on")),
		step(3, 1, textAnswer("fine")),
	)})
	offReq, _ := f.bus.OnWaterfall(events.EventAgentRequest, "test", func(_ context.Context, p any) (any, error) {
		req := p.(*model.Request)
		if req.Messages[len(req.Messages)-1].Content[0].Text == "fail" {
			return nil, errors.New("request listener broke")
		}
		return p, nil
	})
	defer offReq()
	res := f.prompt(t, "fail")
	if res.End.Kind != session.EndError || res.End.Step != 1 || res.End.Code != "" || !errors.Is(res.Err, ErrListener) {
		t.Fatalf("failing listener: %+v", res)
	}
	if n := len(f.prov.requests()); n != 0 {
		t.Fatalf("the model was asked %d times", n)
	}

	// A failing tools/pre-execute makes each call's result an error
	// result for the model, and the turn goes on
	// (core/tools/src/index.ts: the outer catch of execute).
	offPre, _ := f.bus.OnWaterfall(events.EventToolPreExecute, "test", func(context.Context, any) (any, error) {
		return nil, errors.New("pre-execute broke")
	})
	res = f.prompt(t, "tools")
	offPre()
	if res.End.Kind != session.EndCompleted || res.Text != "went on" {
		t.Fatalf("failing pre-execute: %+v", res)
	}
	if n := len(f.tools.called()); n != 0 {
		t.Fatalf("%d tools ran", n)
	}
	for _, r := range ofType[session.ToolResult](t, f.sess.Events()) {
		if !r.IsError || r.Error != nil || !strings.HasPrefix(r.Content.Text(), "Error: tools/pre-execute: ") ||
			!strings.Contains(r.Content.Text(), "pre-execute broke") {
			t.Fatalf("result = %+v", r)
		}
	}
	if res = f.prompt(t, "fine"); res.End.Kind != session.EndCompleted {
		t.Fatalf("the next turn: %+v", res)
	}
}

func TestToolWaterfalls(t *testing.T) {
	f := newFixture(t, Options{Provider: scripted(t,
		step(1, 1, callAnswer(call{"v", "echo", `{"secret":1}`}, call{"r", "echo", `{"a":1}`})),
		step(1, 2, textAnswer("done")),
	)})
	off1, _ := f.bus.OnWaterfall(events.EventToolPreExecute, "veto", func(_ context.Context, p any) (any, error) {
		ex := p.(*ToolExecution)
		if ex.Agent.ID != f.Facts().ID || ex.Turn != 1 || ex.Step != 1 {
			return nil, fmt.Errorf("bad payload %+v", ex)
		}
		if ex.CallID == "v" {
			ex.Deny = "denied by policy"
		}
		return ex, nil
	})
	defer off1()
	off2, _ := f.bus.OnWaterfall(events.EventToolPostExecute, "rewrite", func(_ context.Context, p any) (any, error) {
		ex := p.(*ToolExecution)
		if ex.CallID == "r" {
			ex.Result.Text += " (checked)"
		}
		return ex, nil
	})
	defer off2()
	if res := f.prompt(t, "go"); res.End.Kind != session.EndCompleted {
		t.Fatalf("result = %+v", res)
	}
	if got := f.tools.called(); !slices.Equal(got, []string{`echo {"a":1}`}) {
		t.Fatalf("tools run = %q", got)
	}
	rs := ofType[session.ToolResult](t, f.sess.Events())
	if rs[0].Content.Text() != "Error: denied by policy" || !rs[0].IsError || rs[1].Content.Text() != `echo: {"a":1} (checked)` {
		t.Fatalf("results = %+v", rs)
	}
}

func TestPreStepSeesTheRequestPrompt(t *testing.T) {
	f := newFixture(t, Options{Model: "m", Provider: scripted(t,
		step(1, 1, callAnswer(call{"c", "echo", `{}`})), step(1, 2, textAnswer("ok")))})
	var seen []PreStep
	off, _ := f.bus.On(events.EventAgentPreStep, "test", func(ctx context.Context, p any) error {
		ps := p.(*PreStep)
		seen = append(seen, *ps)
		if got := prompt.AgentFrom(ctx); got == nil || got.ID != f.Facts().ID {
			return fmt.Errorf("context carries agent %v", got)
		}
		return nil
	})
	defer off()
	f.prompt(t, "hi")
	reqs := f.prov.requests()
	if len(seen) != 2 || len(reqs) != 2 {
		t.Fatalf("%d pre-steps, %d requests", len(seen), len(reqs))
	}
	for i := range seen {
		if seen[i].System != reqs[i].System || seen[i].Step != i+1 || seen[i].Turn != 1 ||
			len(seen[i].Messages) != len(reqs[i].Messages) || len(seen[i].Tools) != len(reqs[i].Tools) {
			t.Fatalf("pre-step %d = %+v, request %+v", i, seen[i], reqs[i])
		}
	}
	// The payload encodes for plugins.
	b, err := json.Marshal(&seen[0])
	if err != nil || !strings.Contains(string(b), `"system":"`) {
		t.Fatalf("PreStep JSON = %s, %v", b, err)
	}
}

func TestContinuationAndLimits(t *testing.T) {
	loop := func(turn int) []replay.Step {
		var s []replay.Step
		for n := 1; n <= 3; n++ {
			s = append(s, step(turn, n, callAnswer(call{fmt.Sprintf("c%d", n), "echo", `{}`})))
		}
		return s
	}
	t.Run("max steps", func(t *testing.T) {
		f := newFixture(t, Options{MaxSteps: 2, Provider: scripted(t, loop(1)...)})
		res := f.prompt(t, "loop")
		if res.End != (session.EndReason{Kind: session.EndMaxTokens}) || !errors.Is(res.Err, ErrStepCap) || res.Steps != 2 {
			t.Fatalf("result = %+v", res)
		}
		if n := len(ofType[session.ToolResult](t, f.sess.Events())); n != 2 {
			t.Fatalf("%d results, want 2", n)
		}
	})
	t.Run("continue func", func(t *testing.T) {
		var got []StepResult
		f := newFixture(t, Options{Provider: scripted(t, loop(1)...), Continue: func(s StepResult) bool {
			got = append(got, s)
			return false
		}})
		res := f.prompt(t, "once")
		if res.End.Kind != session.EndCompleted || res.Steps != 1 || len(got) != 1 ||
			len(got[0].ToolCalls) != 1 || got[0].Finish.Kind != model.FinishToolCalls {
			t.Fatalf("result = %+v, continuation saw %+v", res, got)
		}
	})
}

func TestResumeContinuesTheSession(t *testing.T) {
	store := newStore(t)
	sess, err := store.Create(session.Header{Cwd: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	id := sess.Header().ID
	prov := scripted(t, step(1, 1, textAnswer("one")), step(2, 1, textAnswer("two")))
	f := newFixture(t, Options{Session: sess, Provider: prov})
	f.prompt(t, "first")
	f.Close(context.Background())
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}

	reopened, err := store.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	g := newFixture(t, Options{Session: reopened, Provider: prov})
	res := g.prompt(t, "second")
	if res.Turn != 2 || res.Text != "two" {
		t.Fatalf("resumed turn = %+v", res)
	}
	if msgs := g.prov.requests()[0].Messages; len(msgs) != 3 {
		t.Fatalf("resumed request has %d messages, want 3", len(msgs))
	}
}

func TestRunTurnErrors(t *testing.T) {
	if _, err := New(context.Background(), Options{}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("New(zero) = %v", err)
	}
	prov, err := replay.New(&replay.Script{Name: "busy"}, replay.Options{Override: []replay.Entry{{Kind: replay.KindHang}}})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var once sync.Once
	f := newFixture(t, Options{Provider: prov, OnEvent: func(e session.Event) {
		if e.Type == session.TypeAssistantChunk {
			once.Do(func() { close(started) })
		}
	}})
	if _, err := f.RunTurn(context.Background()); !errors.Is(err, ErrNoMessage) {
		t.Fatalf("RunTurn with no message = %v", err)
	}
	if err := f.Enqueue(session.UserMessage{}); !errors.Is(err, ErrNoMessage) {
		t.Fatalf("Enqueue(empty) = %v", err)
	}
	done := make(chan TurnResult)
	go func() {
		res, _ := f.Prompt(context.Background(), "hang")
		done <- res
	}()
	<-started
	f.Enqueue(session.UserMessage{Content: session.TextContent("queued")})
	if _, err := f.RunTurn(context.Background()); !errors.Is(err, ErrTurnRunning) {
		t.Fatalf("concurrent RunTurn = %v", err)
	}
	// Close cancels the running turn, which ends disposed, and waits for
	// it.
	f.Close(context.Background())
	if res := <-done; res.End != (session.EndReason{Kind: session.EndDisposed}) || !errors.Is(res.Err, ErrClosed) {
		t.Fatalf("turn running at Close = %+v", res)
	}
	if _, err := f.Prompt(context.Background(), "x"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Prompt after Close = %v", err)
	}
	if !slices.Equal(f.tools.ended, []string{f.Facts().ID}) {
		t.Fatalf("EndAgent calls = %v", f.tools.ended)
	}
}

func TestLifecycleEvents(t *testing.T) {
	bus := events.New(discard)
	var mu sync.Mutex
	var seen []string
	for _, ev := range []string{events.EventAgentStart, events.EventAgentEnd, events.EventTurnStart, events.EventTurnEnd} {
		bus.On(ev, "test", func(_ context.Context, p any) error {
			mu.Lock()
			defer mu.Unlock()
			switch v := p.(type) {
			case *AgentEvent:
				seen = append(seen, ev+" "+v.Agent.ID)
			case *TurnEvent:
				s := fmt.Sprintf("%s %d", ev, v.Turn)
				if v.End != nil {
					s += " " + v.End.Kind
				}
				seen = append(seen, s)
			}
			return errors.New("lifecycle listeners cannot break the agent")
		})
	}
	f := newFixture(t, Options{ID: "ag", Bus: bus, Provider: scripted(t, step(1, 1, textAnswer("x")))})
	f.prompt(t, "hi")
	f.Close(context.Background())
	want := []string{"agent/start ag", "turn/start 1", "turn/end 1 completed", "agent/end ag"}
	if !slices.Equal(seen, want) {
		t.Fatalf("lifecycle = %v, want %v", seen, want)
	}
}

func TestBuiltinVariables(t *testing.T) {
	reg := prompt.NewRegistry(discard)
	if _, err := RegisterBuiltinVariables(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := RegisterBuiltinVariables(reg); !errors.Is(err, prompt.ErrDuplicateVariable) {
		t.Fatalf("second registration = %v", err)
	}
	for _, tc := range []struct {
		facts      *prompt.AgentFacts
		model, cwd prompt.Value
	}{
		{nil, prompt.Value{}, prompt.Value{}},
		{&prompt.AgentFacts{}, prompt.Value{}, prompt.Value{}},
		{&prompt.AgentFacts{Model: "m", Cwd: "/c"}, prompt.Value{Text: "m", OK: true}, prompt.Value{Text: "/c", OK: true}},
	} {
		a, err := reg.Assemble(context.Background(), prompt.AssembleContext{Agent: tc.facts})
		if err != nil {
			t.Fatal(err)
		}
		if a.Variables[VarModel] != tc.model || a.Variables[VarCwd] != tc.cwd {
			t.Errorf("facts %+v: variables %v", tc.facts, a.Variables)
		}
	}
}

// The loop starts no goroutine of its own: after turns, a cancel and a
// close, the count is back where it was.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		prov, err := replay.New(&replay.Script{Name: "leak", Steps: nil}, replay.Options{Override: []replay.Entry{
			{Kind: replay.KindChunks, Chunks: callAnswer(call{"c", "echo", `{}`})},
			{Kind: replay.KindChunks, Chunks: textAnswer("a")},
			{Kind: replay.KindHang},
		}})
		if err != nil {
			t.Fatal(err)
		}
		var a *Agent
		f := newFixture(t, Options{Provider: prov, OnEvent: func(e session.Event) {
			if e.Type == session.TypeAssistantChunk && strings.Contains(string(e.Data), "partial") {
				a.Cancel("test")
			}
		}})
		a = f.Agent
		f.prompt(t, "one")
		if res := f.prompt(t, "two"); res.End.Kind != session.EndAborted {
			t.Fatalf("second turn = %+v", res)
		}
		f.Close(context.Background())
		f.sess.Close()
	}()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines before, %d after:\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}
