package agent

// Differential tests against the reference harness (issue 12), one per
// numbered point. Each builds a situation, runs it through the loop, and
// asserts the exact events (type and data, chunks left out) or request
// bytes the reference writes in that situation. The expected values come
// from the reference's recorded sessions where one covers the point
// (../shared/conformance), and otherwise from its code, cited in each
// test: the reference is deepseek-ai/deepseek-harness at the spec's
// commit 3633cf90c8.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/internal/replay"
	"github.com/dsh-wasm/dsh-wasm/internal/testcorpus"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/deepseek"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

// lines returns each event but the chunks as "type data", for comparing a
// session with the reference's exact records.
func lines(evs []session.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Type != session.TypeAssistantChunk {
			out = append(out, e.Type+" "+string(e.Data))
		}
	}
	return out
}

// expectLines fails t unless got equals want, line for line.
func expectLines(t *testing.T, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// js encodes s as JSON.stringify does.
func js(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

const (
	userLine     = `user/message {"content":[{"type":"text","text":"go"}],"source":{"kind":"user"}}`
	turn1Start   = `turn/start {"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}`
	step11Start  = `step/start {"turn":1,"step":1}`
	step11End    = `step/end {"turn":1,"step":1}`
	turnComplete = `turn/end {"turn":1,"reason":{"kind":"completed"}}`
	textMsg11    = `assistant/message {"turn":1,"step":1,"content":[{"type":"reasoning","text":"thinking about it"},{"type":"text","text":"%s"}],"usage":{"inputTokens":100,"outputTokens":10,"cacheReadTokens":0,"reasoningTokens":0}}`
)

// Point 1, the step boundary (agent-loop/src/loop.ts, runTurn: assemble,
// renderPrompt and agent/pre-step run before session('step/start')).
// Before: step/start was recorded before the prompt was built, so a render
// failure wrote an empty step/start, step/end pair, pre-step records
// landed inside the step, and a cancel between steps recorded an empty
// step. After: no step.
func TestConformance01StepBoundary(t *testing.T) {
	t.Run("render failure records no step", func(t *testing.T) {
		f := newFixture(t, Options{Registry: newRegistry(t, "You are {{nobody}}."), Provider: scripted(t)})
		res := f.prompt(t, "go")
		lns := lines(f.sess.Events())
		expectLines(t, lns[:2], []string{turn1Start, userLine})
		if len(lns) != 3 || !strings.HasPrefix(lns[2], `turn/end {"turn":1,"reason":{"kind":"error","step":1,"message":"`) ||
			strings.Contains(lns[2], `"code"`) || !strings.Contains(lns[2], "nobody") {
			t.Fatalf("events = %q", lns)
		}
		if res.Steps != 0 || len(f.prov.requests()) != 0 {
			t.Fatalf("result %+v, %d requests", res, len(f.prov.requests()))
		}
	})
	t.Run("pre-step records come before their step", func(t *testing.T) {
		f := newFixture(t, Options{Provider: scripted(t,
			step(1, 1, callAnswer(call{"c", "echo", `{}`})), step(1, 2, textAnswer("done")))})
		f.bus.On(events.EventAgentPreStep, "test", func(_ context.Context, p any) error {
			_, err := f.sess.Append(session.Event{Type: "test/pre-step", Data: fmt.Appendf(nil, `{"step":%d}`, p.(*PreStep).Step)})
			return err
		})
		f.prompt(t, "go")
		var got []string
		for _, l := range lines(f.sess.Events()) {
			if strings.HasPrefix(l, "step/") || strings.HasPrefix(l, "test/") {
				got = append(got, l)
			}
		}
		expectLines(t, got, []string{`test/pre-step {"step":1}`, step11Start, step11End,
			`test/pre-step {"step":2}`, `step/start {"turn":1,"step":2}`, `step/end {"turn":1,"step":2}`})
	})
	t.Run("cancel between steps records no step", func(t *testing.T) {
		f := newFixture(t, Options{Provider: scripted(t, step(1, 1, callAnswer(call{"c", "echo", `{}`})))})
		f.bus.On(events.EventAgentPreStep, "test", func(_ context.Context, p any) error {
			if p.(*PreStep).Step == 2 {
				f.Cancel("session/cancel")
			}
			return nil
		})
		f.prompt(t, "go")
		lns := lines(f.sess.Events())
		expectLines(t, lns[len(lns)-2:], []string{step11End, `turn/end {"turn":1,"reason":{"kind":"aborted","reason":"session/cancel"}}`})
		if n := len(ofType[session.StepStart](t, f.sess.Events())); n != 1 {
			t.Fatalf("%d steps recorded, want 1", n)
		}
	})
}

// Point 2: an assemble hook that returns no assembly fails the turn with
// an error naming it. The reference's assemble waterfall has no empty
// fallback (system-prompt/src/index.ts): a listener must return the
// assembly. Before: an empty prompt (no system prompt, no tools) and a
// turn that completed. After: turn/end error naming the hook, no request.
func TestConformance02NoAssembly(t *testing.T) {
	reg := newRegistry(t, testPersona, "echo")
	if _, err := reg.RegisterAssembleHook("plugin:forgetful", func(context.Context, prompt.AssembleContext, prompt.AssembleFunc) (*prompt.Assembly, error) {
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, Options{Registry: reg, Provider: scripted(t, step(1, 1, textAnswer("hi")))})
	res := f.prompt(t, "go")
	if !errors.Is(res.Err, prompt.ErrNoAssembly) || len(f.prov.requests()) != 0 {
		t.Fatalf("result = %+v", res)
	}
	lns := lines(f.sess.Events())
	expectLines(t, lns, []string{turn1Start, userLine,
		`turn/end {"turn":1,"reason":{"kind":"error","step":1,"message":` + js(res.Err.Error()) + `}}`})
	if !strings.Contains(res.Err.Error(), "plugin:forgetful") {
		t.Fatalf("the error does not name the hook: %v", res.Err)
	}
}

// Point 3: error turn ends are {kind:"error", step, message, code?} with
// the reference's codes (session/src/types.ts TurnEndReasonMap;
// agent-loop/src/loop.ts failTurn and errorData; llm-deepseek/src/adapter.ts
// httpErrorCode), other kinds carry only their own fields, and a turn an
// agent's Close interrupts ends {kind:"disposed"}.
func TestConformance03ErrorTurnEnds(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
	}{{401, "AUTH"}, {403, "AUTH"}, {429, "RATE_LIMIT"}, {400, "INVALID_REQUEST"}, {500, "SERVER"}, {503, "SERVER"}, {418, "HTTP_418"}} {
		prov, err := replay.New(&replay.Script{Name: "err"}, replay.Options{Override: []replay.Entry{
			{Kind: replay.KindThrow, Message: "refused", Status: tc.status}}})
		if err != nil {
			t.Fatal(err)
		}
		f := newFixture(t, Options{Provider: prov})
		res := f.prompt(t, "go")
		lns := lines(f.sess.Events())
		// The message is the provider's own, as the reference records
		// it; the wrapped chain is only in res.Err.
		if !strings.Contains(res.Err.Error(), "model call failed") {
			t.Errorf("the turn's error %q lost its chain", res.Err)
		}
		want := `turn/end {"turn":1,"reason":{"kind":"error","step":1,"message":"refused","code":"` + tc.code + `"}}`
		expectLines(t, lns, []string{turn1Start, userLine, step11Start, step11End, want})
	}

	t.Run("disposed", func(t *testing.T) {
		prov, err := replay.New(&replay.Script{Name: "hang"}, replay.Options{Override: []replay.Entry{{Kind: replay.KindHang}}})
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
		done := make(chan TurnResult)
		go func() {
			res, _ := f.Prompt(context.Background(), "go")
			done <- res
		}()
		<-started
		f.Close(context.Background())
		<-done
		lns := lines(f.sess.Events())
		expectLines(t, lns[len(lns)-1:], []string{`turn/end {"turn":1,"reason":{"kind":"disposed"}}`})
	})
}

// Point 4: finish reasons are the reference's vocabulary (llm/src/types.ts
// FinishReasonMap). DeepSeek's content_filter is an error finish with
// code CONTENT_FILTER (llm-deepseek/src/translate.ts mapFinishReason); an
// error or aborted finish throws before the assistant message, so it
// records none and runs no tool (agent-loop/src/loop.ts finishError); a
// kind outside the vocabulary is a malformed stream.
func TestConformance04FinishReasons(t *testing.T) {
	withFinish := func(r model.FinishReason) []model.Chunk {
		cs := callAnswer(call{"c", "echo", `{}`})
		cs[len(cs)-1] = model.Chunk{Type: model.ChunkFinish, Reason: &r}
		return cs
	}
	for _, tc := range []struct {
		name   string
		finish model.FinishReason
		end    string
	}{
		{"content filter", model.FinishReason{Kind: model.FinishError, Message: "model stopped: content_filter", Code: "CONTENT_FILTER"},
			`{"kind":"error","step":1,"message":"model stopped: content_filter","code":"CONTENT_FILTER"}`},
		{"aborted", model.FinishReason{Kind: model.FinishAborted},
			`{"kind":"error","step":1,"message":"model stream aborted","code":"ABORTED"}`},
		{"unknown", model.FinishReason{Kind: "length"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{Provider: scripted(t, step(1, 1, withFinish(tc.finish)))})
			res := f.prompt(t, "go")
			lns := lines(f.sess.Events())
			end := tc.end
			if end == "" {
				if res.End.Code != CodeMalformedStream || !errors.Is(res.Err, model.ErrMalformedStream) {
					t.Fatalf("result = %+v", res)
				}
				end = `{"kind":"error","step":1,"message":` + js(res.Err.Error()) + `,"code":"MALFORMED_RESPONSE"}`
			}
			expectLines(t, lns, []string{turn1Start, userLine, step11Start, step11End, `turn/end {"turn":1,"reason":` + end + `}`})
			if len(f.tools.called()) != 0 {
				t.Fatal("a tool ran")
			}
		})
	}
}

// Point 5: a truncated answer (finish max-tokens) keeps its text and
// drops its tool calls: no call runs, no call or result is recorded, and
// the turn ends max-tokens (agent-loop/src/loop.ts runStep,
// withoutToolCalls). An answer with neither content nor usage records no
// assistant message.
func TestConformance05TruncatedAnswer(t *testing.T) {
	cut := []model.Chunk{
		{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockText},
		{Type: model.ChunkTextDelta, Index: 0, Text: "I will run"},
		{Type: model.ChunkBlockEnd, Index: 0},
		{Type: model.ChunkBlockStart, Index: 1, BlockType: model.BlockToolCall},
		{Type: model.ChunkToolCallDelta, Index: 1, ID: "c", Name: "echo", ArgumentsDelta: `{"te`},
		{Type: model.ChunkBlockEnd, Index: 1},
		finish(model.FinishMaxTokens),
	}
	f := newFixture(t, Options{Provider: scripted(t, step(1, 1, cut), step(2, 1, []model.Chunk{finish(model.FinishStop)}))})
	res := f.prompt(t, "go")
	expectLines(t, lines(f.sess.Events()), []string{turn1Start, userLine, step11Start,
		`assistant/message {"turn":1,"step":1,"content":[{"type":"text","text":"I will run"}]}`,
		step11End, `turn/end {"turn":1,"reason":{"kind":"max-tokens"}}`})
	if res.Text != "I will run" || len(f.tools.called()) != 0 {
		t.Fatalf("result %+v, tools %v", res, f.tools.called())
	}

	f.prompt(t, "again")
	lns := lines(f.sess.Events())
	expectLines(t, lns[len(lns)-3:], []string{`step/start {"turn":2,"step":1}`, `step/end {"turn":2,"step":1}`,
		`turn/end {"turn":2,"reason":{"kind":"completed"}}`})
}

// Point 6: tool listeners (core/tools/src/index.ts ToolRegistry.execute):
// the reference's event names, an old name refused naming the new one, a
// failing listener on either side an error result while the turn goes on,
// and a pre-execute listener that can only deny.
func TestConformance06ToolListeners(t *testing.T) {
	bus := events.New(discard)
	for _, old := range []string{"tool/pre-execute", "tool/post-execute"} {
		_, err := bus.OnWaterfall(old, "policy", func(_ context.Context, p any) (any, error) { return p, nil })
		_, err2 := bus.On(old, "policy", func(context.Context, any) error { return nil })
		want := "tools/" + strings.TrimPrefix(old, "tool/")
		for _, e := range []error{err, err2} {
			if !errors.Is(e, events.ErrRenamedEvent) || !strings.Contains(e.Error(), `"`+want+`"`) {
				t.Fatalf("subscribing to %s = %v, want an error naming %s", old, e, want)
			}
		}
	}
	if events.EventToolPreExecute != "tools/pre-execute" || events.EventToolPostExecute != "tools/post-execute" {
		t.Fatal("event names are not the reference's")
	}

	f := newFixture(t, Options{Bus: bus, Provider: scripted(t,
		step(1, 1, callAnswer(call{"deny", "echo", `{}`}, call{"rename", "echo", `{}`}, call{"prefail", "echo", `{}`},
			call{"postfail", "echo", `{}`}, call{"ok", "echo", `{"a":1}`})),
		step(1, 2, textAnswer("done")))})
	bus.OnWaterfall(events.EventToolPreExecute, "policy", func(_ context.Context, p any) (any, error) {
		ex := p.(*ToolExecution)
		switch ex.CallID {
		case "deny":
			ex.Deny = "not on this repo"
		case "rename":
			ex.Name = "other"
		case "prefail":
			return nil, errors.New("policy crashed")
		}
		return ex, nil
	})
	bus.OnWaterfall(events.EventToolPostExecute, "audit", func(_ context.Context, p any) (any, error) {
		if p.(*ToolExecution).CallID == "postfail" {
			return nil, errors.New("audit log full")
		}
		return p, nil
	})
	if res := f.prompt(t, "go"); res.End.Kind != session.EndCompleted || res.Text != "done" {
		t.Fatalf("result = %+v", res)
	}
	result := func(id, text string) string {
		return `tool/result {"turn":1,"step":1,"callId":"` + id + `","content":[{"type":"text","text":` + js(text) + `}],"isError":true}`
	}
	var got []string
	for _, l := range lines(f.sess.Events()) {
		if strings.HasPrefix(l, "tool/result") {
			got = append(got, l)
		}
	}
	expectLines(t, got, []string{
		result("deny", "Error: not on this repo"),
		result("rename", "Error: tools/pre-execute: "+errPreExecuteRewrite.Error()),
		result("prefail", `Error: tools/pre-execute: event "tools/pre-execute": listener "policy": policy crashed`),
		result("postfail", `Error: tools/post-execute: event "tools/post-execute": listener "audit": audit log full`),
		`tool/result {"turn":1,"step":1,"callId":"ok","content":[{"type":"text","text":"echo: {\"a\":1}"}],"isError":false}`,
	})
	// Only the allowed calls ran: the denied, renamed and failed ones did
	// not, and the post-execute failure came after its call ran.
	if got := f.tools.called(); !slices.Equal(got, []string{"echo {}", `echo {"a":1}`}) {
		t.Fatalf("tools run = %q", got)
	}
}

// Point 7: after a cancel, the calls that did not run record nothing
// (agent-loop/src/loop.ts runStep: signal.aborted throws before the next
// session('tool/call')). Before: each unrun call recorded a tool/call and
// a NOT_RUN result. After: nothing.
func TestConformance07CancelRecordsNoUnrunCalls(t *testing.T) {
	var f *fixture
	tools := &fakeTools{fn: func(_ context.Context, name string, args []byte) (tool.Result, error) {
		f.Cancel("session/cancel")
		return tool.Result{Text: "first ran"}, nil
	}}
	f = newFixture(t, Options{Tools: tools, Provider: scripted(t,
		step(1, 1, callAnswer(call{"a", "echo", `{}`}, call{"b", "echo", `{}`})))})
	f.prompt(t, "go")
	lns := lines(f.sess.Events())
	expectLines(t, lns[len(lns)-4:], []string{
		`tool/call {"turn":1,"step":1,"callId":"a","name":"echo","arguments":"{}"}`,
		`tool/result {"turn":1,"step":1,"callId":"a","content":[{"type":"text","text":"first ran"}],"isError":false}`,
		step11End,
		`turn/end {"turn":1,"reason":{"kind":"aborted","reason":"session/cancel"}}`,
	})
}

// Point 8: tool error texts (core/tools/src/index.ts ToolNotFoundError,
// toolErrorResult: "Error: " and the message, {name, code}); JSON that is
// not an object goes to the tool as it is (loop.ts parses, the tool's
// schema refuses).
func TestConformance08ToolErrorTexts(t *testing.T) {
	f := newFixture(t, Options{Provider: scripted(t,
		step(1, 1, callAnswer(call{"u", "x", `{}`}, call{"n", "echo", `[1]`})), step(1, 2, textAnswer("ok")))})
	f.prompt(t, "go")
	var got []string
	for _, l := range lines(f.sess.Events()) {
		if strings.HasPrefix(l, "tool/result") {
			got = append(got, l)
		}
	}
	expectLines(t, got, []string{
		`tool/result {"turn":1,"step":1,"callId":"u","content":[{"type":"text","text":"Error: unknown tool \"x\""}],"isError":true,"error":{"name":"ToolNotFoundError","code":"UNKNOWN_TOOL"}}`,
		`tool/result {"turn":1,"step":1,"callId":"n","content":[{"type":"text","text":"echo: [1]"}],"isError":false}`,
	})
}

// Point 9: no model after the agent/request waterfall fails the turn with
// an error naming the config key (agent-loop/src/loop.ts runStep: "has
// no model: set AgentOptions.model or supply one via the agent/request
// waterfall"). Before: "" was sent and the provider silently substituted
// deepseek-chat. After: turn/end error, no request.
func TestConformance09NoModel(t *testing.T) {
	noModel = true
	defer func() { noModel = false }()
	f := newFixture(t, Options{Provider: scripted(t, step(1, 1, textAnswer("hi")))})
	res := f.prompt(t, "go")
	if !errors.Is(res.Err, ErrNoModel) || len(f.prov.requests()) != 0 || !strings.Contains(res.Err.Error(), `set "model"`) {
		t.Fatalf("result = %+v", res)
	}
	expectLines(t, lines(f.sess.Events()), []string{turn1Start, userLine, step11Start, step11End,
		`turn/end {"turn":1,"reason":{"kind":"error","step":1,"message":` + js(res.Err.Error()) + `}}`})
}

// Point 10: a session that compacted replays event for event: the
// summary request carries the step it prepares and is answered from the
// recorded compact/summary, and the records carry the reference's fields
// (compact/compact-basic/src/index.ts compactRegion). Before: summary
// requests carried step 0 and could not be replayed.
func TestConformance10CompactionReplays(t *testing.T) {
	opts := CompactionOptions{ContextWindow: 1000, TriggerRatio: 0.5, RetainTokens: 300}
	run := func(prov model.Provider, sess *session.Session) *fixture {
		bus := events.New(discard)
		off, err := AttachCompaction(bus, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(off)
		f := newFixture(t, Options{Model: "m", Bus: bus, Provider: prov, Session: sess})
		for i := range 4 {
			if res := f.prompt(t, fmt.Sprintf("prompt %d %s", i, strings.Repeat("p", 400))); res.End.Kind != session.EndCompleted {
				t.Fatalf("turn %d = %+v", i+1, res)
			}
		}
		return f
	}
	live := run(&scriptedModel{argLen: 400, summary: "SUMMARY of the work."}, nil)
	rec := live.sess.Events()
	sums := ofType[session.CompactSummary](t, rec)
	if len(sums) == 0 {
		t.Fatal("no compaction")
	}
	for _, s := range sums {
		if s.ShadowedRange.Start != s.ShadowedSeqs[0] || s.ShadowedRange.End != s.ShadowedSeqs[len(s.ShadowedSeqs)-1] || s.ShadowedTokenCount <= 0 {
			t.Fatalf("compact/summary = %+v", s)
		}
	}
	if err := live.sess.Flush(); err != nil {
		t.Fatal(err)
	}
	prov, err := replay.Open(live.sess.Path(), replay.Options{NoOverrideFile: true, NoChildFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	h := live.sess.Header()
	again := run(prov, newSession(t, newStore(t), session.Header{ID: h.ID, Cwd: h.Cwd}))
	got := again.sess.Events()
	// Compaction ids are random: compare everything else.
	strip := func(evs []session.Event) []session.Event {
		out := slices.Clone(evs)
		for i, e := range out {
			if strings.HasPrefix(e.Type, "compact/") {
				var m map[string]any
				json.Unmarshal(e.Data, &m)
				delete(m, "compactionId")
				out[i].Data, _ = json.Marshal(m)
			}
		}
		return out
	}
	compareSessions(t, strip(got), strip(rec))
}

// Point 11: a reference session's context/message and steering/message
// are in the derived messages, tagged, as the reference sends them
// (session/src/index.ts deriveMessages, renderTagged). Before: they were
// dropped, and hook-cc-stop-continue derived two assistant messages back
// to back. After: the steering message between them.
func TestConformance11SteeringInDerivedMessages(t *testing.T) {
	path := filepath.Join(testcorpus.Dir(t), "hook-sessions", "hook-cc-stop-continue", "session.jsonl")
	log, err := session.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := session.Messages(log.Events)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		var texts []string
		for _, p := range m.Content {
			if p.Type == model.BlockText {
				texts = append(texts, p.Text)
			}
		}
		got = append(got, m.Role+": "+strings.Join(texts, ""))
	}
	want := []string{
		"user: Reply with the single word FIRST and stop.",
		"assistant: FIRST",
		`user: <steering source="plugin">Also reply with the single word SECOND, then stop.</steering>`,
		"assistant: SECOND",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("derived messages:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// Point 12: the DeepSeek request body of the tool-call-turn scenario's
// second step, made by the loop and the DeepSeek provider, equals the
// reference's serialisation byte for byte (llm-deepseek/src/serialize.ts
// serializeRequest: key order, text joined with "", reasoning_content on
// the tool-call message, the tool message {role, tool_call_id, content}).
func TestConformance12RequestBodyGolden(t *testing.T) {
	dir := filepath.Join(testcorpus.Dir(t), "sessions", "tool-call-turn")
	rec, err := session.ReadFile(filepath.Join(dir, "session.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	am := ofType[session.AssistantMessage](t, rec.Events)[0]
	var reasoning string
	var tc model.Part
	for _, p := range am.Content {
		switch p.Type {
		case model.BlockReasoning:
			reasoning = p.Text
		case model.BlockToolCall:
			tc = p
		}
	}
	user := ofType[session.UserMessage](t, rec.Events)[0].Content.Text()
	result := ofType[session.ToolResult](t, rec.Events)[0]

	sse := func(w http.ResponseWriter, payloads ...string) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, p := range payloads {
			fmt.Fprintf(w, "data: %s\n\n", p)
		}
	}
	var mu sync.Mutex
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		b.ReadFrom(r.Body)
		mu.Lock()
		bodies = append(bodies, b.Bytes())
		n := len(bodies)
		mu.Unlock()
		if n == 1 {
			call, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{
				"tool_calls": []any{map[string]any{"index": 0, "id": tc.ID, "type": "function",
					"function": map[string]any{"name": tc.Name, "arguments": tc.Arguments}}}}}}})
			think, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"reasoning_content": reasoning}}}})
			sse(w, string(think), string(call), `{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`, "[DONE]")
			return
		}
		sse(w, `{"choices":[{"index":0,"delta":{"content":"DONE"},"finish_reason":"stop"}]}`, "[DONE]")
	}))
	defer srv.Close()
	prov, err := deepseek.New(deepseek.Options{BaseURL: srv.URL, Thinking: deepseek.ThinkingEnabled,
		LookupEnv: func(string) (string, bool) { return "key", true }})
	if err != nil {
		t.Fatal(err)
	}
	tools := &recordedTools{t: t, calls: ofType[session.ToolCall](t, rec.Events),
		results: map[string]session.ToolResult{result.CallID: result}}
	f := newFixture(t, Options{Model: "deepseek-v4-flash", Registry: newRegistry(t, testPersona, "bash"), Tools: tools, Provider: prov})
	if err := f.Enqueue(session.UserMessage{Content: session.TextContent(user)}); err != nil {
		t.Fatal(err)
	}
	if res, err := f.RunTurn(context.Background()); err != nil || res.Text != "DONE" {
		t.Fatalf("turn = %+v, %v", res, err)
	}
	system := f.prov.requests()[1].System
	want := `{"model":"deepseek-v4-flash","messages":[` +
		`{"role":"system","content":` + js(system) + `},` +
		`{"role":"user","content":` + js(user) + `},` +
		`{"role":"assistant","content":"","reasoning_content":` + js(reasoning) +
		`,"tool_calls":[{"id":` + js(tc.ID) + `,"type":"function","function":{"name":"bash","arguments":` + js(tc.Arguments) + `}}]},` +
		`{"role":"tool","tool_call_id":` + js(tc.ID) + `,"content":` + js(result.Content.Text()) + `}],` +
		`"stream":true,"stream_options":{"include_usage":true},"thinking":{"type":"enabled"},` +
		`"tools":[{"type":"function","function":{"name":"bash","description":"test tool bash","parameters":{"type":"object"}}}]}`
	if len(bodies) != 2 || string(bodies[1]) != want {
		t.Fatalf("step 2 request body:\n%s\nwant:\n%s", bodies[len(bodies)-1], want)
	}
}

// Point 13 is TestCrashMidTurn (crash_test.go): events are durable at the
// user message, at the assistant message before its tools run, at step
// end and at turn end.

// Point 14: Cancel is truthful. 1,000 cancels at random moments, many of
// them from the loop's own goroutine as the turn records its last events:
// whenever Cancel returned true, the turn ended aborted. Before: in the
// window after turn/end was recorded and before the turn's cancel
// function was cleared, Cancel returned true and the turn still ended
// completed.
func TestConformance14CancelIsTruthful(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 turns")
	}
	prov := model.ProviderFunc(func(ctx context.Context, req *model.Request, emit func(model.Chunk) error) error {
		for _, c := range textAnswer("hi") {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := emit(c); err != nil {
				return err
			}
		}
		return nil
	})
	var onEvent atomic.Pointer[func(session.Event)]
	f := newFixture(t, Options{Provider: prov, OnEvent: func(e session.Event) {
		if fn := onEvent.Load(); fn != nil {
			(*fn)(e)
		}
	}})
	rng := rand.New(rand.NewPCG(12, 1))
	var trueCount, falseCount, lies int
	for i := range 1000 {
		var said atomic.Bool
		var sent atomic.Bool
		cancel := func() {
			if !sent.Swap(true) && f.Cancel("race") {
				said.Store(true)
			}
		}
		var wg sync.WaitGroup
		if i%2 == 0 {
			// From the loop's goroutine, as the turn records one of its
			// last events: after turn/end Cancel must say false.
			at := []string{session.TypeAssistantMessage, session.TypeStepEnd, session.TypeTurnEnd}[rng.IntN(3)]
			fn := func(e session.Event) {
				if e.Type == at {
					cancel()
				}
			}
			onEvent.Store(&fn)
		} else {
			onEvent.Store(nil)
			delay := time.Duration(rng.IntN(400)) * time.Microsecond
			wg.Go(func() {
				time.Sleep(delay)
				cancel()
			})
		}
		res, err := f.Prompt(context.Background(), "go")
		wg.Wait()
		onEvent.Store(nil)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case said.Load():
			trueCount++
			if res.End.Kind != session.EndAborted {
				lies++
			}
		case sent.Load():
			falseCount++
		}
	}
	t.Logf("Cancel returned true %d times and false %d times of 1000", trueCount, falseCount)
	if lies > 0 {
		t.Fatalf("Cancel returned true and the turn did not end aborted %d times", lies)
	}
	if trueCount == 0 || falseCount == 0 {
		t.Fatalf("Cancel returned true %d times: the cancels did not land at random moments", trueCount)
	}
}

// Point 15, kept ours: the step cap. Off by default, as in the reference
// (no cap in agent-loop/src/loop.ts); when set, a turn that reaches it
// ends {kind:"max-tokens"}, a kind the reference's readers accept
// (session/src/types.ts; ACP maps it to max_tokens).
func TestConformance15StepCap(t *testing.T) {
	loop := func(turn, n int) []replay.Step {
		var s []replay.Step
		for i := 1; i <= n; i++ {
			s = append(s, step(turn, i, callAnswer(call{fmt.Sprintf("c%d", i), "echo", `{}`})))
		}
		return append(s, step(turn, n+1, textAnswer("done")))
	}
	f := newFixture(t, Options{Provider: scripted(t, loop(1, 120)...)})
	if res := f.prompt(t, "go"); res.End.Kind != session.EndCompleted || res.Steps != 121 {
		t.Fatalf("no cap: %+v", res)
	}
	f = newFixture(t, Options{MaxSteps: 3, Provider: scripted(t, loop(1, 5)...)})
	res := f.prompt(t, "go")
	lns := lines(f.sess.Events())
	expectLines(t, lns[len(lns)-1:], []string{`turn/end {"turn":1,"reason":{"kind":"max-tokens"}}`})
	if res.Steps != 3 || !errors.Is(res.Err, ErrStepCap) {
		t.Fatalf("cap: %+v", res)
	}
}
