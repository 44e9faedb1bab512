package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/execjail"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/fsjail"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/netguard"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/tetratelabs/wazero"
)

// SpecFromEntry turns a config entry into a Spec: the plugin's config,
// its limits, its environment and every grant. name may be empty.
func SpecFromEntry(name string, e config.Entry) (Spec, error) {
	if err := e.Validate(); err != nil {
		return Spec{}, err
	}
	e.ApplyDefaults()
	cfg, err := e.ConfigJSON()
	if err != nil {
		return Spec{}, err
	}
	g := e.Grants
	spec := Spec{
		Name: name, Source: e.Source, SHA256: e.SHA256, Config: cfg, Env: g.Env, Grants: &g, ABI: e.ABI,
		Limits: Limits{MemoryPages: g.Limits.MemoryPages(), CallTimeout: g.Limits.CallTimeout, InitTimeout: g.Limits.InitTimeout,
			WallTimeout: g.Limits.WallTimeout, HostBytes: int64(g.Limits.HostBytes), PromptBytes: int64(g.Limits.PromptBytes),
			LogBytes: int64(g.Limits.LogBytes), StateBytes: int64(g.Limits.StateBytes),
			NoSnapshot: g.Limits.Snapshot != nil && !*g.Limits.Snapshot},
	}
	return spec, nil
}

// checkGrants decides whether declared needs are covered by the grants.
func checkGrants(name string, g *config.Grants, c hostfns.Capabilities) error {
	return g.Check(name, c)
}

// sandbox holds what a plugin's grants give it at run time.
type sandbox struct {
	grants *config.Grants
	net    *netguard.Fetcher
	// quota bounds what the plugin adds to the disk, through every jail
	// of its instances and through files the host writes for it.
	quota *fsjail.Quota
}

func (p *Plugin) openSandbox() error {
	g := p.spec.Grants
	if g == nil {
		return nil
	}
	p.sandbox.grants = g
	if len(g.FS) > 0 {
		p.sandbox.quota = fsjail.NewQuota(g.Limits.DiskQuota())
	}
	if len(g.Net.AllowedHosts) > 0 {
		f, err := netguard.New(netguard.Options{AllowedHosts: g.Net.AllowedHosts,
			MaxResponseBytes: int64(g.Net.ResponseBytes), AllowPrivateAddresses: g.Net.AllowPrivate, Timeout: g.Net.Timeout})
		if err != nil {
			return fmt.Errorf("grants.net: %w", err)
		}
		p.sandbox.net = f
	}
	return nil
}

func (p *Plugin) closeSandbox() {
	if p.sandbox.net != nil {
		p.sandbox.net.Close()
	}
	p.mu.Lock()
	mgrs := p.execs
	p.execs = nil
	p.mu.Unlock()
	for _, m := range mgrs {
		m.Close()
	}
}

// fsRoots resolves the fs grants for an agent; "workspace" is its cwd and
// is left out when the agent has none (the load-time instance, say).
func (p *Plugin) fsRoots(facts *prompt.AgentFacts) ([]fsjail.Mount, error) {
	g := p.sandbox.grants
	if g == nil {
		return nil, nil
	}
	var mounts []fsjail.Mount
	for _, fg := range g.FS {
		cwd := ""
		if facts != nil {
			cwd = facts.Cwd
		}
		if fg.Path == config.Workspace && cwd == "" {
			continue
		}
		host, err := fg.Resolve(cwd)
		if err != nil {
			return nil, fmt.Errorf("grants.fs %q: %w", fg.Path, err)
		}
		host = filepath.Clean(host)
		if slices.ContainsFunc(mounts, func(m fsjail.Mount) bool { return m.HostPath == host }) {
			continue
		}
		// The guest sees each root at its own host path, so the absolute
		// paths a model uses mean the same inside and out.
		mounts = append(mounts, fsjail.Mount{HostPath: host, GuestPath: host, ReadOnly: fg.Mode != config.ModeRW})
	}
	return mounts, nil
}

// jailFor builds the filesystem an instance sees, or nil without fs grants.
func (p *Plugin) jailFor(facts *prompt.AgentFacts) (*fsjail.Jail, error) {
	mounts, err := p.fsRoots(facts)
	if err != nil || len(mounts) == 0 {
		return nil, err
	}
	j, err := fsjail.New(mounts, fsjail.WithQuota(p.sandbox.quota))
	if err != nil {
		return nil, fmt.Errorf("grants.fs: %w", err)
	}
	return j, nil
}

// diskQuota is the plugin's disk quota (grants.limits.disk_bytes and
// disk_files), or nil without fs grants. Host code that writes a file for
// the plugin, such as saved command output, charges it here first.
func (p *Plugin) diskQuota() *fsjail.Quota { return p.sandbox.quota }

func withJail(cfg wazero.ModuleConfig, j *fsjail.Jail) wazero.ModuleConfig {
	if j == nil {
		return cfg
	}
	return cfg.WithFSConfig(j.FSConfig())
}

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
		roots[i] = execjail.Root{Path: m.HostPath, Writable: !m.ReadOnly}
	}
	m, err := execjail.NewManager(execjail.Options{Roots: roots, Env: g.Exec.Environ(os.LookupEnv),
		OutputBytes: int(g.Exec.OutputBytes), Sandbox: g.Exec.Sandbox, Network: len(g.Net.AllowedHosts) > 0,
		Limits: execLimits(g.Exec)})
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
		if st, msg := decode(req, &r); st != 0 {
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
			t, st, msg := spillTargetFor(r.SpillDir, mounts)
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

// boundedWait starts a wait another grant bounds (an exec timeout, the net
// timeout; later a subagent's own budget): it is left out of the compute
// budget, except in dsh_init and dsh_setup, whose budget counts every
// wait. It returns the context to wait under, which ends when the call is
// stopped. Pair it with endBoundedWait.
func (cs *callState) boundedWait() context.Context {
	if !cs.init && !cs.setup {
		cs.guard.beginWait()
	}
	return cs.guard.hostCtx()
}

func (cs *callState) endBoundedWait() {
	if !cs.init && !cs.setup {
		cs.guard.endWait()
	}
}

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

func hostExecTask(kill bool) hostImpl {
	return func(in *instance, cs *callState, req []byte) ([]byte, hostfns.Status, string) {
		var r hostfns.TaskRequest
		if st, msg := decode(req, &r); st != 0 {
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

func hostHTTPRequest(in *instance, cs *callState, req []byte) ([]byte, hostfns.Status, string) {
	var r hostfns.HTTPRequest
	if st, msg := decode(req, &r); st != 0 {
		return nil, st, msg
	}
	f := in.p.sandbox.net
	if f == nil {
		return nil, hostfns.ErrDenied, fmt.Sprintf("plugin %q is not granted network access (grants.net.allowed_hosts)", in.p.name)
	}
	// grants.net.timeout bounds the request, so its wait is left out of
	// the compute budget (not the wall-clock cap).
	ctx := cs.boundedWait()
	resp, err := f.Fetch(ctx, netguard.Request{Method: r.Method, URL: r.URL, Headers: r.Headers, Body: r.Body, BodyBase64: r.BodyBase64})
	cs.endBoundedWait()
	if err != nil {
		switch {
		case errors.Is(err, netguard.ErrHostNotAllowed), errors.Is(err, netguard.ErrSchemeNotAllowed),
			errors.Is(err, netguard.ErrPrivateAddress):
			return nil, hostfns.ErrDenied, err.Error()
		case errors.Is(err, netguard.ErrTooManyRedirects):
			return nil, hostfns.ErrLimit, err.Error()
		case errors.Is(err, netguard.ErrInvalidRequest):
			return nil, hostfns.ErrBadJSON, err.Error()
		case errors.Is(err, netguard.ErrRequestTooLarge):
			return nil, hostfns.ErrTooLarge, err.Error()
		case errors.Is(err, context.Canceled):
			return nil, hostfns.ErrCanceled, err.Error()
		case errors.Is(err, context.DeadlineExceeded):
			return nil, hostfns.ErrTimeout, err.Error()
		}
		return nil, hostfns.ErrInternal, err.Error()
	}
	b, _ := json.Marshal(hostfns.HTTPResponse{Status: resp.Status, URL: resp.URL, Headers: resp.Headers,
		Body: resp.Body, BodyBase64: resp.BodyBase64, Truncated: resp.Truncated})
	return b, 0, ""
}

// ExecEnforcement says what commands run under an exec grant are held to on
// this system: the kill mode, and for each resource limit whether and by
// what it is enforced.
type ExecEnforcement = execjail.Enforcement

// ExecEnforced reports what commands are held to on this system with the
// default exec limits. `dsh-wasm plugin inspect` prints it.
func ExecEnforced() ExecEnforcement { return execjail.Enforced() }
