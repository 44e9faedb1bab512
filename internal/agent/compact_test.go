package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// scriptedModel answers steps by the conversation's shape: after a user
// message it calls echo with a long argument, after a tool result it
// answers text. A compaction request (Meta.Purpose compaction) gets summary. Answers
// report usage only when usage is set.
type scriptedModel struct {
	argLen  int
	usage   *model.Usage // reported with every step answer, if set
	summary string
	failSum error

	mu        sync.Mutex
	summaries []model.Request
}

func (m *scriptedModel) Generate(ctx context.Context, req *model.Request, emit func(model.Chunk) error) error {
	var chunks []model.Chunk
	switch {
	case req.Meta.Purpose == model.PurposeCompaction:
		m.mu.Lock()
		m.summaries = append(m.summaries, *req)
		m.mu.Unlock()
		if m.failSum != nil {
			return m.failSum
		}
		chunks = textAnswer(m.summary)
	case req.Messages[len(req.Messages)-1].Role == model.RoleTool:
		chunks = textAnswer("ok")
	default:
		id := fmt.Sprintf("call-%d-%d", req.Meta.Turn, req.Meta.Step)
		chunks = callAnswer(call{id, "echo", `{"text":"` + strings.Repeat("a", m.argLen) + `"}`})
	}
	for _, c := range chunks {
		if c.Type == model.ChunkUsage {
			if m.usage == nil || req.Meta.Purpose == model.PurposeCompaction {
				continue // no usage: compaction estimates from the text
			}
			u := *m.usage
			c.Usage = &u
		}
		if err := emit(c); err != nil {
			return err
		}
	}
	return nil
}

// checkPairs checks that every tool message of a request answers a tool
// call of an earlier assistant message, and every call is answered.
func checkPairs(t *testing.T, req model.Request) {
	t.Helper()
	open := map[string]bool{}
	for _, m := range req.Messages {
		switch m.Role {
		case model.RoleAssistant:
			for _, p := range m.Content {
				if p.Type == model.BlockToolCall {
					open[p.ID] = true
				}
			}
		case model.RoleTool:
			if !open[m.ToolCallID] {
				t.Fatalf("turn %d step %d: tool result %s without its call", req.Meta.Turn, req.Meta.Step, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
		}
	}
	if len(open) > 0 {
		t.Fatalf("turn %d step %d: calls without results: %v", req.Meta.Turn, req.Meta.Step, open)
	}
}

func requestChars(req model.Request) int {
	n := len(req.System)
	for _, m := range req.Messages {
		n += messageChars(m)
	}
	return n
}

func TestCompactionSummarisesOlderSteps(t *testing.T) {
	opts := CompactionOptions{ContextWindow: 1000, TriggerRatio: 0.5, RetainTokens: 300}
	bus := events.New(discard)
	off, err := AttachCompaction(bus, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer off()
	var summaryReqs int
	bus.On(events.EventAgentRequest, "count", func(_ context.Context, p any) error {
		if p.(*model.Request).Meta.Purpose == model.PurposeCompaction {
			summaryReqs++
		}
		return nil
	})
	m := &scriptedModel{argLen: 400, summary: "SUMMARY: the user sent long prompts and echo ran."}
	var recorded []string
	f := newFixture(t, Options{Model: "m", Bus: bus, Provider: m, OnEvent: func(e session.Event) {
		if strings.HasPrefix(e.Type, "compact/") {
			recorded = append(recorded, e.Type)
		}
	}})
	for i := range 4 {
		if res := f.prompt(t, fmt.Sprintf("prompt %d %s", i, strings.Repeat("p", 400))); res.End.Kind != session.EndCompleted {
			t.Fatalf("turn %d = %+v", i+1, res)
		}
	}

	evs := f.sess.Events()
	starts := ofType[session.CompactStart](t, evs)
	if len(starts) == 0 {
		t.Fatal("no compaction")
	}
	if summaryReqs != len(starts) || len(m.summaries) != len(starts) {
		t.Fatalf("%d compactions, %d summary requests through agent/request, %d at the model", len(starts), summaryReqs, len(m.summaries))
	}
	if len(recorded) != 3*len(starts) {
		t.Fatalf("OnEvent saw %v", recorded)
	}
	// The compaction records: start, summary, the replacing message, end.
	for i, e := range evs {
		if e.Type != session.TypeCompactStart {
			continue
		}
		want := []string{session.TypeCompactStart, session.TypeCompactSummary, session.TypeUserMessage, session.TypeCompactEnd}
		for j, w := range want {
			if evs[i+j].Type != w {
				t.Fatalf("event %d = %s, want %s", i+j, evs[i+j].Type, w)
			}
		}
		if op := evs[i+2].SurfaceOp; op == nil || op.Op != session.SurfaceReplace || op.Range == nil {
			t.Fatalf("summary message surface op = %+v", op)
		}
	}
	first := m.summaries[0]
	if first.System != DefaultCompactionInstructions || first.Model != "m" ||
		!strings.Contains(first.Messages[0].Content[0].Text, "prompt 0 ppp") ||
		strings.Contains(first.Messages[0].Content[0].Text, "thinking about it") {
		t.Fatalf("summary request = %+v", first)
	}

	// Every request is a valid conversation, those after a compaction
	// open with the summary, and none reaches the trigger.
	trigger := int(opts.TriggerRatio * float64(opts.ContextWindow) * 4)
	compacted := 0
	for _, req := range f.prov.requests() {
		if req.Meta.Purpose == model.PurposeCompaction {
			continue // a summary request
		}
		checkPairs(t, req)
		if strings.Contains(req.Messages[0].Content[0].Text, "<compacted-summary>") {
			compacted++
			if !strings.Contains(req.Messages[0].Content[0].Text, m.summary) {
				t.Fatalf("summary message = %q", req.Messages[0].Content[0].Text)
			}
		}
		if n := requestChars(req); n >= trigger {
			t.Fatalf("turn %d step %d sent %d chars, over the trigger of %d", req.Meta.Turn, req.Meta.Step, n, trigger)
		}
	}
	t.Logf("%d compactions, %d requests carried a summary", len(starts), compacted)
	if compacted == 0 {
		t.Fatal("no request carried the summary")
	}
	msgs := f.sess.Messages()
	if msgs[0].Role != model.RoleUser || !strings.HasPrefix(msgs[0].Content[0].Text, "<compacted-summary>") {
		t.Fatalf("conversation opens with %+v", msgs[0])
	}
}

// Provider usage, when reported, is the estimate: a model that says its
// prompt was huge triggers compaction although the text is short, and the
// usage of calls before a compaction no longer counts.
func TestCompactionUsesProviderUsage(t *testing.T) {
	bus := events.New(discard)
	if _, err := AttachCompaction(bus, CompactionOptions{ContextWindow: 100_000, RetainTokens: 20}); err != nil {
		t.Fatal(err)
	}
	m := &scriptedModel{argLen: 10, summary: "short summary", usage: &model.Usage{InputTokens: 79_000, CacheReadTokens: 2_000, OutputTokens: 10}}
	f := newFixture(t, Options{Bus: bus, Provider: m})
	if res := f.prompt(t, strings.Repeat("hello ", 20)); res.End.Kind != session.EndCompleted {
		t.Fatalf("result = %+v", res)
	}
	// Step 1 has no usage yet; step 2 sees 81,010 tokens and compacts,
	// replacing the user message (30 tokens) and keeping the call step
	// (14 tokens) within the 20 retained.
	starts := ofType[session.CompactStart](t, f.sess.Events())
	if len(starts) != 1 || starts[0].Turn != 1 {
		t.Fatalf("compactions = %+v", starts)
	}
	sum := ofType[session.CompactSummary](t, f.sess.Events())[0]
	if len(sum.ShadowedSeqs) != 1 {
		t.Fatalf("shadowed %v, want the user message only", sum.ShadowedSeqs)
	}
	reqs := f.prov.requests()
	last := reqs[len(reqs)-1]
	checkPairs(t, last)
	if len(last.Messages) != 3 || last.Messages[1].Role != model.RoleAssistant || last.Messages[2].Role != model.RoleTool {
		t.Fatalf("step 2 messages = %+v", last.Messages)
	}
}

// The kept tail is made of whole steps: a cut never falls between an
// assistant message and the results of its tool calls.
func TestCompactionCutKeepsWholeSteps(t *testing.T) {
	sess := newSession(t, newStore(t), session.Header{})
	add := func(p session.Payload) {
		if _, err := sess.Append(session.NewEvent(p)); err != nil {
			t.Fatal(err)
		}
	}
	text := func(n int) session.Parts { return session.TextContent(strings.Repeat("x", n)) }
	add(session.TurnStart{Turn: 1})
	add(session.UserMessage{Content: text(40), Source: session.Source{Kind: session.SourceUser}}) // 10 tokens
	add(session.StepStart{Turn: 1, Step: 1})
	add(session.AssistantMessage{Turn: 1, Step: 1, Content: session.Parts{
		{Type: model.BlockToolCall, ID: "a", Name: "echo", Arguments: strings.Repeat("y", 36)}, // 40 chars: 10 tokens
		{Type: model.BlockToolCall, ID: "b", Name: "echo", Arguments: strings.Repeat("y", 36)}, // 10 tokens
	}})
	add(session.ToolCall{Turn: 1, Step: 1, CallID: "a", Name: "echo", Arguments: "{}"})
	add(session.ToolResult{Turn: 1, Step: 1, CallID: "a", Content: text(400)}) // 100 tokens
	add(session.ToolCall{Turn: 1, Step: 1, CallID: "b", Name: "echo", Arguments: "{}"})
	add(session.ToolResult{Turn: 1, Step: 1, CallID: "b", Content: text(40)}) // 10 tokens
	add(session.StepEnd{Turn: 1, Step: 1})
	add(session.StepStart{Turn: 1, Step: 2})
	add(session.AssistantMessage{Turn: 1, Step: 2, Content: session.Parts{
		{Type: model.BlockToolCall, ID: "c", Name: "echo", Arguments: strings.Repeat("y", 36)},
	}})
	add(session.ToolCall{Turn: 1, Step: 2, CallID: "c", Name: "echo", Arguments: "{}"})
	add(session.ToolResult{Turn: 1, Step: 2, CallID: "c", Content: text(40)}) // 10 tokens

	surface := sess.Surface() // user, asst(a,b), res a, res b, asst(c), res c
	for _, tc := range []struct {
		retain, cut int
	}{
		{0, 6},    // nothing fits: summarise all
		{19, 6},   // the last step is 20 tokens
		{20, 4},   // keep step 2
		{149, 4},  // step 1 is 130 tokens: it does not fit with step 2
		{150, 1},  // keep both steps, summarise the user message
		{160, 0},  // everything fits: nothing to do
		{1000, 0}, //
	} {
		c := &compactor{opts: CompactionOptions{RetainTokens: tc.retain}}
		got := c.cut(surface)
		if got != tc.cut {
			t.Errorf("retain %d: cut %d, want %d", tc.retain, got, tc.cut)
		}
		if got > 0 && got < len(surface) && surface[got].Type == session.TypeToolResult {
			t.Errorf("retain %d: the tail starts with a tool result", tc.retain)
		}
	}
}

// A failed compaction logs a warning, records compact/start and
// compact/end with the error, and the step goes on with the full history
// (compact/compact-basic/src/index.ts: the agent/pre-step listener and
// compactRegion's catch).
func TestCompactionFailureWarnsAndGoesOn(t *testing.T) {
	bus := events.New(discard)
	off, err := AttachCompaction(bus, CompactionOptions{ContextWindow: 10, TriggerRatio: 1, RetainTokens: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer off()
	m := &scriptedModel{argLen: 10, failSum: &model.APIError{Status: 500, Message: "summary refused"}}
	var logs strings.Builder
	f := newFixture(t, Options{Bus: bus, Provider: m, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	res := f.prompt(t, strings.Repeat("long ", 40))
	if res.End.Kind != session.EndCompleted || res.Steps != 2 {
		t.Fatalf("result = %+v", res)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "summary refused") {
		t.Fatalf("no warning logged:\n%s", logs.String())
	}
	evs := f.sess.Events()
	ends := ofType[session.CompactEnd](t, evs)
	if len(ends) == 0 || len(ofType[session.CompactSummary](t, evs)) != 0 {
		t.Fatalf("compaction records: %v", types(evs))
	}
	for _, e := range ends {
		if e.Turn != 1 || !strings.Contains(e.Error, "summary refused") {
			t.Fatalf("compact/end = %+v", e)
		}
	}
	// Each step's request carries the whole conversation, uncompacted.
	var steps []model.Request
	for _, r := range f.prov.requests() {
		if r.Meta.Purpose == "" {
			steps = append(steps, r)
		}
	}
	if len(steps) != 2 || len(steps[1].Messages) != 3 || !strings.HasPrefix(steps[1].Messages[0].Content[0].Text, "long long") {
		t.Fatalf("step requests = %+v", steps)
	}
	// The compaction's records come before the step they prepare.
	want := []string{"turn/start", "user/message", "compact/start", "compact/end", "step/start"}
	if got := types(evs)[:5]; !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
}

func TestCompactionOptions(t *testing.T) {
	// The YAML shape (compaction: in the deployment file) is decoded and
	// golden-tested in runtime/config; here only the Go options are judged.
	o := CompactionOptions{ContextWindow: 64000, TriggerRatio: 0.75, RetainTokens: 8000, Instructions: "Be brief."}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (CompactionOptions{ContextWindow: 100_000}).Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, bad := range []CompactionOptions{
		{},
		{ContextWindow: -5},
		{ContextWindow: 1000, TriggerRatio: 1.5},
		{ContextWindow: 1000, TriggerRatio: -0.1},
		{ContextWindow: 1000, RetainTokens: -1},
		{ContextWindow: 1000, TriggerRatio: 0.5, RetainTokens: 500},
	} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalidCompaction) {
			t.Errorf("%+v: Validate = %v", bad, err)
		}
		if _, err := AttachCompaction(events.New(discard), bad); !errors.Is(err, ErrInvalidCompaction) {
			t.Errorf("%+v: AttachCompaction = %v", bad, err)
		}
	}
}
