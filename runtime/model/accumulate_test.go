package model

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func start(i int, typ string) Chunk { return Chunk{Type: ChunkBlockStart, Index: i, BlockType: typ} }
func reasoning(i int, s string) Chunk {
	return Chunk{Type: ChunkReasoningDelta, Index: i, Text: s}
}
func text(i int, s string) Chunk { return Chunk{Type: ChunkTextDelta, Index: i, Text: s} }
func call(i int, id, name, args string) Chunk {
	return Chunk{Type: ChunkToolCallDelta, Index: i, ID: id, Name: name, ArgumentsDelta: args}
}
func end(i int, p *Part) Chunk { return Chunk{Type: ChunkBlockEnd, Index: i, Block: p} }
func finish(kind string) Chunk {
	return Chunk{Type: ChunkFinish, Reason: &FinishReason{Kind: kind}}
}

func addAll(t *testing.T, a *Accumulator, chunks ...Chunk) {
	t.Helper()
	for i, c := range chunks {
		if err := a.Add(c); err != nil {
			t.Fatalf("Add(chunk %d %s): %v", i, c.Type, err)
		}
	}
}

func TestAccumulatorBuildsMessage(t *testing.T) {
	var a Accumulator
	usage := Usage{InputTokens: 10, OutputTokens: 20, CacheReadTokens: 30, ReasoningTokens: 5}
	addAll(t, &a,
		start(0, BlockReasoning), reasoning(0, "think"), reasoning(0, "ing"),
		start(1, BlockText), text(1, "Hel"), text(1, "lo"),
		start(2, BlockToolCall), call(2, "c1", "bash", ""), call(2, "", "", `{"command":`),
		start(3, BlockToolCall), call(3, "c2", "read", `{"file_path":"a"}`),
		call(2, "c1", "bash", `"ls"}`), // repeating id and name is allowed
		end(0, &Part{Type: BlockReasoning, Text: "thinking"}),
		end(1, nil),
		end(2, &Part{Type: BlockToolCall, ID: "c1", Name: "bash", Arguments: `{"command":"ls"}`}),
		end(3, nil),
		Chunk{Type: ChunkUsage, Usage: &usage},
		finish(FinishToolCalls),
	)
	if err := a.Complete(); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	want := []Part{
		{Type: BlockReasoning, Text: "thinking"},
		{Type: BlockText, Text: "Hello"},
		{Type: BlockToolCall, ID: "c1", Name: "bash", Arguments: `{"command":"ls"}`},
		{Type: BlockToolCall, ID: "c2", Name: "read", Arguments: `{"file_path":"a"}`},
	}
	msg := a.Message()
	if msg.Role != RoleAssistant || !reflect.DeepEqual(msg.Content, want) {
		t.Fatalf("Message = %+v, want assistant %+v", msg, want)
	}
	if got := a.ToolCalls(); !reflect.DeepEqual(got, want[2:]) {
		t.Fatalf("ToolCalls = %+v", got)
	}
	if u, ok := a.Usage(); !ok || u != usage {
		t.Fatalf("Usage = %+v, %v", u, ok)
	}
	if r, ok := a.FinishReason(); !ok || r.Kind != FinishToolCalls || !a.Finished() {
		t.Fatalf("FinishReason = %+v, %v", r, ok)
	}
}

func TestAccumulatorCutStream(t *testing.T) {
	var a Accumulator
	addAll(t, &a, start(0, BlockText), text(0, "partial"))
	err := a.Complete()
	if !errors.Is(err, ErrStreamCut) {
		t.Fatalf("Complete = %v, want ErrStreamCut", err)
	}
	if !strings.Contains(err.Error(), "1 still open") {
		t.Errorf("error %q does not say a block is open", err)
	}
	if got := a.Parts(); len(got) != 1 || got[0].Text != "partial" {
		t.Fatalf("partial Parts = %+v", got)
	}
	if _, ok := a.Usage(); ok {
		t.Fatal("Usage reported without a usage chunk")
	}
	if _, ok := a.FinishReason(); ok || a.Finished() {
		t.Fatal("FinishReason reported without a finish chunk")
	}
	var empty Accumulator
	if err := empty.Complete(); !errors.Is(err, ErrStreamCut) {
		t.Fatalf("empty Complete = %v, want ErrStreamCut", err)
	}
}

func TestAccumulatorRejectsBadSequences(t *testing.T) {
	tests := []struct {
		name   string
		chunks []Chunk
		detail string
	}{
		{"delta for unopened block", []Chunk{text(0, "x")}, "delta for unopened block 0"},
		{"negative index", []Chunk{reasoning(-1, "x")}, "delta for unopened block -1"},
		{"index gap", []Chunk{start(1, BlockText)}, "want next index 0"},
		{"started twice", []Chunk{start(0, BlockText), start(0, BlockText)}, "block 0 started twice"},
		{"unknown block type", []Chunk{start(0, "image")}, `unknown block type "image"`},
		{"wrong delta type", []Chunk{start(0, BlockReasoning), text(0, "x")}, "text delta for reasoning block 0"},
		{"delta after end", []Chunk{start(0, BlockText), end(0, nil), text(0, "x")}, "delta for ended block 0"},
		{"end twice", []Chunk{start(0, BlockText), end(0, nil), end(0, nil)}, "block 0 ended twice"},
		{"end unopened", []Chunk{end(2, nil)}, "end of unopened block 2"},
		{"tool call without id", []Chunk{start(0, BlockToolCall), call(0, "", "bash", "{}")}, "lacks its id or name"},
		{"tool call renamed", []Chunk{start(0, BlockToolCall), call(0, "a", "bash", ""), call(0, "a", "read", "")}, `changed name from "bash" to "read"`},
		{"tool call new id", []Chunk{start(0, BlockToolCall), call(0, "a", "bash", ""), call(0, "b", "", "")}, `changed id from "a" to "b"`},
		{"tool call ended unnamed", []Chunk{start(0, BlockToolCall), end(0, nil)}, "ended without an id and name"},
		{"block-end disagrees", []Chunk{start(0, BlockText), text(0, "a"), end(0, &Part{Type: BlockText, Text: "b"})}, "but the deltas built"},
		{"finish with open block", []Chunk{start(0, BlockText), finish(FinishStop)}, "block 0 is still open"},
		{"chunk after finish", []Chunk{finish(FinishStop), {Type: ChunkUsage, Usage: &Usage{}}}, "chunk after finish"},
		{"finish without reason", []Chunk{{Type: ChunkFinish}}, "without a reason"},
		{"unknown finish reason", []Chunk{finish("length")}, `unknown finish reason "length"`},
		{"usage without usage", []Chunk{{Type: ChunkUsage}}, "usage chunk without usage"},
		{"unknown chunk", []Chunk{{Type: "ping"}}, `unknown chunk type "ping"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a Accumulator
			var err error
			for _, c := range tt.chunks {
				if err = a.Add(c); err != nil {
					break
				}
			}
			if !errors.Is(err, ErrMalformedStream) {
				t.Fatalf("Add error = %v, want ErrMalformedStream", err)
			}
			if !strings.Contains(err.Error(), tt.detail) {
				t.Fatalf("error %q lacks %q", err, tt.detail)
			}
			// The error is sticky.
			if again := a.Add(finish(FinishStop)); again != err {
				t.Fatalf("later Add = %v, want the first error", again)
			}
			if a.Err() != err || a.Complete() != err {
				t.Fatalf("Err/Complete do not report the violation")
			}
		})
	}
}

func TestAccumulatorLaterUsageReplaces(t *testing.T) {
	var a Accumulator
	addAll(t, &a,
		Chunk{Type: ChunkUsage, Usage: &Usage{OutputTokens: 1}},
		Chunk{Type: ChunkUsage, Usage: &Usage{OutputTokens: 2}},
		Chunk{Type: ChunkFinish, Reason: &FinishReason{Kind: FinishError, Message: "model stopped: odd", Code: "ODD"}},
	)
	if u, _ := a.Usage(); u.OutputTokens != 2 {
		t.Fatalf("Usage = %+v, want the later one", u)
	}
	if r, _ := a.FinishReason(); r != (FinishReason{Kind: FinishError, Message: "model stopped: odd", Code: "ODD"}) {
		t.Fatalf("FinishReason = %+v", r)
	}
	if len(a.Parts()) != 0 || len(a.ToolCalls()) != 0 {
		t.Fatal("empty answer has parts")
	}
}

func TestAccumulatorInterleavedBlocks(t *testing.T) {
	// Deltas to early blocks keep arriving while later blocks open.
	var a Accumulator
	const n = 9
	for i := 0; i < n; i++ {
		addAll(t, &a, start(i, BlockToolCall), call(i, string(rune('a'+i)), "tool", "{"))
		for j := 0; j <= i; j++ {
			addAll(t, &a, call(j, "", "", "x"))
		}
	}
	for i := 0; i < n; i++ {
		addAll(t, &a, call(i, "", "", "}"), end(i, nil))
	}
	addAll(t, &a, finish(FinishToolCalls))
	calls := a.ToolCalls()
	if len(calls) != n {
		t.Fatalf("%d calls, want %d", len(calls), n)
	}
	for i, c := range calls {
		if want := "{" + strings.Repeat("x", n-i) + "}"; c.Arguments != want || c.ID != string(rune('a'+i)) {
			t.Errorf("call %d = %+v, want arguments %q", i, c, want)
		}
	}
}

// The Accumulator's errors start with the package's name, once.
func TestAccumulatorErrorPrefix(t *testing.T) {
	var acc Accumulator
	err := acc.Complete()
	if err == nil || err.Error() != "model: model stream ended before it finished: no finish chunk after 0 chunks (0 blocks, 0 still open)" {
		t.Errorf("Complete = %v", err)
	}
	err = acc.Add(Chunk{Type: ChunkTextDelta, Index: 3, Text: "x"})
	if err == nil || !strings.HasPrefix(err.Error(), "model: malformed model stream: chunk 0 (") {
		t.Errorf("Add = %v", err)
	}
}
