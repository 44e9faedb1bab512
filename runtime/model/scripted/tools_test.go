package scripted_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
)

// step runs one request through m and returns its answer: the text, or
// "call NAME ARGS (ID)".
func step(t testing.TB, m model.Provider, req *model.Request) string {
	var out string
	err := m.Generate(context.Background(), req, func(c model.Chunk) error {
		switch {
		case c.Type == model.ChunkTextDelta:
			out += c.Text
		case c.Type == model.ChunkBlockEnd && c.Block.Type == model.BlockToolCall:
			out = fmt.Sprintf("call %s %s (%s)", c.Block.Name, c.Block.Arguments, c.Block.ID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A model that reads a file with a tool, then says what the tool said.
func ExampleTools() {
	m := &scripted.Tools{
		Calls:  []scripted.Call{{Name: "read", Arguments: `{"file_path":"motto.txt"}`}},
		Answer: scripted.Echo,
	}
	req := &model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: []model.Part{{Type: model.BlockText, Text: "read it"}}}}}
	fmt.Println(step(nil, m, req))
	req.Messages = append(req.Messages, model.Message{Role: model.RoleTool, Content: []model.Part{{Type: model.BlockText, Text: "less is more"}}})
	fmt.Println(step(nil, m, req))
	// Output:
	// call read {"file_path":"motto.txt"} (call_1)
	// the tool said: less is more
}

// Calls go one per step across turns; a zero Call answers in its step;
// the zero model answers "done"; an error result echoes as a failure.
func TestTools(t *testing.T) {
	m := &scripted.Tools{Calls: []scripted.Call{{Name: "a", Arguments: "{}"}, {}, {ID: "mine", Name: "b", Arguments: "{}"}}}
	req := &model.Request{}
	for i, want := range []string{"call a {} (call_1)", "done", "call b {} (mine)", "done", "done"} {
		if got := step(t, m, req); got != want {
			t.Errorf("step %d = %q, want %q", i+1, got, want)
		}
	}
	failed := &model.Request{Messages: []model.Message{{Role: model.RoleTool, IsError: true, Content: []model.Part{{Type: model.BlockText, Text: "ENOENT"}}}}}
	if got := scripted.Echo(failed); got != "the tool failed: ENOENT" {
		t.Errorf("Echo of an error result = %q", got)
	}
	if _, _, ok := scripted.LastResult(req); ok {
		t.Error("LastResult of a request without messages reports a result")
	}
}
