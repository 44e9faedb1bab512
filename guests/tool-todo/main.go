//go:build wasip1

// Command tool-todo is dsh-wasm's built-in plan plugin, loaded as
// builtin:tool-todo. It registers todo_write with the reference harness's
// payload, {todos: [{content, status}]}, and records each list the model
// sends as a todo/write event in the agent's session (the operator grants
// it with grants.session_events: [todo/write]), so that front ends can
// show the plan and the session keeps it. The tool's description carries
// its whole contract: it registers no section.
//
// Config (optional): allow_parallel_in_progress (false): whether several
// todos may be in_progress at once.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/hostfns/guest"
)

func main() {}

func init() { guest.Main(setup) }

type config struct {
	AllowParallel bool `json:"allow_parallel_in_progress"`
}

var cfg config

// EventType is the session event todo_write records.
const eventType = "todo/write"

// Limits on one list: a plan is a screenful, not a database.
const (
	maxTodos   = 200
	maxContent = 1000
)

func setup(p *guest.Plugin) error {
	if raw := bytes.TrimSpace(p.Config); len(raw) > 0 {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&cfg); err != nil {
			return fmt.Errorf("tool-todo config: %w", err)
		}
	}
	if err := p.Need(hostfns.Capabilities{SessionEvents: []string{eventType}}); err != nil {
		return err
	}
	active := "Keep at most one todo in_progress at a time: while work remains, exactly the one you are working on."
	if cfg.AllowParallel {
		active = "Mark every todo you are actively working on in_progress: several when work really runs in parallel (background commands, subagents), one otherwise; while work remains, at least one is in_progress."
	}
	return p.Tool(guest.Tool{
		Name: "todo_write",
		Description: "Keep a structured plan of the current work. Each call sends the WHOLE list, which replaces the previous one: there are no partial updates. " +
			"Use it for work of several steps: write one todo per concrete step before you start, and keep it current as you go. " +
			active + " " +
			"Mark a todo completed as soon as it is done, one at a time, not in batches; leave nothing in_progress only when all the work is finished. " +
			"Skip the list for a task of a single trivial step. Statuses: pending (not started), in_progress (being done now), completed (done).",
		Parameters: json.RawMessage(`{"type":"object","properties":{"todos":{"type":"array","description":"The complete list, replacing the previous one.",` +
			`"items":{"type":"object","properties":{` +
			`"content":{"type":"string","description":"The step, as a short imperative line."},` +
			`"status":{"type":"string","enum":["pending","in_progress","completed"],"description":"pending (not started), in_progress (now) or completed (done)."}},` +
			`"required":["content","status"],"additionalProperties":false}}},"required":["todos"],"additionalProperties":false}`),
	}, todoWrite)
}

type todo struct {
	Content string `json:"content"`
	Status  string `json:"status"`
}

func todoWrite(ctx guest.Context, args []byte) (string, error) {
	var in struct {
		Todos *[]todo `json:"todos"`
	}
	d := json.NewDecoder(bytes.NewReader(args))
	d.DisallowUnknownFields()
	if err := d.Decode(&in); err != nil {
		return "", fmt.Errorf("invalid arguments: %v", err)
	}
	if in.Todos == nil {
		return "", errors.New("argument \"todos\": missing; send the whole list, [] to clear it")
	}
	todos, err := check(*in.Todos)
	if err != nil {
		return "", err
	}
	facts, err := ctx.Facts()
	if err != nil {
		return "", fmt.Errorf("bad call context: %w", err)
	}
	if facts.AgentID == "" {
		return "", errors.New("todo_write needs an agent's session to keep the list in, and this call has none")
	}
	if err := guest.AppendSessionEvent(eventType, struct {
		Todos []todo `json:"todos"`
	}{todos}); err != nil {
		return "", fmt.Errorf("recording the list: %w", err)
	}
	var pending, active, done int
	for _, t := range todos {
		switch t.Status {
		case "pending":
			pending++
		case "in_progress":
			active++
		default:
			done++
		}
	}
	return fmt.Sprintf("Updated todo list: %d pending, %d in progress, %d completed.", pending, active, done), nil
}

// check validates the list and trims each todo's content.
func check(in []todo) ([]todo, error) {
	if len(in) > maxTodos {
		return nil, fmt.Errorf("invalid todos: %d items, at most %d", len(in), maxTodos)
	}
	out := make([]todo, 0, len(in))
	seen := map[string]bool{}
	active := 0
	for i, t := range in {
		c := strings.TrimSpace(t.Content)
		switch {
		case c == "":
			return nil, fmt.Errorf("invalid todo %d: content must not be empty", i+1)
		case len(c) > maxContent:
			return nil, fmt.Errorf("invalid todo %d: content of %d bytes, at most %d", i+1, len(c), maxContent)
		case seen[c]:
			return nil, fmt.Errorf("invalid todos: duplicate content %q", c)
		}
		switch t.Status {
		case "pending", "completed":
		case "in_progress":
			active++
		default:
			return nil, fmt.Errorf("invalid todo %d: status %q; want pending, in_progress or completed", i+1, t.Status)
		}
		seen[c] = true
		out = append(out, todo{Content: c, Status: t.Status})
	}
	if !cfg.AllowParallel && active > 1 {
		return nil, fmt.Errorf("invalid todos: at most one may be in_progress, and %d are", active)
	}
	return out, nil
}
