package acpagent

import (
	"encoding/json"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

func event(t *testing.T, p session.Payload) session.Event {
	t.Helper()
	e := session.NewEvent(p)
	if e.Type == "" {
		t.Fatalf("no event for %T", p)
	}
	return e
}

// A todo/write event, the list tool-todo accepted, becomes a plan.
func TestPlanFromTodoWrite(t *testing.T) {
	tr := newTranslator("/w", false)
	e := session.Event{Type: todoEvent, Data: json.RawMessage(`{"todos":[{"content":"Write it","status":"in_progress"},{"content":"Test it","status":"pending"},{"content":"Ship","status":"completed","priority":"high"}]}`)}
	us := tr.live(e)
	if len(us) != 1 || us[0].Plan == nil {
		t.Fatalf("updates = %+v", us)
	}
	got := us[0].Plan.Entries
	want := []acp.PlanEntry{
		{Content: "Write it", Status: acp.PlanEntryStatusInProgress, Priority: acp.PlanEntryPriorityMedium},
		{Content: "Test it", Status: acp.PlanEntryStatusPending, Priority: acp.PlanEntryPriorityMedium},
		{Content: "Ship", Status: acp.PlanEntryStatusCompleted, Priority: acp.PlanEntryPriorityHigh},
	}
	if len(got) != len(want) {
		t.Fatalf("entries = %+v", got)
	}
	for i := range want {
		if got[i].Content != want[i].Content || got[i].Status != want[i].Status || got[i].Priority != want[i].Priority {
			t.Errorf("entry %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// With a client that renders terminals, bash is a terminal card whose
// update carries the output and the exit code from the result's marker;
// file tools get relative titles, locations and diffs.
func TestToolCards(t *testing.T) {
	tr := newTranslator("/w", true)
	call := event(t, session.ToolCall{Turn: 1, Step: 1, CallID: "c1", Name: "bash", Arguments: `{"command":"make","description":"Build"}`})
	us := tr.live(call)
	if len(us) != 1 || us[0].ToolCall == nil {
		t.Fatalf("call updates = %+v", us)
	}
	tc := us[0].ToolCall
	if tc.Kind != acp.ToolKindExecute || tc.Title != "make" || len(tc.Content) != 2 || tc.Content[1].Terminal == nil ||
		tc.Meta["terminal_info"] == nil {
		t.Errorf("bash card = %+v", tc)
	}
	res := event(t, session.ToolResult{Turn: 1, Step: 1, CallID: "c1", Content: session.TextContent("oops\n[exit code: 2]")})
	us = tr.live(res)
	if len(us) != 1 || us[0].ToolCallUpdate == nil {
		t.Fatalf("result updates = %+v", us)
	}
	u := us[0].ToolCallUpdate
	exit, _ := u.Meta["terminal_exit"].(map[string]any)
	if *u.Status != acp.ToolCallStatusCompleted || exit["exit_code"] != 2 {
		t.Errorf("bash update = %+v", u)
	}

	us = tr.live(event(t, session.ToolCall{Turn: 1, Step: 2, CallID: "c2", Name: "edit",
		Arguments: `{"file_path":"/w/src/a.go","old_string":"x","new_string":"y"}`}))
	tc = us[0].ToolCall
	if tc.Kind != acp.ToolKindEdit || tc.Title != "Edit src/a.go" || tc.Locations[0].Path != "src/a.go" ||
		tc.Content[0].Diff == nil || tc.Content[0].Diff.NewText != "y" || *tc.Content[0].Diff.OldText != "x" {
		t.Errorf("edit card = %+v", tc)
	}
	us = tr.live(event(t, session.ToolResult{Turn: 1, Step: 2, CallID: "c2", IsError: true, Content: session.TextContent("stale")}))
	u = us[0].ToolCallUpdate
	if *u.Status != acp.ToolCallStatusFailed || u.Content[0].Content.Content.Text.Text != "Error: stale" {
		t.Errorf("failed edit update = %+v", u)
	}
	if k := toolKind("web_fetch"); k != acp.ToolKindOther {
		t.Errorf("web_fetch kind = %s", k)
	}
	// A bash call without a description gets the generic card, as the
	// reference shows it (hook-codex-posttool-block).
	us = tr.live(event(t, session.ToolCall{Turn: 1, Step: 3, CallID: "c3", Name: "bash", Arguments: `{"command":"pwd"}`}))
	if tc := us[0].ToolCall; tc.Kind != acp.ToolKindOther || tc.Title != "bash" {
		t.Errorf("bash card without a description = kind %s title %q, want other, bash", tc.Kind, tc.Title)
	}
}
