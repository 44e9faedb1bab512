package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/abi/dsh"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/image"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/interrupt"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/lazy"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/execjail"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// Plugin is one loaded plugin.
type Plugin struct {
	h       *Host
	name    string
	source  string
	digest  string
	spec    Spec
	limits  runLimits
	config  []byte
	log     *slog.Logger
	rt      wazero.Runtime
	module  wazero.CompiledModule
	exports map[string]bool
	// abi is the module's ABI ("" until detected, then ABIDsh or a
	// community ABI). Community plugins run on the Extism kernel below.
	abi       string
	kernel    wazero.CompiledModule
	extConfig map[string]string
	reqID     atomic.Int64
	// interruptible: the module was instrumented with an interrupt flag.
	interruptible bool
	// prepared: the module was prepared for images (interrupt.PrepareSnapshot);
	// snapshots: images are captured and used (prepared, and not opted out).
	prepared, snapshots bool
	snapGlobals         []string
	images              image.Set
	// mapFresh: instances that start fresh (no image yet) get their memory
	// from the image allocator too, reserved at its maximum, so that the
	// initialiser's growth copies nothing (see instantiateContext).
	mapFresh bool
	// byModule maps each open instance's module to the instance, for
	// host functions, which are told the calling module.
	byModule sync.Map

	// A lazy load (manifest.go): key is the plugin's manifest key ("" when
	// it may not load lazily); manifest, when set, is what it registered
	// from; src is kept until compile needs it. compiled is set once the
	// module is (at once for an eager load); compileMu is held while it
	// compiles, and by whoever closes the runtime, which sets rtClosed.
	key       string
	manifest  *lazy.Manifest
	src       *moduleSource
	compiled  atomic.Bool
	compileMu sync.Mutex
	rtClosed  bool
	closing   atomic.Bool // closeRuntime was called
	// users counts who is making an instance or using one that no agent
	// slot or p.load owns (a repeats check): close stops new ones and
	// waits for these, and the runtime closes after the last lets go.
	users    runtimeUsers
	broken   error          // why the module cannot be compiled (guarded by compileMu)
	recorded *lazy.Manifest // what the last dsh_init recorded, written once committed
	// history is the load-time instance's, while every call in it can be
	// answered again (manifest.go); saved is the manifest this process
	// recorded, while it goes on recording events into it; eventsUsed
	// counts the manifest's events replayed. All guarded by mu.
	history    *lazy.History
	saved      *lazy.Manifest
	eventsUsed int

	contrib *contrib
	logs    logRate // Limits.LogBytes
	// halted, once set by haltAll, stops every call of the plugin as it
	// starts: it is being unloaded or its host closed.
	halted atomic.Pointer[error]

	mu         sync.Mutex
	loadCreate sync.Mutex // held while the load-time instance is re-created
	load       *instance
	agents     map[string]*agentSlot
	offs       []func()
	sandbox    sandbox
	execs      map[string]*execjail.Manager // by session scope
	appended   map[string]*dsh.SessionQuota // session events appended, by session scope
	spills     map[string]dsh.Spills        // background tasks' spill files, by scope NUL task id
	active     bool
	closed     bool
	initing    bool
}

type agentSlot struct {
	facts *prompt.AgentFacts
	ready chan struct{}
	inst  *instance
	err   error
}

// Name is the plugin's name.
func (p *Plugin) Name() string { return p.name }

// Digest is the sha256 of the plugin's module, in hex.
func (p *Plugin) Digest() string { return p.digest }

// Source is where the plugin was loaded from.
func (p *Plugin) Source() string { return p.source }

// Capabilities returns what the plugin declared it needs.
func (p *Plugin) Capabilities() hostfns.Capabilities { return p.contrib.capabilities() }

// Contribution lists what the plugin registered.
func (p *Plugin) Contribution() Contribution { return p.contrib.snapshot() }

// prepare reads and verifies the module, and compiles it and creates its
// runtime, unless it may load lazily from a manifest the cache holds.
func (h *Host) prepare(ctx context.Context, name string, spec Spec) (_ *Plugin, err error) {
	if spec.Grants != nil {
		// The rules a deployment file's grants are decoded with.
		if err := spec.Grants.Validate(); err != nil {
			return nil, err
		}
	}
	src, err := h.readSource(spec.Source, spec.SHA256)
	if err != nil {
		return nil, err
	}
	cfg := spec.Config
	if len(cfg) == 0 {
		cfg = []byte("{}")
	} else if !json.Valid(cfg) {
		return nil, fmt.Errorf("%w: config is not valid JSON", ErrSource)
	}
	eff := spec.effectiveGrants()
	if spec.Grants != nil {
		spec.Grants = &eff
	}
	p := &Plugin{h: h, name: name, source: spec.Source, digest: src.digest, spec: spec,
		limits: limitsOf(eff), config: cfg, agents: map[string]*agentSlot{},
		log: h.log.With("plugin", name), src: src}
	p.contrib = newContrib(p)
	if err := p.openSandbox(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			p.closeSandbox()
		}
	}()
	if h.lazyEligible(spec) {
		if p.key, err = p.manifestKey(); err != nil {
			return nil, err
		}
		if m, ok := h.cache.readManifest(p.key); ok {
			p.src = src.forgetBytes(spec.Source)
			p.manifest, p.abi, p.exports = m, ABIDsh, map[string]bool{}
			for _, e := range m.Exports {
				p.exports[e] = true
			}
			return p, nil
		}
	}
	if err := p.compile(ctx); err != nil {
		return nil, err
	}
	p.src = nil
	p.compiled.Store(true)
	return p, nil
}

// compile rewrites the module for interruption (from the cache when it can),
// creates the plugin's runtime and compiles the module in it. A plugin
// that registered from a manifest must turn out to be the module the
// manifest describes: a dsh:host/v1 plugin with the same exports.
func (p *Plugin) compile(ctx context.Context) (err error) {
	h, src := p.h, p.src
	var b []byte // the module to compile
	if p.spec.noInterrupt {
		// wazero's own termination checks, below.
	} else if ib, release, err := h.cache.mod().InstrumentSource(src.digest, src.bytes); err == nil {
		// wazero copies what it keeps of the module: the bytes are not
		// needed past CompileModule.
		defer release()
		b, p.interruptible = ib, true
		p.snapGlobals, p.prepared = interrupt.SnapshotExports(b)
		p.snapshots = p.prepared && !p.limits.NoSnapshot
	} else if errors.Is(err, interrupt.ErrUnsupported) {
		p.log.Warn("cannot instrument the module for interruption; falling back to wazero's slower per-call checks", "err", err)
	}
	if b == nil {
		if b, err = src.bytes(); err != nil {
			return err
		}
	}
	rcfg := h.cache.mod().RuntimeConfig(!p.interruptible).WithMemoryLimitPages(p.limits.MemoryPages)
	p.rt = wazero.NewRuntimeWithConfig(ctx, rcfg)
	defer func() {
		if err != nil {
			p.rt.Close(ctx)
			p.rt = nil
		}
	}()
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, p.rt); err != nil {
		return fmt.Errorf("instantiate WASI: %w", err)
	}
	if err := p.instantiateHostModule(ctx); err != nil {
		return fmt.Errorf("instantiate %s: %w", hostfns.Module, err)
	}
	if p.module, err = p.rt.CompileModule(ctx, b); err != nil {
		return fmt.Errorf("%w: compile: %w", ErrABI, err)
	}
	abi, err := p.detectABI()
	if err != nil {
		return err
	}
	if p.manifest != nil {
		// Checked as dsh:host/v1 whatever it turned out to be: a manifest
		// is only ever recorded for one.
		exports, err := abis[ABIDsh].prepare(ctx, p, b)
		if err != nil {
			return err
		}
		if abi != ABIDsh || !maps.Equal(exports, p.exports) {
			return fmt.Errorf("%w: the module is not the one its manifest describes (ABI %s, exports %v)", ErrABI, abi, slices.Sorted(maps.Keys(exports)))
		}
		return nil
	}
	p.abi = abi
	p.exports, err = p.kind().prepare(ctx, p, b)
	return err
}

func typeNames(ts []api.ValueType) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = api.ValueTypeName(t)
	}
	return out
}

// runInit creates the load-time instance and runs dsh_init inside tx, or
// replays the manifest's dsh_init (manifest.go). A dsh_init that may be
// recorded for a later lazy load is; p.recorded is then its manifest.
func (p *Plugin) runInit(ctx context.Context, tx *prompt.Tx) error {
	if p.manifest != nil {
		return p.replayInit(ctx, tx)
	}
	p.mu.Lock()
	p.initing, p.recorded, p.history = true, nil, nil
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.initing = false
		p.mu.Unlock()
	}()
	inst, err := p.newInstance(ctx, true, nil)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.load = inst
	p.mu.Unlock()
	p.contrib.reset()
	return p.kind().init(ctx, p, tx, inst)
}

func (p *Plugin) checkNeeds() error {
	caps := p.Capabilities()
	check := p.spec.checkNeeds
	if check == nil && p.spec.Grants != nil {
		check = func(c hostfns.Capabilities) error { return checkGrants(p.name, p.spec.Grants, c) }
	}
	if check != nil {
		if err := check(caps); err != nil {
			return fmt.Errorf("%w: %w", ErrNotGranted, err)
		}
		return nil
	}
	if len(caps.FS) > 0 || caps.Exec || len(caps.Net) > 0 || len(caps.Env) > 0 || len(caps.SessionEvents) > 0 {
		return fmt.Errorf("%w: the plugin declares needs %s and its config grants nothing", ErrNotGranted, mustJSON(caps))
	}
	return nil
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// activate subscribes the plugin's event handlers once its contribution is
// committed.
func (p *Plugin) activate() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.active = true
	for _, s := range p.contrib.subscriptions() {
		if s.Event == events.EventAssemble {
			continue // an assemble hook, registered with the contribution
		}
		ev := s.Event
		var off func()
		var err error
		if s.Mode == hostfns.ModeWaterfall {
			off, err = p.h.bus.OnWaterfall(ev, "plugin:"+p.name, func(ctx context.Context, payload any) (any, error) {
				return p.waterfallEvent(ctx, ev, payload)
			})
		} else {
			off, err = p.h.bus.On(ev, "plugin:"+p.name, func(ctx context.Context, payload any) error {
				_, err := p.callEvent(ctx, ev, payload)
				return err
			})
		}
		if err != nil {
			p.log.Warn("subscription refused by the event bus", "event", ev, "err", err)
			continue
		}
		p.offs = append(p.offs, off)
	}
}

func (p *Plugin) deactivate() {
	p.mu.Lock()
	offs := p.offs
	p.offs, p.active = nil, false
	p.mu.Unlock()
	for _, off := range offs {
		off()
	}
}

// close stops every call in progress (for why), kills the plugin's
// commands, and closes every instance and the runtime. It waits for
// nothing longer than closeWait: a call that has not let go by then (it
// has been told to stop) closes its instance when it does, and the
// runtime closes after the last one.
func (p *Plugin) close(why error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	insts := []*instance{}
	if p.load != nil {
		insts = append(insts, p.load)
	}
	slots := p.agents
	p.agents = map[string]*agentSlot{}
	p.mu.Unlock()
	// No one makes an instance from now on. Stop every call, so that they
	// all wind down together, then kill the commands they may be waiting
	// for. Whoever is making an instance, or checking a history in one no
	// slot owns, closes it once stopped; wait for that as for the others
	// (the runtime outlives them anyway).
	idle := p.users.stop()
	p.haltAll(why)
	p.closeSandbox()
	deadline := time.Now().Add(closeWait)
	t := time.NewTimer(closeWait)
	select {
	case <-idle:
	case <-t.C:
	}
	t.Stop()
	var late []*instance
	var lateSlots []*agentSlot
	for _, s := range slots {
		if !s.waitReady(deadline) {
			lateSlots = append(lateSlots, s)
			continue
		}
		if s.inst != nil {
			insts = append(insts, s.inst)
		}
	}
	for _, in := range insts {
		if !in.closeBy(why, deadline) {
			late = append(late, in)
		}
	}
	if len(late) == 0 && len(lateSlots) == 0 {
		p.closeRuntime()
		return
	}
	// Stragglers: close the runtime once they are done (each was told to
	// stop, so that is soon), without making the caller wait.
	go func() {
		for _, s := range lateSlots {
			<-s.ready
			if s.inst != nil {
				s.inst.close(why)
				late = append(late, s.inst)
			}
		}
		for _, in := range late {
			<-in.done
		}
		p.closeRuntime()
	}()
}

// haltAll stops every call in progress in the plugin's instances, and
// its commands with them (their waits end with the calls' contexts).
func (p *Plugin) haltAll(why error) {
	p.halted.CompareAndSwap(nil, &why)
	p.haltOpen(why)
}

// haltOpen stops the call in progress in every open instance of the
// plugin, whoever owns it. An instance is open from when its guard exists
// (byModule) until it is finalised; one made after this finds p.halted
// set as its first call starts.
func (p *Plugin) haltOpen(why error) {
	p.byModule.Range(func(_, v any) bool {
		v.(*instance).guard.Halt(why)
		return true
	})
}

// runtimeUsers counts the callers between holdRuntime and letGoRuntime.
type runtimeUsers struct {
	mu       sync.Mutex
	n        int
	stopping bool
	idle     chan struct{} // closed when n reaches 0 after stop
}

// stop refuses new users and returns a channel closed once none is left.
func (u *runtimeUsers) stop() <-chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.stopping = true
	if u.idle == nil {
		u.idle = make(chan struct{})
		if u.n == 0 {
			close(u.idle)
		}
	}
	return u.idle
}

func (u *runtimeUsers) busy() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.n > 0
}

// holdRuntime keeps the runtime open until letGoRuntime, for a caller
// about to make an instance or use one no slot owns; false once the
// plugin is closing.
func (p *Plugin) holdRuntime() bool {
	u := &p.users
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.stopping {
		return false
	}
	u.n++
	return true
}

// letGoRuntime ends a holdRuntime; the last user out of a closing plugin
// closes its runtime.
func (p *Plugin) letGoRuntime() {
	u := &p.users
	u.mu.Lock()
	u.n--
	last := u.n == 0
	if last && u.idle != nil {
		select {
		case <-u.idle:
		default:
			close(u.idle)
		}
	}
	u.mu.Unlock()
	if last {
		p.releaseRuntime()
	}
}

// closeRuntime closes the plugin's runtime, at once or, when a
// compilation holds it (a lazy plugin's, which wazero cannot stop), as
// soon as that ends: closing never waits for a compiler.
func (p *Plugin) closeRuntime() {
	p.closing.Store(true)
	p.releaseRuntime()
}

// releaseRuntime closes the runtime if the plugin is closing and no
// compilation holds it. Whoever ends a compilation calls it again, so
// the last one out closes the runtime.
func (p *Plugin) releaseRuntime() {
	if !p.closing.Load() || p.users.busy() || !p.compileMu.TryLock() {
		return
	}
	rt, done := p.rt, p.rtClosed
	p.rtClosed = true
	p.compileMu.Unlock()
	if done {
		return
	}
	if rt != nil {
		if err := rt.Close(context.Background()); err != nil {
			p.log.Warn("close runtime", "err", err)
		}
	}
	p.images.Close()
}

// ready2 returns the slot's instance if it is ready, without waiting.
func (s *agentSlot) ready2() *instance {
	select {
	case <-s.ready:
		return s.inst
	default:
		return nil
	}
}

// waitReady waits for the slot's instance until deadline.
func (s *agentSlot) waitReady(deadline time.Time) bool {
	select {
	case <-s.ready:
		return true
	default:
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-s.ready:
		return true
	case <-t.C:
		return false
	}
}

// haltAgent stops the agent's call in progress, if any, and kills its
// commands; endAgent then closes its instance.
func (p *Plugin) haltAgent(agentID string) {
	p.mu.Lock()
	s := p.agents[agentID]
	p.mu.Unlock()
	if s == nil {
		return
	}
	if in := s.ready2(); in != nil {
		in.guard.Halt(errAgentEnd)
	}
	if s.facts != nil && s.facts.Session != "" {
		p.endExecScope(s.facts.Session)
	}
}

// endAgent stops the agent's call in progress and its commands, and closes
// its instance, waiting until deadline at most.
func (p *Plugin) endAgent(agentID string, deadline time.Time) {
	p.mu.Lock()
	s := p.agents[agentID]
	delete(p.agents, agentID)
	p.mu.Unlock()
	if s != nil {
		if in := s.ready2(); in != nil {
			in.guard.Halt(errAgentEnd)
		}
	}
	scope := "agent:" + agentID
	if s != nil && s.facts != nil && s.facts.Session != "" {
		scope = s.facts.Session
	}
	p.endExecScope(scope)
	p.mu.Lock()
	delete(p.appended, scope)
	p.mu.Unlock()
	if s == nil {
		return
	}
	if !s.waitReady(deadline) {
		go func() {
			<-s.ready
			if s.inst != nil {
				s.inst.close(errAgentEnd)
			}
		}()
		return
	}
	if s.inst != nil {
		s.inst.closeBy(errAgentEnd, deadline)
	}
}

// Instances reports how many instances are open: the load-time one and
// the per-agent ones. Tests use it to prove nothing leaks.
func (p *Plugin) Instances() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	if p.load != nil && !p.load.isClosed() {
		n++
	}
	for _, s := range p.agents {
		select {
		case <-s.ready:
			if s.inst != nil && !s.inst.isClosed() {
				n++
			}
		default:
			n++
		}
	}
	return n
}

// instanceFor returns the instance that serves facts: the agent's own
// (created on first use), or the load-time one when facts is nil.
func (p *Plugin) instanceFor(ctx context.Context, facts *prompt.AgentFacts) (*instance, error) {
	if facts == nil || facts.ID == "" {
		return p.loadInstance(ctx)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("plugin %q: %w", p.name, ErrNotLoaded)
	}
	s := p.agents[facts.ID]
	if s != nil {
		p.mu.Unlock()
		<-s.ready
		if s.err != nil {
			return nil, s.err
		}
		if !s.inst.isClosed() {
			return s.inst, nil
		}
		// A discarded instance: release it (idempotent) and replace it.
		s.inst.close(errDiscarded)
		p.mu.Lock()
		if p.agents[facts.ID] == s {
			delete(p.agents, facts.ID)
		}
		p.mu.Unlock()
		return p.instanceFor(ctx, facts)
	}
	s = &agentSlot{ready: make(chan struct{}), facts: facts}
	p.agents[facts.ID] = s
	p.mu.Unlock()
	s.inst, s.err = p.newInstance(ctx, false, facts)
	p.mu.Lock()
	gone := p.agents[facts.ID] != s // the plugin closed or the agent ended meanwhile
	if s.err != nil && !gone {
		delete(p.agents, facts.ID)
	}
	p.mu.Unlock()
	close(s.ready)
	if gone && s.err == nil {
		// Whoever removed the slot closes its instance (at once, or when
		// it is ready); this call must not use it.
		return nil, fmt.Errorf("plugin %q: %w", p.name, ErrNotLoaded)
	}
	return s.inst, s.err
}

// loadInstance returns the load-time instance, re-creating it (through
// dsh_setup, without re-registering) if it was discarded.
func (p *Plugin) loadInstance(ctx context.Context) (*instance, error) {
	p.loadCreate.Lock()
	defer p.loadCreate.Unlock()
	p.mu.Lock()
	closed, load, initing := p.closed, p.load, p.initing
	p.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("plugin %q: %w", p.name, ErrNotLoaded)
	}
	if load != nil && !load.isClosed() {
		return load, nil
	}
	if load != nil {
		load.close(errDiscarded) // idempotent: releases what wazero's close left
	}
	if initing {
		return nil, &CallError{Plugin: p.name, Export: hostfns.ExportInit, Err: errors.New("the load-time instance is still initialising")}
	}
	if !p.holdRuntime() {
		return nil, fmt.Errorf("plugin %q: %w", p.name, ErrNotLoaded)
	}
	defer p.letGoRuntime() // after a plugin closed meanwhile closed inst
	inst, err := p.newInstance(ctx, true, nil)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		inst.close(errUnloaded)
		return nil, fmt.Errorf("plugin %q: %w", p.name, ErrNotLoaded)
	}
	p.load = inst
	p.mu.Unlock()
	return inst, nil
}
