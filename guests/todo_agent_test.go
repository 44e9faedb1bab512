package guests

import (
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/agent"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/internal/turntest"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// TestToolTodoThroughTheLoop: a todo_write call made by the model in a turn
// leaves a todo/write event, with the reference's payload, in the agent's
// session, between the call and its result, and OnEvent sees it.
func TestToolTodoThroughTheLoop(t *testing.T) {
	reg := prompt.NewRegistry(nil)
	if _, _, err := prompt.RegisterHarnessSections(reg, "You plan."); err != nil {
		t.Fatal(err)
	}
	h, err := plugin.New(plugin.Options{Registry: reg, Builtins: All(), Cache: testCache, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(bg)
	spec, err := plugin.SpecFromEntry("", config.Entry{Source: "builtin:tool-todo", Grants: config.Grants{SessionEvents: []string{"todo/write"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Load(bg, spec); err != nil {
		t.Fatal(err)
	}
	prov := &scripted.Tools{
		Calls: []scripted.Call{{Name: "todo_write",
			Arguments: `{"todos":[{"content":"Write the test","status":"in_progress"},{"content":"Ship","status":"pending"}]}`}},
		Answer: func(*model.Request) string { return "planned" },
	}
	var seen []string
	res, evs, err := turntest.Turn(bg, t, h, agent.Options{Provider: prov, Registry: reg, Logger: discardLogger(), Model: "test-model",
		OnEvent: func(e session.Event) { seen = append(seen, e.Type) }}, t.TempDir(), "plan it")
	if err != nil {
		t.Fatal(err)
	}
	if res.End.Kind != session.EndCompleted {
		t.Fatalf("turn ended %+v", res.End)
	}
	var types []string
	var todo session.Event
	for _, e := range evs {
		if e.Type == session.TypeAssistantChunk {
			continue
		}
		types = append(types, e.Type)
		if e.Type == "todo/write" {
			todo = e
		}
	}
	want := `{"todos":[{"content":"Write the test","status":"in_progress"},{"content":"Ship","status":"pending"}]}`
	if string(todo.Data) != want || todo.SurfaceOp != nil {
		t.Fatalf("todo/write event %+v; want data %s off the surface; events %v", todo, want, types)
	}
	i := indexOf(types, "todo/write")
	if i < 1 || types[i-1] != session.TypeToolCall || types[i+1] != session.TypeToolResult {
		t.Fatalf("events %v: want todo/write between the call and its result", types)
	}
	if indexOf(seen, "todo/write") < 0 {
		t.Fatalf("OnEvent saw %v", seen)
	}
	// The model's history is the call, its result and the answer: the
	// event is not in it.
	if msgs, err := session.Messages(evs); err != nil || len(msgs) != 4 {
		t.Fatalf("history of %d messages (%v): %+v", len(msgs), err, msgs)
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
