package guests

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/internal/pluginstate"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

type recorded struct {
	typ  string
	data string
}

func TestToolTodoRecordsSessionEvent(t *testing.T) {
	e := loadTool(t, "tool-todo", config.Grants{SessionEvents: []string{"todo/write"}}, "", 0)
	var got []recorded
	e.ctx = pluginstate.WithSessionEvents(e.ctx, func(typ string, data json.RawMessage) error {
		got = append(got, recorded{typ, string(data)})
		return nil
	})
	text := e.ok(t, "todo_write", `{"todos":[{"content":" Read the code ","status":"completed"},{"content":"Fix the bug","status":"in_progress"},{"content":"Run tests","status":"pending"}]}`)
	if text != "Updated todo list: 1 pending, 1 in progress, 1 completed." {
		t.Fatalf("result %q", text)
	}
	want := `{"todos":[{"content":"Read the code","status":"completed"},{"content":"Fix the bug","status":"in_progress"},{"content":"Run tests","status":"pending"}]}`
	if len(got) != 1 || got[0].typ != "todo/write" || got[0].data != want {
		t.Fatalf("recorded %+v, want one todo/write with %s", got, want)
	}
	if text := e.ok(t, "todo_write", `{"todos":[]}`); text != "Updated todo list: 0 pending, 0 in progress, 0 completed." || len(got) != 2 || got[1].data != `{"todos":[]}` {
		t.Fatalf("clearing: %q, %+v", text, got)
	}

	e.fails(t, "todo_write", `{"todos":[{"content":"a","status":"in_progress"},{"content":"b","status":"in_progress"}]}`, "at most one may be in_progress")
	e.fails(t, "todo_write", `{"todos":[{"content":"a","status":"done"}]}`, `status "done"`)
	e.fails(t, "todo_write", `{"todos":[{"content":"  ","status":"pending"}]}`, "content must not be empty")
	e.fails(t, "todo_write", `{"todos":[{"content":"a","status":"pending"},{"content":"a","status":"pending"}]}`, "duplicate")
	e.fails(t, "todo_write", `{}`, `"todos": missing`)
	e.fails(t, "todo_write", `{"todos":[{"content":"a","status":"pending","extra":1}]}`, "invalid arguments")
	if len(got) != 2 {
		t.Fatalf("refused lists were recorded: %+v", got)
	}

	// No session to record in: the call's context carries no sink.
	e.ctx = prompt.WithAgent(bg, e.facts)
	e.fails(t, "todo_write", `{"todos":[]}`, "no agent session")
}

// TestToolTodoNeedsGrant: the plugin declares the event type it appends,
// so a deployment that does not grant it fails at load, naming the fix.
func TestToolTodoNeedsGrant(t *testing.T) {
	h, err := plugin.New(plugin.Options{Registry: prompt.NewRegistry(nil), Builtins: All(), Cache: testCache, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(bg)
	spec, err := plugin.SpecFromEntry("", config.Entry{Source: "builtin:tool-todo"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Load(bg, spec)
	if !errors.Is(err, config.ErrNotGranted) || !strings.Contains(err.Error(), "add under grants.session_events: - todo/write") {
		t.Fatalf("load without the grant: %v", err)
	}
}
