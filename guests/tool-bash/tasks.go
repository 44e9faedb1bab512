//go:build wasip1

package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/hostfns/guest"
)

// task is a background command as the session's state keeps it: the
// host's id for it and how much of each stream bash_output has shown.
type task struct {
	HostID    string `json:"id"`
	TimeoutMs int64  `json:"timeout"`
	Cwd       string `json:"cwd,omitempty"`
	Out       int64  `json:"out"`
	Err       int64  `json:"err"`
}

// tasks is the plugin's state key for the session's background tasks:
// they outlive the instance that started them.
const tasksKey = "tasks"

type taskTable struct {
	Next  int             `json:"next"`
	Tasks map[string]task `json:"tasks"`
}

func loadTasks() (taskTable, error) {
	var t taskTable
	if _, err := guest.StateGet(tasksKey, &t); err != nil {
		return t, fmt.Errorf("reading the session's tasks: %w", err)
	}
	if t.Tasks == nil {
		t.Tasks = map[string]task{}
	}
	return t, nil
}

func (t taskTable) save() error {
	if err := guest.StateSet(tasksKey, t); err != nil {
		return fmt.Errorf("recording the session's tasks: %w", err)
	}
	return nil
}

func startTask(req hostfns.ExecRequest, out *guest.Result) error {
	table, err := loadTasks()
	if err != nil {
		return err
	}
	st, err := guest.ExecStart(req)
	if spillRefused(err) {
		req.SpillDir = ""
		st, err = guest.ExecStart(req)
	}
	if err != nil {
		return err
	}
	table.Next++
	id := "bash-" + strconv.Itoa(table.Next)
	table.Tasks[id] = task{HostID: st.ID, TimeoutMs: req.TimeoutMs, Cwd: req.Cwd}
	if err := table.save(); err != nil {
		return err
	}
	fmt.Fprintf(out, "started background task %s", id)
	return nil
}

func lookupTask(args *guest.Args) (taskTable, string, task, error) {
	id, err := args.String("task_id")
	if err != nil {
		return taskTable{}, "", task{}, err
	}
	table, err := loadTasks()
	if err != nil {
		return table, id, task{}, err
	}
	t, ok := table.Tasks[id]
	if !ok {
		known := make([]string, 0, len(table.Tasks))
		for k := range table.Tasks {
			known = append(known, k)
		}
		if len(known) == 0 {
			return table, id, t, fmt.Errorf("no background task %q: this session started none", id)
		}
		return table, id, t, fmt.Errorf("no background task %q in this session", id)
	}
	return table, id, t, nil
}

func outputTool(ctx guest.Context, args *guest.Args, out *guest.Result) error {
	table, id, t, err := lookupTask(args)
	if err != nil {
		return err
	}
	st, err := guest.ExecPoll(t.HostID)
	if err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	return report(table, id, t, st, out, false)
}

func killTool(ctx guest.Context, args *guest.Args, out *guest.Result) error {
	table, id, t, err := lookupTask(args)
	if err != nil {
		return err
	}
	st, err := guest.ExecKill(t.HostID)
	if err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	return report(table, id, t, st, out, true)
}

// report writes what the task wrote since the last report and its status,
// and records how far it has shown.
func report(table taskTable, id string, t task, st hostfns.ExecStatus, out *guest.Result, killed bool) error {
	r := st.Result
	body := newOutput(r.Stdout, t.Out, t.Cwd)
	if e := newOutput(r.Stderr, t.Err, t.Cwd); e != "" {
		if body != "" && !strings.HasSuffix(body, "\n") {
			body += "\n"
		}
		body += "[stderr]\n" + e
	}
	if body == "" {
		body = "(no new output)"
	}
	if !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	out.WriteString(body)
	switch {
	case st.Running:
		fmt.Fprintf(out, "[task %s: running]", id)
	case killed:
		fmt.Fprintf(out, "[task %s: killed]", id)
	default:
		fmt.Fprintf(out, "[task %s: finished]", id)
		r.Canceled = false
		if m := endMarkers(r, t.TimeoutMs); len(m) > 0 {
			out.WriteString("\n" + strings.Join(m, "\n"))
		}
	}
	t.Out, t.Err = r.Stdout.Total, r.Stderr.Total
	table.Tasks[id] = t
	return table.save()
}

// newOutput is the part of a stream written after the first shown bytes:
// the end of what the host kept, with a marker when some of it was
// dropped.
func newOutput(o hostfns.ExecOutput, shown int64, cwd string) string {
	fresh := o.Total - shown
	if fresh <= 0 {
		return ""
	}
	if !o.Truncated || fresh <= int64(len(o.Data)-o.OmittedAt) {
		n := min(int(fresh), len(o.Data))
		return o.Data[len(o.Data)-n:]
	}
	// Part of the new output fell in the dropped middle.
	tail := o.Data[o.OmittedAt:]
	dropped := fresh - int64(len(tail))
	where := ""
	if o.SpillPath != "" {
		where = "; full output: " + shownPath(o.SpillPath, cwd)
	}
	head := ""
	if shown < int64(o.OmittedAt) {
		head = o.Data[shown:o.OmittedAt]
		dropped -= int64(len(head))
		if !strings.HasSuffix(head, "\n") {
			head += "\n"
		}
	}
	return fmt.Sprintf("%s[output truncated: %d bytes omitted%s]\n%s", head, dropped, where, tail)
}
