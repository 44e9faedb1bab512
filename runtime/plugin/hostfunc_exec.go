package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/execjail"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/plugin/internal/abi/dsh"
)

// execManager returns the exec manager of a call's session, creating it.
// Background tasks belong to the session, not to an instance, so a
// re-created instance still reaches them.
func (p *Plugin) execManager(cs *callState) (*execjail.Manager, hostfns.Status, string) {
	g := p.sandbox.grants
	if g == nil || !g.Exec.Allowed {
		return nil, hostfns.ErrDenied, fmt.Sprintf("plugin %q is not granted exec (add under grants.exec: allowed: true)", p.name)
	}
	scope := stateScope(cs)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, hostfns.ErrDenied, "plugin unloaded"
	}
	if m := p.execs[scope]; m != nil {
		return m, 0, ""
	}
	mounts, err := p.fsRoots(cs.facts)
	if err != nil {
		return nil, hostfns.ErrInternal, err.Error()
	}
	if len(mounts) == 0 {
		return nil, hostfns.ErrDenied, "exec needs a granted fs root to run in (grants.fs), and this call has none"
	}
	roots := make([]execjail.Root, len(mounts))
	for i, m := range mounts {
		roots[i] = execjail.Root{Path: m.HostPath, Writable: !m.ReadOnly, Dir: m.Dir}
	}
	m, err := execjail.NewManager(execjail.Options{Roots: roots, Env: g.Exec.Environ(os.LookupEnv),
		OutputBytes: int(g.Exec.OutputBytes), Sandbox: g.Exec.Sandbox, Network: len(g.Net.AllowedHosts) > 0,
		Limits: execLimits(g.Exec), Hidden: p.hiddenFor(cs.facts, mounts)})
	if err != nil {
		return nil, hostfns.ErrInternal, err.Error()
	}
	if p.execs == nil {
		p.execs = map[string]*execjail.Manager{}
	}
	p.execs[scope] = m
	return m, 0, ""
}

// execLimits maps the exec grant's limits (zero: the defaults) onto
// execjail's.
func execLimits(e config.ExecGrant) execjail.Limits {
	return execjail.Limits{Processes: e.MaxProcesses, Memory: int64(e.Memory), FileBytes: int64(e.FileBytes)}
}

func (p *Plugin) endExecScope(scope string) {
	p.mu.Lock()
	m := p.execs[scope]
	delete(p.execs, scope)
	for k := range p.spills {
		if strings.HasPrefix(k, scope+"\x00") {
			delete(p.spills, k)
		}
	}
	p.mu.Unlock()
	if m != nil {
		m.Close()
	}
}

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
func hostExec(do func(p *Plugin, m *execjail.Manager, cs *callState, cmd execjail.Command, spill [2]*spillWriter) (any, error)) hostImpl {
	return func(in *instance, cs *callState, req []byte) ([]byte, hostfns.Status, string) {
		var r hostfns.ExecRequest
		if st, msg := dsh.Decode(req, &r); st != 0 {
			return nil, st, msg
		}
		m, st, msg := in.p.execManager(cs)
		if st != 0 {
			return nil, st, msg
		}
		cmd, st, msg := execCommand(in.p.sandbox.grants, r)
		if st != 0 {
			return nil, st, msg
		}
		var spill [2]*spillWriter
		if r.SpillDir != "" {
			mounts, err := in.p.fsRoots(cs.facts)
			if err != nil {
				return nil, hostfns.ErrInternal, err.Error()
			}
			t, st, msg := spillTargetFor(r.SpillDir, mounts, func(p string) string { return in.p.h.hostState.holding(p, cwdOf(cs.facts)) })
			if st != 0 {
				return nil, st, msg
			}
			t.quota = in.p.diskQuota() // saved output counts against the plugin's disk quota
			spill[0], spill[1] = newSpillWriters(t, int(in.p.sandbox.grants.Exec.OutputBytes))
			cmd.StdoutTee, cmd.StderrTee = spill[0], spill[1]
		}
		resp, err := do(in.p, m, cs, cmd, spill)
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
var hostExecRun = hostExec(func(_ *Plugin, m *execjail.Manager, cs *callState, cmd execjail.Command, spill [2]*spillWriter) (any, error) {
	ctx := cs.boundedWait()
	res, err := m.Run(ctx, cmd)
	cs.endBoundedWait()
	r := toExecResult(res)
	spill[0].result(&r.Stdout)
	spill[1].result(&r.Stderr)
	return r, err
})

// A background task outlives the call that started it, so it runs under
// the session's lifetime (Host.EndAgent), not the call's context.
var hostExecStart = hostExec(func(p *Plugin, m *execjail.Manager, cs *callState, cmd execjail.Command, spill [2]*spillWriter) (any, error) {
	id, err := m.Start(context.WithoutCancel(cs.ctx), cmd)
	if err == nil && spill[0] != nil {
		p.mu.Lock()
		if p.spills == nil {
			p.spills = map[string][2]*spillWriter{}
		}
		p.spills[stateScope(cs)+"\x00"+id] = spill
		p.mu.Unlock()
	}
	return hostfns.ExecStatus{ID: id, Running: true}, err
})

// hostExecTask implements exec_poll (kill false) and exec_kill: a
// background task of the call's session, by id.
func hostExecTask(kill bool) hostImpl {
	return func(in *instance, cs *callState, req []byte) ([]byte, hostfns.Status, string) {
		var r hostfns.TaskRequest
		if st, msg := dsh.Decode(req, &r); st != 0 {
			return nil, st, msg
		}
		m, st, msg := in.p.execManager(cs)
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
		in.p.mu.Lock()
		spill := in.p.spills[stateScope(cs)+"\x00"+r.ID]
		in.p.mu.Unlock()
		spill[0].result(&status.Result.Stdout)
		spill[1].result(&status.Result.Stderr)
		b, _ := json.Marshal(status)
		return b, 0, ""
	}
}
