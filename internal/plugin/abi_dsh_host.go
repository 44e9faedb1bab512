package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/abi/dsh"
	"github.com/dsh-wasm/dsh-wasm/internal/pluginstate"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/execjail"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/fsjail"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/netguard"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/tetratelabs/wazero/api"
)

// dshHost is an instance seen by the dsh:host/v1 implementations
// (dsh.Host), for the call in progress (in.cur): a pointer conversion,
// no allocation per host call.
type dshHost instance

var _ dsh.Host = (*dshHost)(nil)

func (h *dshHost) in() *instance { return (*instance)(h) }

// The call in progress.

func (h *dshHost) Context() context.Context { return h.cur.ctx }
func (h *dshHost) Call() dsh.Call {
	return dsh.Call{Init: h.cur.init, Setup: h.cur.setup, Export: h.cur.export, LoadTime: h.loadTime}
}
func (h *dshHost) Memory() api.Memory           { return h.mem }
func (h *dshHost) ChargeHost(n int64) bool      { return h.cur.chargeHost(h.p, n) }
func (h *dshHost) Facts() *prompt.AgentFacts    { return h.cur.facts }
func (h *dshHost) Scope() string                { return stateScope(h.cur) }
func (h *dshHost) Stopped() error               { return h.cur.guard.Stopped() }
func (h *dshHost) BoundedWait() context.Context { return h.cur.boundedWait() }
func (h *dshHost) EndBoundedWait()              { h.cur.endBoundedWait() }
func (h *dshHost) Scratch() *dsh.Scratch        { return &h.scratch }
func (h *dshHost) CallSubagents() dsh.Subagents { return subagentsOf(h.cur.ctx) }
func (h *dshHost) Emit(event string, payload json.RawMessage) error {
	err := h.p.h.bus.Emit(h.cur.activeCtx(h.in()), event, payload)
	if errors.Is(err, ErrDeadlock) {
		return &dsh.DeniedError{Err: err}
	}
	return err
}

func (h *dshHost) StartSubagentRun(max int) bool {
	if h.cur.subagentRuns >= max {
		return false
	}
	h.cur.subagentRuns++
	return true
}

// The plugin.

func (h *dshHost) Name() string { return h.p.name }
func (h *dshHost) Limits() dsh.Limits {
	l := h.p.limits
	return dsh.Limits{MaxRegistrations: l.MaxRegistrations, StateBytes: l.StateBytes, HostBytes: l.HostBytes, PromptBytes: l.PromptBytes}
}
func (h *dshHost) Grants() *config.Grants { return h.p.sandbox.grants }
func (h *dshHost) EnvGranted(name string) bool {
	return name != "" && slices.Contains(h.p.grants().Env, name)
}
func (h *dshHost) Logger() *slog.Logger                       { return h.p.log }
func (h *dshHost) RateLog(n int, log func())                  { h.p.rateLog(n, log) }
func (h *dshHost) HasExport(name string) bool                 { return h.p.exports[name] }
func (h *dshHost) DeclareCapabilities(c hostfns.Capabilities) { h.p.contrib.addCapabilities(c) }
func (h *dshHost) CheckSectionOrder(name string, order int) error {
	return h.p.checkSectionOrder(name, order)
}
func (h *dshHost) CheckWaterfallGrant(event string) error { return h.p.checkWaterfallGrant(event) }
func (h *dshHost) State() pluginstate.Store               { return h.p.h.state }
func (h *dshHost) ExecManager() (*execjail.Manager, hostfns.Status, string) {
	return h.p.execManager(h.cur)
}
func (h *dshHost) FSRoots() ([]fsjail.Mount, error) { return h.p.fsRoots(h.cur.facts) }
func (h *dshHost) HostState(path string) string {
	return h.p.h.hostState.holding(path, cwdOf(h.cur.facts))
}
func (h *dshHost) DiskQuota() *fsjail.Quota { return h.p.diskQuota() }
func (h *dshHost) Net() *netguard.Fetcher   { return h.p.sandbox.net }
func (h *dshHost) Subagents() dsh.Subagents {
	if s := h.p.h.subagents; s != nil {
		return s
	}
	return nil
}

// KeepSpills keeps a background task's spill writers until its session
// ends (endExecScope).
func (h *dshHost) KeepSpills(id string, s dsh.Spills) {
	p := h.p
	p.mu.Lock()
	if p.spills == nil {
		p.spills = map[string]dsh.Spills{}
	}
	p.spills[stateScope(h.cur)+"\x00"+id] = s
	p.mu.Unlock()
}

func (h *dshHost) Spills(id string) dsh.Spills {
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	return h.p.spills[stateScope(h.cur)+"\x00"+id]
}

// SessionQuota is the quota of the call's session, made on first use.
func (h *dshHost) SessionQuota() *dsh.SessionQuota {
	p, scope := h.p, stateScope(h.cur)
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.appended[scope]
	if q == nil {
		if p.appended == nil {
			p.appended = map[string]*dsh.SessionQuota{}
		}
		q = &dsh.SessionQuota{}
		p.appended[scope] = q
	}
	return q
}

// The contribution: the registry's side of the registering functions.

func (h *dshHost) RegisterSection(s prompt.Section, dynamic bool) (hostfns.Status, string) {
	p := h.p
	if dynamic {
		name := s.Name
		s.Dynamic = func(ctx context.Context, ac prompt.AssembleContext) (string, error) {
			return p.sectionText(ctx, ac, name)
		}
	}
	_, st, msg := p.contrib.register(h.cur, sectionReg(s))
	return st, msg
}

func (h *dshHost) RegisterVariable(name string) (hostfns.Status, string) {
	p := h.p
	fn := func(ctx context.Context, ac prompt.AssembleContext) (string, bool, error) {
		return p.variableValue(ctx, ac, name)
	}
	_, st, msg := p.contrib.register(h.cur, variableReg(name, fn))
	return st, msg
}

func (h *dshHost) RegisterTool(t prompt.Tool) (hostfns.Status, string) {
	_, st, msg := h.p.contrib.register(h.cur, toolReg(t))
	return st, msg
}

// Subscribe records a checked subscription, once per event, within the
// plugin's registrations; the assemble waterfall is joined with a hook.
func (h *dshHost) Subscribe(r hostfns.SubscribeRequest) (hostfns.Status, string) {
	p, c := h.p, h.p.contrib
	c.mu.Lock()
	dup := slices.ContainsFunc(c.subs, func(s hostfns.SubscribeRequest) bool { return s.Event == r.Event })
	c.mu.Unlock()
	if dup {
		return hostfns.ErrRule, fmt.Sprintf("already subscribed to %s", r.Event)
	}
	if r.Event == events.EventAssemble {
		hook := func(ctx context.Context, ac prompt.AssembleContext, next prompt.AssembleFunc) (*prompt.Assembly, error) {
			a, err := next(ctx, ac)
			if err != nil {
				return nil, err
			}
			return p.assembleHook(ctx, ac, a)
		}
		_, st, msg := c.register(h.cur, hookReg(r.Event, hook))
		if st != 0 {
			return st, msg
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.subs {
		if s.Event == r.Event {
			return hostfns.ErrRule, fmt.Sprintf("already subscribed to %s", r.Event)
		}
	}
	if r.Event != events.EventAssemble && c.count() >= p.limits.MaxRegistrations {
		return hostfns.ErrLimit, fmt.Sprintf("plugin %q reached its limit of %d registrations", p.name, p.limits.MaxRegistrations)
	}
	c.subs = append(c.subs, r)
	return 0, ""
}

// Unregister removes a registration of kind the plugin itself made.
func (h *dshHost) Unregister(kind, name string) (hostfns.Status, string) {
	p, c := h.p, h.p.contrib
	errNotOwn := fmt.Errorf("plugin %q registered no %s %q", p.name, kind, name)
	err := c.withTx(h.cur, func(tx *prompt.Tx) error {
		i := c.find(kind, name)
		if i < 0 {
			return errNotOwn
		}
		if err := c.regs[i].d.Tx(tx); err != nil {
			return err
		}
		c.static -= c.regs[i].promptBytes()
		c.regs = append(c.regs[:i], c.regs[i+1:]...)
		return nil
	})
	switch {
	case err == nil:
		return 0, ""
	case errors.Is(err, errNotOwn):
		return hostfns.ErrNotFound, err.Error()
	}
	return registrationStatus(err, p.name, p.limits.MaxRegistrations)
}

// stateScope is the session a call's state belongs to; calls that belong
// to no agent share the plugin-wide scope "".
func stateScope(cs *callState) string {
	if cs.facts == nil {
		return ""
	}
	if cs.facts.Session != "" {
		return cs.facts.Session
	}
	return "agent:" + cs.facts.ID
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
