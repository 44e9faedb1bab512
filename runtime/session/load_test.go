package session

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/runtime/model"
)

// memLog builds the text of a session file in memory, as a writer would.
type memLog struct {
	t   testing.TB
	st  state
	buf bytes.Buffer
}

func newMemLog(t testing.TB, h Header) *memLog {
	t.Helper()
	m := &memLog{t: t}
	b, err := h.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	m.buf.Write(append(b, '\n'))
	m.st.header = h
	return m
}

func (m *memLog) emit(e Event) Event {
	m.t.Helper()
	e.Seq, e.Time = int64(len(m.st.events)), 1000+int64(len(m.st.events))
	err := normalize(&e)
	var line []byte
	if err == nil {
		line, err = encodeLine(&e)
	}
	if err == nil {
		err = m.st.add(e)
	}
	if err != nil {
		m.t.Fatalf("emit %s: %v", e.Type, err)
	}
	m.buf.Write(line)
	return e
}

func (m *memLog) String() string { return m.buf.String() }

var testHeader = Header{ID: "s1", CreatedAt: 5, Cwd: "/home/u/ws"}

// A session cut off after a tool call: two complete turns, then a third
// that called a tool and got no result.
func crashedLog(t *testing.T) (*memLog, Event) {
	m := newMemLog(t, testHeader)
	script(1, false, m.emit)
	script(2, true, m.emit)
	m.emit(NewEvent(TurnStart{Turn: 3, Trigger: &Trigger{Kind: TriggerMessage, Source: &Source{Kind: SourceUser}}}))
	m.emit(NewEvent(UserMessage{Content: TextContent("third"), Source: Source{Kind: SourceUser}}))
	call := scriptToolCall(3, 1, m.emit)
	return m, call
}

func TestReadFileRepairsUnclosedTurn(t *testing.T) {
	m, call := crashedLog(t)
	n := len(m.st.events)
	log, err := ReadFile(writeFile(t, m.String()))
	if err != nil {
		t.Fatal(err)
	}
	rec := log.Recovery
	if !rec.Repaired() || rec.TornLine != 0 || rec.AddedNewline {
		t.Fatalf("recovery %+v", rec)
	}
	if got, want := eventTypes(rec.Closed), []string{TypeToolResult, TypeStepEnd, TypeTurnEnd}; !slices.Equal(got, want) {
		t.Fatalf("closing events %v, want %v", got, want)
	}
	if len(log.Events) != n+3 {
		t.Fatalf("%d events, want %d", len(log.Events), n+3)
	}
	for i, e := range rec.Closed {
		if e.Seq != int64(n+i) {
			t.Errorf("closing event %d has seq %d, want %d", i, e.Seq, n+i)
		}
	}
	// The reference's closer, byte for byte (session/src/repair.ts), at
	// the time of the last real event.
	want := `{"turn":3,"step":1,"callId":"` + callID(3, 1) + `","content":[{"type":"text","text":"Tool call interrupted by a crash; no result was recorded."}],"isError":true,"error":{"name":"InterruptedError","code":"interrupted"}}`
	if string(rec.Closed[0].Data) != want {
		t.Errorf("tool result %s\nwant %s", rec.Closed[0].Data, want)
	}
	for _, e := range rec.Closed {
		if e.Time != m.st.events[n-1].Time {
			t.Errorf("closer %s at time %d, want the last event's %d", e.Type, e.Time, m.st.events[n-1].Time)
		}
	}
	if !slices.Equal(rec.Closed[0].SourceEventSeqs, []int64{call.Seq}) {
		t.Errorf("tool result sources %v, want [%d]", rec.Closed[0].SourceEventSeqs, call.Seq)
	}
	if se, _ := As[StepEnd](rec.Closed[1]); se.Turn != 3 || se.Step != 1 {
		t.Errorf("step end %+v", se)
	}
	te, _ := As[TurnEnd](rec.Closed[2])
	if te.Turn != 3 || te.Reason.Kind != EndInterrupted {
		t.Errorf("turn end %+v", te)
	}
	if !strings.Contains(rec.String(), "closed turn 3 as interrupted (1 unanswered") {
		t.Errorf("recovery string %q", rec.String())
	}

	// The conversation stays valid: the call is answered.
	msgs, err := Messages(log.Events)
	if err != nil {
		t.Fatal(err)
	}
	last := msgs[len(msgs)-1]
	if last.Role != model.RoleTool || last.ToolCallID != callID(3, 1) || !last.IsError {
		t.Errorf("last message %+v", last)
	}
}

func TestReadFileClosesTurnWithoutStep(t *testing.T) {
	m := newMemLog(t, testHeader)
	script(1, false, m.emit)
	m.emit(NewEvent(TurnStart{Turn: 2}))
	log, err := ReadFile(writeFile(t, m.String()))
	if err != nil {
		t.Fatal(err)
	}
	if got := eventTypes(log.Recovery.Closed); !slices.Equal(got, []string{TypeTurnEnd}) {
		t.Fatalf("closing events %v", got)
	}
}

func TestCorruptFiles(t *testing.T) {
	m := newMemLog(t, testHeader)
	script(1, false, m.emit)
	lines := strings.SplitAfter(m.String(), "\n")
	good := strings.Join(lines, "")
	replaceLine := func(i int, s string) string {
		l := slices.Clone(lines)
		l[i] = s + "\n"
		return strings.Join(l, "")
	}
	for _, tc := range []struct {
		name    string
		content string
		line    int
		want    string
	}{
		{"empty", "", 0, "no header"},
		{"malformed middle line", replaceLine(3, `{"type":"step/start",`), 4, ""},
		{"blank before header", "\n" + good, 1, "blank line"},
		{"torn header", `{"type":"session","vers`, 1, "torn header"},
		{"not a header", replaceLine(0, `{"type":"turn/start","seq":0,"time":0,"data":{}}`), 1, "header type"},
		{"seq gap", replaceLine(3, strings.Replace(strings.TrimSuffix(lines[3], "\n"), `"seq":2`, `"seq":7`, 1)), 4, "seq 7, want 2"},
		{"missing data", replaceLine(2, `{"type":"x","seq":1,"time":0}`), 3, `no "data"`},
		{"duplicate key", replaceLine(2, `{"type":"x","seq":1,"seq":1,"time":0,"data":{}}`), 3, "duplicate key"},
		{"bad message data", replaceLine(2, `{"type":"user/message","seq":1,"time":0,"data":{"content":"hi"},"surfaceOp":"append"}`), 3, ""},
		{"tool call without id", replaceLine(2, `{"type":"tool/call","seq":1,"time":0,"data":{"name":"x","arguments":"{}"}}`), 3, "no callId"},
		{"surface op on a boundary", replaceLine(2, `{"type":"step/start","seq":1,"time":0,"data":{"turn":1,"step":1},"surfaceOp":"append"}`), 3, "only messages"},
		{"unknown surface op", replaceLine(2, `{"type":"x","seq":1,"time":0,"data":{},"surfaceOp":"prepend"}`), 3, "unknown surface op"},
		{"replace off the surface", replaceLine(2, `{"type":"user/message","seq":1,"time":0,"data":{"content":[],"source":{"kind":"user"}},"surfaceOp":{"op":"replace","start":0,"end":0}}`), 3, "not on the surface"},
		{"source not earlier", replaceLine(2, `{"type":"x","seq":1,"time":0,"data":{},"sourceEventSeqs":[1]}`), 3, "not an earlier event"},
		{"seed too long", replaceLine(0, `{"type":"session","version":0,"id":"s1","createdAt":5,"seedLength":99}`), 1, "seedLength 99"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.content)
			_, err := ReadFile(path)
			var ce *CorruptError
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a CorruptError", err)
			}
			if ce.Line != tc.line || ce.Path != path {
				t.Errorf("error names %s:%d, want line %d", ce.Path, ce.Line, tc.line)
			}
			if tc.line > 0 && !strings.Contains(err.Error(), fmt.Sprintf("%s:%d: ", path, tc.line)) {
				t.Errorf("message %q does not name file:line", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("message %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestUnsupportedVersion(t *testing.T) {
	_, err := ReadFile(writeFile(t, `{"type":"session","version":1,"id":"s","createdAt":0}`+"\n"))
	if !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("err = %v", err)
	}
}

func TestSurfaceOpForms(t *testing.T) {
	for _, tc := range []struct {
		in, out string
		want    SurfaceOp
	}{
		{`"append"`, `"append"`, SurfaceOp{Op: SurfaceAppend}},
		{`{"op":"append"}`, `"append"`, SurfaceOp{Op: SurfaceAppend}},
		{`"replace"`, `"replace"`, SurfaceOp{Op: SurfaceReplace}},
		{`{"op":"replace","start":3,"end":9}`, `{"op":"replace","start":3,"end":9}`, SurfaceOp{Op: SurfaceReplace, Range: &SurfaceRange{3, 9}}},
		{`{"op":"replace","startSeq":3,"endSeq":9}`, `{"op":"replace","start":3,"end":9}`, SurfaceOp{Op: SurfaceReplace, Range: &SurfaceRange{3, 9}}},
	} {
		var op SurfaceOp
		if err := op.UnmarshalJSON([]byte(tc.in)); err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if op.Op != tc.want.Op || (op.Range == nil) != (tc.want.Range == nil) || (op.Range != nil && *op.Range != *tc.want.Range) {
			t.Errorf("%s: got %+v", tc.in, op)
		}
		if b, _ := op.MarshalJSON(); string(b) != tc.out {
			t.Errorf("%s: re-encoded %s, want %s", tc.in, b, tc.out)
		}
	}
	for _, bad := range []string{`"prepend"`, `{"op":"replace","start":1}`, `{"op":"append","start":1,"end":2}`, `3`, `{"op":"x"}`} {
		var op SurfaceOp
		if err := op.UnmarshalJSON([]byte(bad)); err == nil {
			t.Errorf("%s: accepted as %+v", bad, op)
		}
	}
}

// Surface semantics: append adds, a ranged replace swaps a run for one
// message, a bare replace swaps everything before it, and events without
// a surface op are not seen.
func TestMessagesSurfaceOps(t *testing.T) {
	m := newMemLog(t, testHeader)
	user := func(text string) Event {
		return m.emit(NewEvent(UserMessage{Content: TextContent(text), Source: Source{Kind: SourceUser}}))
	}
	a := user("a")
	user("b")
	c := user("c")
	hidden := NewEvent(UserMessage{Content: TextContent("hidden"), Source: Source{Kind: SourceUser}})
	hidden.SurfaceOp = nil
	m.emit(hidden)
	user("d")
	// An assistant message with no content (a step cut off) is left out.
	m.emit(NewEvent(AssistantMessage{Turn: 1, Step: 1}))
	texts := func() string {
		msgs, err := Messages(m.st.events)
		if err != nil {
			t.Fatal(err)
		}
		var ts []string
		for _, msg := range msgs {
			ts = append(ts, msg.Content[0].Text)
		}
		if want := m.st.surf.messages(); !slices.EqualFunc(msgs, want, func(x, y model.Message) bool {
			return x.Content[0].Text == y.Content[0].Text
		}) {
			t.Errorf("Messages and the incremental surface disagree")
		}
		return strings.Join(ts, ",")
	}
	if got := texts(); got != "a,b,c,d" {
		t.Fatalf("got %s", got)
	}
	r := NewEvent(UserMessage{Content: TextContent("S1"), Source: Source{Kind: SourcePlugin, Plugin: "compaction"}})
	r.SurfaceOp = &SurfaceOp{Op: SurfaceReplace, Range: &SurfaceRange{Start: a.Seq, End: c.Seq}}
	s1 := m.emit(r)
	if got := texts(); got != "S1,d" {
		t.Fatalf("after ranged replace: %s", got)
	}
	// The replaced events are off the surface: a range naming one fails.
	bad := r
	bad.SurfaceOp = &SurfaceOp{Op: SurfaceReplace, Range: &SurfaceRange{Start: a.Seq, End: a.Seq}}
	bad.Seq = int64(len(m.st.events))
	if err := m.st.add(bad); err == nil {
		t.Fatal("replace of a replaced event accepted")
	}
	// A replace can name the summary it produced.
	r2 := r
	r2.Data = NewEvent(UserMessage{Content: TextContent("S2"), Source: Source{Kind: SourceUser}}).Data
	r2.SurfaceOp = &SurfaceOp{Op: SurfaceReplace, Range: &SurfaceRange{Start: s1.Seq, End: s1.Seq}}
	m.emit(r2)
	if got := texts(); got != "S2,d" {
		t.Fatalf("after second replace: %s", got)
	}
	user("e")
	whole := r
	whole.Data = NewEvent(UserMessage{Content: TextContent("ALL"), Source: Source{Kind: SourceUser}}).Data
	whole.SurfaceOp = &SurfaceOp{Op: SurfaceReplace}
	m.emit(whole)
	user("f")
	if got := texts(); got != "ALL,f" {
		t.Fatalf("after bare replace: %s", got)
	}
}
