package filestore

import (
	"os"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// A turn cut after its assistant message (with tool calls) but before the
// tool/call events: the repair answers no call, and the derived messages
// end with an assistant tool call that has no tool message.
func TestRepairAnswersCallsWithoutToolCallEvents(t *testing.T) {
	store, _ := newTestStore(t)
	s, err := store.Create(session.Header{Cwd: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	id := s.Header().ID
	mustAppend(t, s, session.NewEvent(session.TurnStart{Turn: 1, Trigger: &session.Trigger{Kind: session.TriggerMessage, Source: &session.Source{Kind: session.SourceUser}}}))
	mustAppend(t, s, session.NewEvent(session.UserMessage{Content: session.TextContent("hi"), Source: session.Source{Kind: session.SourceUser}}))
	mustAppend(t, s, session.NewEvent(session.StepStart{Turn: 1, Step: 1}))
	mustAppend(t, s, session.NewEvent(session.AssistantMessage{Turn: 1, Step: 1, Content: []model.Part{
		{Type: model.BlockToolCall, ID: "c1", Name: "bash", Arguments: "{}"},
		{Type: model.BlockToolCall, ID: "c2", Name: "bash", Arguments: "{}"}}}))
	mustAppend(t, s, session.NewEvent(session.ToolCall{Turn: 1, Step: 1, CallID: "c1", Name: "bash", Arguments: "{}"}))
	// flush, then a torn line: the crash came while writing c1's result
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	path := s.Path()
	s.Close()
	fh, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	fh.WriteString(`{"type":"tool/result","seq":8,"ti`)
	fh.Close()

	s2, err := store.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	t.Logf("recovery: %s", s2.Recovery())
	msgs := s2.Messages()
	answered := map[string]bool{}
	for _, m := range msgs {
		if m.Role == model.RoleTool {
			answered[m.ToolCallID] = true
		}
	}
	for _, m := range msgs {
		for _, p := range m.Content {
			if p.Type == model.BlockToolCall && !answered[p.ID] {
				t.Errorf("tool call %s in the derived messages has no tool result after repair", p.ID)
			}
		}
	}
}
