package scripted

import (
	"context"
	"fmt"
	"sync"

	"github.com/dsh-wasm/dsh-wasm/runtime/model"
)

// Tools is a model that makes Calls, one per step, in order across all
// its requests (so across turns), and answers with text once they are
// used up. A zero Call in the list answers at that step instead, which
// ends that turn. Its zero value answers "done" every step.
//
// It is safe for concurrent use; each request takes the next step.
type Tools struct {
	// Calls are the tool calls, one per step. A call without an ID gets
	// "call_N", N its step's number in the script (from 1).
	Calls []Call
	// Answer gives the text of an answering step from the request it
	// answers (LastResult reads the tool result it was sent); nil
	// answers "done".
	Answer func(req *model.Request) string
	// Seen, when set, is called with every request before it is
	// answered, to record what the model was sent.
	Seen func(step int, req *model.Request)

	mu sync.Mutex
	n  int
}

// Generate streams the next step of the script.
func (m *Tools) Generate(_ context.Context, req *model.Request, emit func(model.Chunk) error) error {
	m.mu.Lock()
	i := m.n
	m.n++
	m.mu.Unlock()
	if m.Seen != nil {
		m.Seen(i+1, req)
	}
	var a Answer
	if i < len(m.Calls) && m.Calls[i] != (Call{}) {
		c := m.Calls[i]
		if c.ID == "" {
			c.ID = fmt.Sprintf("call_%d", i+1)
		}
		a.Calls = []Call{c}
	} else if m.Answer != nil {
		a.Text = m.Answer(req)
	} else {
		a.Text = "done"
	}
	for _, c := range a.Chunks() {
		if err := emit(c); err != nil {
			return err
		}
	}
	return nil
}

// LastResult is the tool result a request ends with: its text and
// whether it is an error. ok is false when the request's last message
// is not a tool result.
func LastResult(req *model.Request) (text string, isError, ok bool) {
	if len(req.Messages) == 0 {
		return "", false, false
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role != model.RoleTool {
		return "", false, false
	}
	for _, p := range last.Content {
		text += p.Text
	}
	return text, last.IsError, true
}

// Echo is an Answer for Tools: "the tool said: " and the tool result,
// or "the tool failed: " and it for an error result.
func Echo(req *model.Request) string {
	text, isErr, _ := LastResult(req)
	if isErr {
		return "the tool failed: " + text
	}
	return "the tool said: " + text
}
