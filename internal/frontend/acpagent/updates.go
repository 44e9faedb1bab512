package acpagent

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// translator turns one session's events into ACP session updates, as
// the reference harness's bridge does: reasoning and text deltas become
// thought and message chunks, tool/call a tool_call card (kind execute,
// read, edit or other), tool/result its tool_call_update (failed for an
// error result), and each todo/write event of tool-todo a plan.
type translator struct {
	cwd      string
	terminal bool // the client renders terminal cards (_meta.terminal_output)
	calls    map[string]session.ToolCall
}

func newTranslator(cwd string, terminal bool) *translator {
	return &translator{cwd: cwd, terminal: terminal, calls: map[string]session.ToolCall{}}
}

// live translates an event of a running turn: chunks stream as they come.
func (t *translator) live(e session.Event) []acp.SessionUpdate {
	switch e.Type {
	case session.TypeAssistantChunk:
		c, err := session.As[session.AssistantChunk](e)
		if err != nil {
			return nil
		}
		switch c.Chunk.Type {
		case model.ChunkReasoningDelta:
			return []acp.SessionUpdate{acp.UpdateAgentThoughtText(c.Chunk.Text)}
		case model.ChunkTextDelta:
			return []acp.SessionUpdate{acp.UpdateAgentMessageText(c.Chunk.Text)}
		}
	case session.TypeToolCall, session.TypeToolResult:
		return t.tool(e)
	case todoEvent:
		return plan(e)
	}
	return nil
}

// history translates a recorded event for session/load: user messages
// and whole assistant messages rather than their chunks.
func (t *translator) history(e session.Event) []acp.SessionUpdate {
	switch e.Type {
	case session.TypeUserMessage:
		u, err := session.As[session.UserMessage](e)
		if err != nil || u.Content.Text() == "" {
			return nil
		}
		return []acp.SessionUpdate{acp.UpdateUserMessageText(u.Content.Text())}
	case session.TypeAssistantMessage:
		m, err := session.As[session.AssistantMessage](e)
		if err != nil {
			return nil
		}
		var out []acp.SessionUpdate
		for _, p := range m.Content {
			switch {
			case p.Type == model.BlockReasoning && p.Text != "":
				out = append(out, acp.UpdateAgentThoughtText(p.Text))
			case p.Type == model.BlockText && p.Text != "":
				out = append(out, acp.UpdateAgentMessageText(p.Text))
			}
		}
		return out
	case session.TypeToolCall, session.TypeToolResult:
		return t.tool(e)
	case todoEvent:
		return plan(e)
	}
	return nil
}

func (t *translator) tool(e session.Event) []acp.SessionUpdate {
	if e.Type == session.TypeToolCall {
		c, err := session.As[session.ToolCall](e)
		if err != nil {
			return nil
		}
		t.calls[c.CallID] = c
		return t.start(c)
	}
	r, err := session.As[session.ToolResult](e)
	if err != nil {
		return nil
	}
	call := t.calls[r.CallID]
	delete(t.calls, r.CallID)
	return []acp.SessionUpdate{t.finish(call, r)}
}

// toolKind is the ACP kind of a tool, as the reference maps them.
func toolKind(name string) acp.ToolKind {
	switch name {
	case "bash":
		return acp.ToolKindExecute
	case "read":
		return acp.ToolKindRead
	case "write", "edit":
		return acp.ToolKindEdit
	}
	return acp.ToolKindOther
}

type fileArgs struct {
	FilePath  string `json:"file_path"`
	Offset    *int   `json:"offset"`
	Limit     *int   `json:"limit"`
	Content   string `json:"content"`
	OldString string `json:"old_string"`
	NewString string `json:"new_string"`
}

type bashArgs struct {
	Command     string `json:"command"`
	Description string `json:"description"`
}

type todoArgs struct {
	Todos []struct {
		Content  string `json:"content"`
		Status   string `json:"status"`
		Priority string `json:"priority"`
	} `json:"todos"`
}

func (t *translator) rel(p string) string {
	if t.cwd != "" && filepath.IsAbs(p) {
		if r, err := filepath.Rel(t.cwd, p); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
	}
	return p
}

// fileArgs reads a file tool's arguments, with the path as the model
// gave it relative to the session's cwd when it is inside it.
func (t *translator) fileArgs(c session.ToolCall) (fileArgs, bool) {
	var a fileArgs
	if json.Unmarshal([]byte(c.Arguments), &a) != nil || a.FilePath == "" {
		return a, false
	}
	a.FilePath = t.rel(a.FilePath)
	return a, true
}

// withLocations sets a card's locations alone (the ACP library's
// WithStartLocations also makes up a rawInput from the first path, where
// the reference sends none for the file tools).
func withLocations(l ...acp.ToolCallLocation) acp.ToolCallStartOpt {
	return func(tc *acp.SessionUpdateToolCall) { tc.Locations = l }
}

// fileTitle is a file tool's card title: "Read big.txt (5 - 8)" for a
// window of lines, "Read big.txt (from line 5)" for an offset alone,
// "Write notes.txt", "Edit config.txt".
func fileTitle(name, path string, a fileArgs) string {
	switch name {
	case "read":
		window := ""
		first := 1
		if a.Offset != nil {
			first = *a.Offset
		}
		switch {
		case a.Limit != nil && *a.Limit > 0:
			window = fmt.Sprintf(" (%d - %d)", first, first+*a.Limit-1)
		case a.Offset != nil:
			window = fmt.Sprintf(" (from line %d)", first)
		}
		return "Read " + path + window
	case "write":
		return "Write " + path
	}
	return "Edit " + path
}

// newFileDiff is the diff of a new file: content over no old text (the
// ACP library leaves the absent oldText out, where the reference writes
// null; the protocol reads both as no old text).
func newFileDiff(path, content string) acp.ToolCallContent {
	return acp.ToolDiffContent(path, content)
}

func (t *translator) start(c session.ToolCall) []acp.SessionUpdate {
	id := acp.ToolCallId(c.CallID)
	kind := toolKind(c.Name)
	var bash bashArgs
	if c.Name == "bash" && (json.Unmarshal([]byte(c.Arguments), &bash) != nil || bash.Command == "" || bash.Description == "") {
		// The reference's bash card needs the command and its
		// description (its schema requires both); without them it
		// shows the generic card: kind other, titled with the name.
		kind = acp.ToolKindOther
	}
	opts := []acp.ToolCallStartOpt{acp.WithStartKind(kind), acp.WithStartStatus(acp.ToolCallStatusInProgress)}
	title := c.Name
	// rawInput, as the reference sends it: the command string for a bash
	// card, the bare list for todo_write, nothing for the file tools
	// (their card says it all), and the arguments for any other tool.
	var raw any
	if json.Unmarshal([]byte(c.Arguments), &raw) != nil {
		raw = nil
	}
	switch c.Name {
	case "read", "write", "edit":
		raw = nil
		if a, ok := t.fileArgs(c); ok {
			path := a.FilePath
			title = fileTitle(c.Name, path, a)
			loc := acp.ToolCallLocation{Path: path}
			if c.Name == "read" {
				line := 1
				if a.Offset != nil {
					line = *a.Offset
				}
				loc.Line = &line
			}
			opts = append(opts, withLocations(loc))
			switch c.Name {
			case "write":
				opts = append(opts, acp.WithStartContent([]acp.ToolCallContent{newFileDiff(path, a.Content)}))
			case "edit":
				opts = append(opts, acp.WithStartContent([]acp.ToolCallContent{acp.ToolDiffContent(path, a.NewString, a.OldString)}))
			}
		}
	case "todo_write":
		title = "Update todo list"
		var a struct {
			Todos json.RawMessage `json:"todos"`
		}
		if json.Unmarshal([]byte(c.Arguments), &a) == nil && a.Todos != nil {
			raw = a.Todos
		}
	case "bash":
		if a := bash; kind == acp.ToolKindExecute {
			raw = a.Command
			title = a.Command
			var content []acp.ToolCallContent
			content = append(content, acp.ToolContent(acp.TextBlock(a.Description)))
			if t.terminal {
				content = append(content, acp.ToolTerminalRef(c.CallID))
			}
			if len(content) > 0 {
				opts = append(opts, acp.WithStartContent(content))
			}
		}
	}
	if c.Name == "web_search" {
		// The reference's search card: kind search, titled by the query,
		// which is also its raw input.
		opts = append(opts, acp.WithStartKind(acp.ToolKindSearch))
		var a struct {
			Query string `json:"query"`
		}
		if json.Unmarshal([]byte(c.Arguments), &a) == nil && a.Query != "" {
			title = a.Query
			raw = a.Query
		}
	}
	if raw != nil {
		opts = append(opts, acp.WithStartRawInput(raw))
	}
	u := acp.StartToolCall(id, title, opts...)
	if c.Name == "bash" && t.terminal && u.ToolCall != nil {
		u.ToolCall.Meta = map[string]any{"terminal_info": map[string]any{"terminal_id": c.CallID, "cwd": t.cwd}}
	}
	return []acp.SessionUpdate{u}
}

// todoEvent is the session event tool-todo records for each list.
const todoEvent = "todo/write"

// plan turns a todo/write event into a plan update.
func plan(e session.Event) []acp.SessionUpdate {
	var a todoArgs
	if json.Unmarshal(e.Data, &a) != nil {
		return nil
	}
	entries := make([]acp.PlanEntry, 0, len(a.Todos))
	for _, td := range a.Todos {
		entries = append(entries, acp.PlanEntry{Content: td.Content,
			Status: planStatus(td.Status), Priority: planPriority(td.Priority)})
	}
	return []acp.SessionUpdate{acp.UpdatePlan(entries...)}
}

func planStatus(s string) acp.PlanEntryStatus {
	switch s {
	case "in_progress":
		return acp.PlanEntryStatusInProgress
	case "completed":
		return acp.PlanEntryStatusCompleted
	}
	return acp.PlanEntryStatusPending
}

func planPriority(s string) acp.PlanEntryPriority {
	switch s {
	case "high":
		return acp.PlanEntryPriorityHigh
	case "low":
		return acp.PlanEntryPriorityLow
	}
	return acp.PlanEntryPriorityMedium
}

// isBashCard reports whether a bash call got the bash card (kind
// execute) rather than the generic one.
func isBashCard(c session.ToolCall) bool {
	var a bashArgs
	return json.Unmarshal([]byte(c.Arguments), &a) == nil && a.Command != "" && a.Description != ""
}

// resultDiffs is a completed write's or edit's diff content: the diffs
// the tool returned in its result's meta ({"diffs": [{path, oldText,
// newText}]}), or for a write without them the whole content as new.
// An edit without usable meta gets nil: the generic text card.
func resultDiffs(name string, a fileArgs, meta json.RawMessage) []acp.ToolCallContent {
	var m struct {
		Diffs []struct {
			Path    string  `json:"path"`
			OldText *string `json:"oldText"`
			NewText *string `json:"newText"`
		} `json:"diffs"`
	}
	var out []acp.ToolCallContent
	if len(meta) > 0 && json.Unmarshal(meta, &m) == nil {
		for _, d := range m.Diffs {
			if d.Path == "" || d.NewText == nil {
				out = nil
				break
			}
			if d.OldText == nil {
				out = append(out, newFileDiff(d.Path, *d.NewText))
			} else {
				out = append(out, acp.ToolDiffContent(d.Path, *d.NewText, *d.OldText))
			}
		}
	}
	if out == nil && name == "write" {
		out = []acp.ToolCallContent{newFileDiff(a.FilePath, a.Content)}
	}
	return out
}

var exitMarker = regexp.MustCompile(`(?m)^\[exit code: (-?\d+)\]$`)

func (t *translator) finish(call session.ToolCall, r session.ToolResult) acp.SessionUpdate {
	status := acp.ToolCallStatusCompleted
	if r.IsError {
		status = acp.ToolCallStatusFailed
	}
	text := r.Content.Text()
	id := acp.ToolCallId(r.CallID)
	if call.Name == "bash" && t.terminal && !r.IsError {
		code := 0
		if m := exitMarker.FindStringSubmatch(text); m != nil {
			code, _ = strconv.Atoi(m[1])
		}
		u := acp.UpdateToolCall(id, acp.WithUpdateStatus(status))
		u.ToolCallUpdate.Meta = map[string]any{
			"terminal_output": map[string]any{"terminal_id": r.CallID, "data": text},
			"terminal_exit":   map[string]any{"terminal_id": r.CallID, "exit_code": code},
		}
		return u
	}
	if call.Name == "bash" && isBashCard(call) {
		// The reference shows a bash card's output as a console block.
		text = "```console\n" + strings.TrimSuffix(text, "\n") + "\n```"
	}
	if !r.IsError && (call.Name == "write" || call.Name == "edit") {
		if a, ok := t.fileArgs(call); ok {
			if diffs := resultDiffs(call.Name, a, r.Meta); diffs != nil {
				return acp.UpdateToolCall(id, acp.WithUpdateStatus(status), acp.WithUpdateContent(diffs),
					acp.WithUpdateTitle(fileTitle(call.Name, a.FilePath, a)))
			}
		}
	}
	return acp.UpdateToolCall(id, acp.WithUpdateStatus(status),
		acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(text))}))
}
