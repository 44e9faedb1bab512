package session

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/prereq"
	"github.com/dsh-wasm/dsh-wasm/internal/testcorpus"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
)

// Every corpus file loads, needs no repair, and each line re-encodes to
// the same bytes.
func TestCorpusLoadsAndReencodes(t *testing.T) {
	for _, path := range corpusFiles(t) {
		t.Run(relName(path), func(t *testing.T) {
			log, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if log.Recovery.Repaired() {
				t.Errorf("recovery on a clean file: %s", log.Recovery)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			lines := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
			if len(lines) != len(log.Events)+1 {
				t.Fatalf("%d lines but %d events", len(lines), len(log.Events))
			}
			h, err := log.Header.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(h, lines[0]) {
				t.Errorf("header re-encodes as\n%s\nwant\n%s", h, lines[0])
			}
			for i, e := range log.Events {
				b, err := e.MarshalJSON()
				if err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				if !jsonEqual(t, b, lines[i+1]) {
					t.Fatalf("event %d is not the same JSON:\n%s\nwant\n%s", i, b, lines[i+1])
				}
				if !bytes.Equal(b, lines[i+1]) {
					t.Errorf("event %d re-encodes as\n%s\nwant\n%s", i, b, lines[i+1])
				}
			}
		})
	}
}

// The typed payloads decode every corpus event of their type, and
// re-encoding one gives the recorded data: the constructors build the
// reference's shapes.
func TestCorpusPayloadShapes(t *testing.T) {
	seen := map[string]int{}
	for _, path := range corpusFiles(t) {
		log, err := ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range log.Events {
			var p Payload
			switch e.Type {
			case TypeTurnStart:
				p, err = As[TurnStart](e)
			case TypeUserMessage:
				p, err = As[UserMessage](e)
			case TypeStepStart:
				p, err = As[StepStart](e)
			case TypeAssistantChunk:
				p, err = As[AssistantChunk](e)
			case TypeAssistantMessage:
				p, err = As[AssistantMessage](e)
			case TypeToolCall:
				p, err = As[ToolCall](e)
			case TypeToolResult:
				p, err = As[ToolResult](e)
			case TypeStepEnd:
				p, err = As[StepEnd](e)
			case TypeTurnEnd:
				p, err = As[TurnEnd](e)
			case TypeContextMessage:
				p, err = As[ContextMessage](e)
			case TypeSteeringMessage:
				p, err = As[SteeringMessage](e)
			case TypePromptBlocked:
				p, err = As[PromptBlocked](e)
			case TypeHookInvoked:
				p, err = As[HookInvoked](e)
			case TypeHookResult:
				p, err = As[HookResult](e)
			default:
				t.Errorf("%s: unexpected event type %q in the corpus", path, e.Type)
				continue
			}
			if err != nil {
				t.Fatalf("%s: event %d: %v", path, e.Seq, err)
			}
			seen[e.Type]++
			built := NewEvent(p)
			if built.err != nil {
				t.Fatalf("%s: event %d: %v", path, e.Seq, built.err)
			}
			if e.Type == TypeAssistantChunk {
				// model.Chunk's own encoder escapes HTML characters.
				if !jsonEqual(t, built.Data, e.Data) {
					t.Errorf("%s: event %d re-encodes as\n%s\nwant\n%s", path, e.Seq, built.Data, e.Data)
				}
			} else if !bytes.Equal(built.Data, e.Data) {
				t.Errorf("%s: event %d re-encodes as\n%s\nwant\n%s", path, e.Seq, built.Data, e.Data)
			}
			if (built.SurfaceOp != nil) != (e.SurfaceOp != nil) {
				t.Errorf("%s: event %d: NewEvent surface op %v, recorded %v", path, e.Seq, built.SurfaceOp, e.SurfaceOp)
			}
		}
	}
	for _, typ := range []string{TypeTurnStart, TypeUserMessage, TypeStepStart, TypeAssistantChunk,
		TypeAssistantMessage, TypeToolCall, TypeToolResult, TypeStepEnd, TypeTurnEnd,
		TypeContextMessage, TypeSteeringMessage, TypePromptBlocked, TypeHookInvoked, TypeHookResult} {
		if seen[typ] == 0 {
			t.Errorf("no %s event checked", typ)
		}
	}
}

func TestCorpusMessages(t *testing.T) {
	byName := map[string]string{}
	for _, p := range corpusFiles(t) {
		byName[relName(p)] = p
	}
	load := func(name string) *Log {
		t.Helper()
		p, ok := byName[name]
		if !ok {
			prereq.Missing(t, "corpus file %s missing", name)
		}
		log, err := ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return log
	}
	messages := func(log *Log) []model.Message {
		t.Helper()
		msgs, err := Messages(log.Events)
		if err != nil {
			t.Fatal(err)
		}
		return msgs
	}
	roles := func(msgs []model.Message) string {
		var rs []string
		for _, m := range msgs {
			rs = append(rs, m.Role)
		}
		return strings.Join(rs, ",")
	}

	t.Run("text-turn", func(t *testing.T) {
		msgs := messages(load("text-turn/session.jsonl"))
		if got := roles(msgs); got != "user,assistant" {
			t.Fatalf("roles %s", got)
		}
		if !strings.Contains(msgs[0].Content[0].Text, "PONG") {
			t.Errorf("user message %q", msgs[0].Content[0].Text)
		}
		last := msgs[1].Content[len(msgs[1].Content)-1]
		if last.Type != model.BlockText || last.Text != "PONG" {
			t.Errorf("answer %+v", last)
		}
		if msgs[1].Content[0].Type != model.BlockReasoning {
			t.Errorf("reasoning part missing: %+v", msgs[1].Content)
		}
	})

	t.Run("tool-call-turn", func(t *testing.T) {
		msgs := messages(load("tool-call-turn/session.jsonl"))
		if got := roles(msgs); got != "user,assistant,tool,assistant" {
			t.Fatalf("roles %s", got)
		}
		var call model.Part
		for _, p := range msgs[1].Content {
			if p.Type == model.BlockToolCall {
				call = p
			}
		}
		if call.Name != "bash" || !strings.Contains(call.Arguments, "SNAPSHOT_OK") {
			t.Errorf("tool call %+v", call)
		}
		tool := msgs[2]
		if tool.ToolCallID != call.ID || tool.IsError || len(tool.Content) != 1 || tool.Content[0].Text != "SNAPSHOT_OK\n" {
			t.Errorf("tool message %+v", tool)
		}
	})

	t.Run("fs-policy-reject", func(t *testing.T) {
		msgs := messages(load("fs-policy-reject/session.jsonl"))
		if got := roles(msgs); got != "user,assistant,tool,assistant" {
			t.Fatalf("roles %s", got)
		}
		if !msgs[2].IsError {
			t.Errorf("tool message not an error: %+v", msgs[2])
		}
	})

	t.Run("cancel", func(t *testing.T) {
		// The cancelled step wrote chunks but no assistant message.
		log := load("cancel/session.jsonl")
		if got := roles(messages(log)); got != "user" {
			t.Fatalf("roles %s", got)
		}
		te, err := As[TurnEnd](log.Events[len(log.Events)-1])
		if err != nil || te.Reason.Kind != EndAborted || te.Reason.Reason != "session/cancel" {
			t.Errorf("turn end %+v, %v", te, err)
		}
	})

	t.Run("subagent-fork", func(t *testing.T) {
		parent := load("subagent-fork/session.jsonl")
		child := load("subagent-fork/session.1.jsonl")
		n := child.Header.SeedLength
		if n == 0 || child.Header.ParentSession != parent.Header.ID {
			t.Fatalf("child header %+v", child.Header)
		}
		for i := range n {
			a, _ := child.Events[i].MarshalJSON()
			b, _ := parent.Events[i].MarshalJSON()
			if !bytes.Equal(a, b) {
				t.Fatalf("seed event %d differs from the parent's", i)
			}
		}
		// The seed is the parent's history up to the fork: the parent's
		// first turn is part of the child's conversation.
		msgs := messages(child)
		if got := roles(msgs); got != "user,assistant,user,assistant" {
			t.Fatalf("roles %s", got)
		}
		if !strings.Contains(msgs[0].Content[0].Text, "MARMALADE") {
			t.Errorf("first message %q", msgs[0].Content[0].Text)
		}
		// What a fork copies: the parent's closed turns, not the open one.
		parentOpen := parent.Events[:n+3] // turn 2 opened, not closed
		if got := len(ClosedPrefix(parentOpen)); got != n {
			t.Errorf("ClosedPrefix: %d events, want %d", got, n)
		}
	})
}

func relName(path string) string {
	return filepath.Base(filepath.Dir(path)) + "/" + filepath.Base(path)
}

// The hook scenarios' context/message and steering/message are in the
// derived messages where they were recorded, as user messages whose parts
// are the content between the reference's tags (session/src/index.ts,
// deriveMessages and renderTagged). hook-cc-stop-continue derives what the
// reference sent on its second step: no two assistant messages back to
// back.
func TestHookSessionsDeriveTaggedMessages(t *testing.T) {
	dir := filepath.Join(filepath.Dir(testcorpus.Sessions(t)), "hook-sessions")
	text := func(s string) model.Part { return model.Part{Type: model.BlockText, Text: s} }
	for name, want := range map[string]model.Message{
		"hook-cc-stop-continue": {Role: model.RoleUser, Content: []model.Part{text(`<steering source="plugin">`),
			text("Also reply with the single word SECOND, then stop."), text("</steering>")}},
		"hook-cc-posttool-context": {Role: model.RoleUser, Content: []model.Part{text(`<context source="plugin">`),
			text("Note: command output has been verified against the audit log."), text("</context>")}},
	} {
		log, err := ReadFile(filepath.Join(dir, name, "session.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := Messages(log.Events)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(msgs, func(m model.Message) bool { return reflect.DeepEqual(m, want) })
		if i < 0 {
			t.Fatalf("%s: no message %+v in %+v", name, want, msgs)
		}
		for j := 1; j < len(msgs); j++ {
			if msgs[j].Role == model.RoleAssistant && msgs[j-1].Role == model.RoleAssistant {
				t.Fatalf("%s: messages %d and %d are both the assistant's", name, j-1, j)
			}
		}
		if name == "hook-cc-stop-continue" && (len(msgs) != 4 || i != 2) {
			t.Fatalf("%s: %d messages, the steering at %d; want 4, at 2", name, len(msgs), i)
		}
	}
}
