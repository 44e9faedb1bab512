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
	// A failed card shows the result's text as it is: no "Error: " of
	// its own (a tool's failure already reads "Error: ...", and a hook's
	// block does not).
	us = tr.live(event(t, session.ToolResult{Turn: 1, Step: 2, CallID: "c2", IsError: true, Content: session.TextContent("stale")}))
	u = us[0].ToolCallUpdate
	if *u.Status != acp.ToolCallStatusFailed || u.Content[0].Content.Content.Text.Text != "stale" {
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

// wire is an update as the client reads it, in canonical JSON.
func wire(t *testing.T, u acp.SessionUpdate) string {
	t.Helper()
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	b, err = json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The cards the reference sends, field for field, for what the 25 shared
// scenarios do not all show: rawInput per tool, a windowed read's title
// and line, todo_write's card, a bash card's console fence, write and edit
// completions with their title and diffs.
func TestToolCardsAsTheReference(t *testing.T) {
	tr := newTranslator("/w", false)
	for _, c := range []struct {
		name        string
		call        session.ToolCall
		result      *session.ToolResult
		start, done string
	}{
		{name: "windowed read",
			call:  session.ToolCall{CallID: "r", Name: "read", Arguments: `{"file_path":"/w/big.txt","offset":5,"limit":4}`},
			start: `{"kind":"read","locations":[{"line":5,"path":"big.txt"}],"sessionUpdate":"tool_call","status":"in_progress","title":"Read big.txt (5 - 8)","toolCallId":"r"}`},
		{name: "read from a line",
			call:  session.ToolCall{CallID: "r2", Name: "read", Arguments: `{"file_path":"big.txt","offset":5}`},
			start: `{"kind":"read","locations":[{"line":5,"path":"big.txt"}],"sessionUpdate":"tool_call","status":"in_progress","title":"Read big.txt (from line 5)","toolCallId":"r2"}`},
		{name: "todo_write",
			call:  session.ToolCall{CallID: "td", Name: "todo_write", Arguments: `{"todos":[{"content":"a","status":"pending"}]}`},
			start: `{"kind":"other","rawInput":[{"content":"a","status":"pending"}],"sessionUpdate":"tool_call","status":"in_progress","title":"Update todo list","toolCallId":"td"}`},
		{name: "bash",
			call:   session.ToolCall{CallID: "b", Name: "bash", Arguments: `{"command":"ls","description":"List"}`},
			result: &session.ToolResult{CallID: "b", Content: session.TextContent("a\nb\n")},
			start:  `{"content":[{"content":{"text":"List","type":"text"},"type":"content"}],"kind":"execute","rawInput":"ls","sessionUpdate":"tool_call","status":"in_progress","title":"ls","toolCallId":"b"}`,
			done:   "{\"content\":[{\"content\":{\"text\":\"```console\\na\\nb\\n```\",\"type\":\"text\"},\"type\":\"content\"}],\"sessionUpdate\":\"tool_call_update\",\"status\":\"completed\",\"toolCallId\":\"b\"}"},
		{name: "write",
			call:   session.ToolCall{CallID: "w", Name: "write", Arguments: `{"file_path":"/w/n.txt","content":"hi"}`},
			result: &session.ToolResult{CallID: "w", Content: session.TextContent("<path>/w/n.txt</path>")},
			start:  `{"content":[{"newText":"hi","path":"n.txt","type":"diff"}],"kind":"edit","locations":[{"path":"n.txt"}],"sessionUpdate":"tool_call","status":"in_progress","title":"Write n.txt","toolCallId":"w"}`,
			done:   `{"content":[{"newText":"hi","path":"n.txt","type":"diff"}],"sessionUpdate":"tool_call_update","status":"completed","title":"Write n.txt","toolCallId":"w"}`},
		{name: "edit",
			call: session.ToolCall{CallID: "e", Name: "edit", Arguments: `{"file_path":"c.txt","old_string":"x","new_string":"y"}`},
			result: &session.ToolResult{CallID: "e", Content: session.TextContent("The file /w/c.txt has been updated successfully."),
				Meta: json.RawMessage(`{"diffs":[{"path":"c.txt","oldText":"a=x\nb","newText":"a=y\nb"}]}`)},
			start: `{"content":[{"newText":"y","oldText":"x","path":"c.txt","type":"diff"}],"kind":"edit","locations":[{"path":"c.txt"}],"sessionUpdate":"tool_call","status":"in_progress","title":"Edit c.txt","toolCallId":"e"}`,
			done:  `{"content":[{"newText":"a=y\nb","oldText":"a=x\nb","path":"c.txt","type":"diff"}],"sessionUpdate":"tool_call_update","status":"completed","title":"Edit c.txt","toolCallId":"e"}`},
		{name: "failed edit",
			call:   session.ToolCall{CallID: "f", Name: "edit", Arguments: `{"file_path":"c.txt","old_string":"x","new_string":"y"}`},
			result: &session.ToolResult{CallID: "f", IsError: true, Content: session.TextContent("Error: edit requires reading \"/w/c.txt\" first")},
			done:   `{"content":[{"content":{"text":"Error: edit requires reading \"/w/c.txt\" first","type":"text"},"type":"content"}],"sessionUpdate":"tool_call_update","status":"failed","toolCallId":"f"}`},
	} {
		us := tr.live(event(t, c.call))
		if len(us) != 1 {
			t.Fatalf("%s: %d updates", c.name, len(us))
		}
		if got := wire(t, us[0]); c.start != "" && got != c.start {
			t.Errorf("%s card:\ngot  %s\nwant %s", c.name, got, c.start)
		}
		if c.result == nil {
			continue
		}
		us = tr.live(event(t, *c.result))
		if got := wire(t, us[0]); got != c.done {
			t.Errorf("%s completion:\ngot  %s\nwant %s", c.name, got, c.done)
		}
	}
}
