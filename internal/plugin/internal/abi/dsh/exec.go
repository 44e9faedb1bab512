package dsh

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/execjail"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

func execCommand(g *config.Grants, r hostfns.ExecRequest) (execjail.Command, hostfns.Status, string) {
	if (r.Command == "") == (len(r.Argv) == 0) {
		return execjail.Command{}, hostfns.ErrBadJSON, "set exactly one of command and argv"
	}
	timeout, err := g.Exec.CommandTimeout(time.Duration(r.TimeoutMs) * time.Millisecond)
	if err != nil {
		return execjail.Command{}, hostfns.ErrDenied, err.Error()
	}
	cmd := execjail.Command{Script: r.Command, Argv: r.Argv, Dir: r.Cwd, Timeout: timeout}
	if r.Stdin != "" {
		cmd.Stdin = []byte(r.Stdin)
	}
	return cmd, 0, ""
}

func execStatus(err error) (hostfns.Status, string) {
	switch {
	case errors.Is(err, execjail.ErrCwdOutsideRoots), errors.Is(err, execjail.ErrInvalidCwd):
		return hostfns.ErrDenied, err.Error()
	case errors.Is(err, execjail.ErrTooManyTasks):
		return hostfns.ErrLimit, err.Error()
	case errors.Is(err, execjail.ErrInvalidCommand):
		return hostfns.ErrBadJSON, err.Error()
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return hostfns.ErrCanceled, err.Error()
	}
	return hostfns.ErrInternal, err.Error()
}

func toExecResult(r execjail.Result) hostfns.ExecResult {
	out := func(o execjail.Output) hostfns.ExecOutput {
		if !o.Truncated {
			return hostfns.ExecOutput{Data: string(o.Data), Total: o.Total}
		}
		// Head and tail are made UTF-8 apart, so that OmittedAt still
		// marks the cut in the text the guest receives.
		at := min(max(o.OmittedAt, 0), len(o.Data))
		head := strings.ToValidUTF8(string(o.Data[:at]), "\uFFFD")
		tail := strings.ToValidUTF8(string(o.Data[at:]), "\uFFFD")
		return hostfns.ExecOutput{Data: head + tail, Truncated: true, OmittedAt: len(head), Omitted: o.Omitted, Total: o.Total}
	}
	return hostfns.ExecResult{ExitCode: r.ExitCode, Signal: r.Signal, TimedOut: r.TimedOut, Canceled: r.Canceled,
		OutOfMemory: r.OutOfMemory, Stdout: out(r.Stdout), Stderr: out(r.Stderr), DurationMs: r.Duration.Milliseconds()}
}

func toExecStatus(s execjail.Status) hostfns.ExecStatus {
	return hostfns.ExecStatus{ID: s.ID, Running: s.Running, Result: toExecResult(s.Result)}
}

// hostExec implements exec_run and exec_start: decode, check the grant,
// build the command, then run it with do.
func hostExec(do func(h Host, m *execjail.Manager, cmd execjail.Command, spill Spills) (any, error)) Impl {
	return func(h Host, req []byte) ([]byte, hostfns.Status, string) {
		var r hostfns.ExecRequest
		if st, msg := Decode(req, &r); st != 0 {
			return nil, st, msg
		}
		m, st, msg := h.ExecManager()
		if st != 0 {
			return nil, st, msg
		}
		cmd, st, msg := execCommand(h.Grants(), r)
		if st != 0 {
			return nil, st, msg
		}
		var spill Spills
		if r.SpillDir != "" {
			mounts, err := h.FSRoots()
			if err != nil {
				return nil, hostfns.ErrInternal, err.Error()
			}
			t, st, msg := SpillTargetFor(r.SpillDir, mounts, h.HostState)
			if st != 0 {
				return nil, st, msg
			}
			t.quota = h.DiskQuota() // saved output counts against the plugin's disk quota
			spill[0], spill[1] = NewSpillWriters(t, int(h.Grants().Exec.OutputBytes))
			cmd.StdoutTee, cmd.StderrTee = spill[0], spill[1]
		}
		resp, err := do(h, m, cmd, spill)
		if err != nil {
			st, msg := execStatus(err)
			return nil, st, msg
		}
		b, _ := json.Marshal(resp)
		return b, 0, ""
	}
}

// exec_run waits under the command's timeout (grants.exec), which bounds
// it, so the wait is left out of the compute budget, not out of the
// wall-clock cap; it ends when the call is stopped.
var hostExecRun = hostExec(func(h Host, m *execjail.Manager, cmd execjail.Command, spill Spills) (any, error) {
	ctx := h.BoundedWait()
	res, err := m.Run(ctx, cmd)
	h.EndBoundedWait()
	r := toExecResult(res)
	spill[0].result(&r.Stdout)
	spill[1].result(&r.Stderr)
	return r, err
})

// A background task outlives the call that started it, so it runs under
// the session's lifetime (Host.EndAgent), not the call's context.
var hostExecStart = hostExec(func(h Host, m *execjail.Manager, cmd execjail.Command, spill Spills) (any, error) {
	id, err := m.Start(context.WithoutCancel(h.Context()), cmd)
	if err == nil && spill[0] != nil {
		h.KeepSpills(id, spill)
	}
	return hostfns.ExecStatus{ID: id, Running: true}, err
})

// hostExecTask implements exec_poll (kill false) and exec_kill: a
// background task of the call's session, by id.
func hostExecTask(kill bool) Impl {
	return func(h Host, req []byte) ([]byte, hostfns.Status, string) {
		var r hostfns.TaskRequest
		if st, msg := Decode(req, &r); st != 0 {
			return nil, st, msg
		}
		m, st, msg := h.ExecManager()
		if st != 0 {
			return nil, st, msg
		}
		op := m.Poll
		if kill {
			op = m.Kill
		}
		s, err := op(r.ID)
		if err != nil {
			return nil, hostfns.ErrNotFound, err.Error()
		}
		status := toExecStatus(s)
		spill := h.Spills(r.ID)
		spill[0].result(&status.Result.Stdout)
		spill[1].result(&status.Result.Stderr)
		b, _ := json.Marshal(status)
		return b, 0, ""
	}
}
