package plugin

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/abi/dsh"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/budget"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/image"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/interrupt"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/lazy"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/fsjail"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// instance is one instantiation of a plugin's module.
type instance struct {
	p        *Plugin
	mod      api.Module
	mem      api.Memory
	fns      map[string]api.Function
	alloc    api.Function
	loadTime bool
	agentID  string

	// sem is the instance's lock: one call at a time (see lock.go); owner
	// is the root of the chain of calls holding it.
	sem   chan struct{}
	owner atomic.Pointer[callState]
	// closed: no new call may start; the call holding sem, if any,
	// finalises the instance when it lets go. closing is closed with it,
	// for calls waiting for sem; done when the instance is finalised.
	closed    atomic.Bool
	closing   chan struct{}
	closeOnce sync.Once
	finalized bool // guarded by sem
	done      chan struct{}
	stack     []uint64
	// Valid while a call is in progress (sem held).
	cur     *callState
	scratch dsh.Scratch // host functions' parse state and a result awaiting take

	ctxJSON atomic.Pointer[ctxCache]
	sleep   *budget.Sleeper
	guard   *budget.Guard // watches each call's budget; re-armed per call

	// linked are the modules the ABI instantiated beside the guest for
	// it alone (an Extism plugin's kernel), closed with it; state is the
	// ABI's own state of the instance (nil for dsh:host/v1).
	linked []api.Module
	state  any

	logw io.Closer
	jail *fsjail.Jail      // nil without fs grants
	flag api.MutableGlobal // the interrupt flag; nil if not instrumented
	// memg is the memory when it lives outside the Go heap: guest code may
	// run only between enterMem and leaveMem. fromImage: the instance
	// started from an image instead of running its initialiser.
	memg      image.MemGuard
	fromImage bool
}

func (in *instance) enterMem() {
	if in.memg != nil {
		in.memg.Enter()
	}
}

func (in *instance) leaveMem() {
	if in.memg != nil {
		in.memg.Leave()
	}
}

// callState is what host functions know about the call in progress.
type callState struct {
	ctx    context.Context // the caller's context, carrying the agent
	guard  *budget.Guard
	tx     *prompt.Tx     // set during dsh_init: registrations join it
	init   bool           // in dsh_init
	setup  bool           // in dsh_setup
	scoped bool           // dsh_setup called a host function that is not dsh.SetupNeutral
	rec    *lazy.Recorder // set during a dsh_init whose host calls are recorded (manifest.go)
	replay *lazy.Replayer // set during a dsh_init answered from such a record
	// held, when set, is called with the call's outcome while the instance
	// is still held: what must happen in the order the guest ran its calls.
	held   func(st hostfns.OutStatus, out []byte, err error)
	facts  *prompt.AgentFacts
	export string
	// hostBytes is what the call's host functions read and produced so
	// far, against Limits.HostBytes.
	hostBytes int64
	// maxOut, when positive, caps the export's output payload: the
	// output is refused (ErrQuota) before the host copies it.
	maxOut int64
	// quotaErr explains an output past maxOut (the quota it passes).
	quotaErr func(n int64) error
	// root is the outermost call of this call's chain (nil: this one);
	// waitingFor, on a root, is the instance its chain waits for.
	root       *callState
	waitingFor atomic.Pointer[instance]
	// subagentRuns counts the children this call started (subagent_run).
	subagentRuns int
}

// activeKey marks, on a context, the instances with a call in progress
// up the stack, so that a reentrant call is refused instead of
// deadlocking.
type activeKey struct{}

type activeSet struct {
	inst *instance
	root *callState // the chain's outermost call
	next *activeSet
}

func isActive(ctx context.Context, in *instance) bool {
	for a, _ := ctx.Value(activeKey{}).(*activeSet); a != nil; a = a.next {
		if a.inst == in {
			return true
		}
	}
	return false
}

// envList is the granted environment an instance sees, as NAME=value.
func (p *Plugin) envList() []string {
	var out []string
	for _, name := range p.grants().Env {
		if v, ok := os.LookupEnv(name); ok {
			out = append(out, name+"="+v)
		}
	}
	return out
}

// moduleConfig is an instance's module config: WASI with the real
// clocks, a sleep the budget can wake, stdio to the log, the granted
// environment and the fs jail.
func (p *Plugin) moduleConfig(facts *prompt.AgentFacts, shift time.Duration) (wazero.ModuleConfig, *lineLogger, *budget.Sleeper, *fsjail.Jail, error) {
	lw := newLineLogger(p)
	sl := &budget.Sleeper{}
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions().
		WithArgs(p.name).
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(sl.Sleep).
		WithRandSource(rand.Reader).
		WithStdout(lw).
		WithStderr(lw)
	if shift != 0 {
		cfg = cfg.WithWalltime(lazy.ShiftedClock(shift), sys.ClockResolution(time.Microsecond.Nanoseconds()))
	}
	for _, name := range p.grants().Env {
		if v, ok := os.LookupEnv(name); ok {
			cfg = cfg.WithEnv(name, v)
		}
	}
	jail, err := p.jailFor(facts)
	if err != nil {
		lw.Close()
		return cfg, nil, nil, nil, &CallError{Plugin: p.name, Export: "instantiate", Err: err}
	}
	cfg = withJail(cfg, jail)
	return cfg, lw, sl, jail, nil
}

// newInstance instantiates the module and runs its reactor initialiser,
// then dsh_setup unless this is the load-time instance's first life (whose
// init runInit calls).
func (p *Plugin) newInstance(ctx context.Context, loadTime bool, facts *prompt.AgentFacts) (*instance, error) {
	return p.newInstanceWith(ctx, loadTime, facts, 0, false)
}

// newInstanceWith is newInstance with the instance's wall clock shift
// ahead of the host's (a check's), and, when bare, an instance
// that is only initialised: fresh (no image, none taken from it), with
// neither dsh_setup nor a re-run, for a check (repeats) to run in.
func (p *Plugin) newInstanceWith(ctx context.Context, loadTime bool, facts *prompt.AgentFacts, shift time.Duration, bare bool) (*instance, error) {
	if !p.holdRuntime() {
		return nil, fmt.Errorf("plugin %q: %w", p.name, ErrNotLoaded)
	}
	defer p.letGoRuntime()
	if err := p.ensureCompiled(ctx); err != nil {
		return nil, err
	}
	return p.kind().instantiate(ctx, p, loadTime, facts, shift, bare)
}

// newDshInstance makes an instance of a dsh:host/v1 plugin (see
// newInstanceWith): from an image when there is one, set up with
// dsh_setup or a re-run of the load-time history.
func (p *Plugin) newDshInstance(ctx context.Context, loadTime bool, facts *prompt.AgentFacts, shift time.Duration, bare bool) (*instance, error) {
	cfg, lw, sl, jail, err := p.moduleConfig(facts, shift)
	if err != nil {
		return nil, err
	}
	// An instance starts from an image when there is one for this
	// environment (image.go): its memory is the image mapped outside the
	// Go heap. A fresh instance of a module with a large memory gets a
	// zeroed mapping from the same allocator (mapFresh); others keep
	// wazero's own memory.
	var alloc image.Allocation
	var img *image.Image
	env := ""
	ictx := ctx
	var hist *lazy.History
	if !bare {
		hist = p.historyFor(loadTime)
	}
	if p.snapshots {
		env = p.environment(jail, p.envList())
		if hist == nil && !bare {
			// A load-time instance that re-runs dsh_init starts fresh: an
			// image may hold dsh_setup's state.
			img = p.imageFor(env)
		}
		if img != nil || p.mapFresh {
			ictx = image.InstantiateContext(ctx, img, &alloc)
		}
	}
	mod, err := p.rt.InstantiateModule(ictx, p.module, cfg)
	if img != nil {
		img.Release() // mapped (or not) by now
	}
	if err != nil {
		lw.Close()
		if jail != nil {
			jail.Close()
		}
		return nil, &CallError{Plugin: p.name, Export: "instantiate", Err: classifyTrap(err)}
	}
	in, err := p.adopt(mod, loadTime, facts, lw, jail, sl, alloc.Guard, nil, nil)
	if err != nil {
		return nil, err
	}
	in.alloc = in.fns[hostfns.ExportAlloc]
	if alloc.Imaged {
		if err := img.Restore(mod, p.snapGlobals); err != nil {
			in.close(errDiscarded)
			return nil, &CallError{Plugin: p.name, Export: "instantiate", Err: fmt.Errorf("from image: %w", err)}
		}
		in.fromImage = true
	} else {
		if err := in.initialise(ctx); err != nil {
			return nil, err
		}
		if p.snapshots && !bare {
			p.capture(mod, env, alloc.Guard)
		}
	}
	if err := in.checkVersion(ctx); err != nil {
		in.close(errDiscarded)
		return nil, err
	}
	p.mu.Lock()
	first := loadTime && p.initing
	p.mu.Unlock()
	if first || bare {
		return in, nil
	}
	if hist != nil {
		err := in.rerun(ctx, hist)
		if err == nil {
			return in, nil
		}
		in.close(errDiscarded)
		if ctx.Err() != nil {
			// The caller gave up, which says nothing of the guest: the
			// history stays for the next caller.
			return nil, &CallError{Plugin: p.name, Export: hostfns.ExportInit, Err: fmt.Errorf("new load-time instance: %w", context.Cause(ctx))}
		}
		// The guest asked for something else this time, or the re-run
		// failed (its budget, a trap): set the instance up as a per-agent
		// one instead, as before histories, and keep no history from now.
		p.log.Warn("a new load-time instance did not repeat the first one's history; setting it up with dsh_setup", "err", err)
		p.dropHistory()
		return p.newInstance(ctx, loadTime, facts)
	}
	if in.fns[hostfns.ExportSetup] == nil || (in.fromImage && img.SetupDone()) {
		return in, nil
	}
	cs := &callState{setup: true, facts: facts}
	st, out, err := in.invoke(ctx, cs, hostfns.ExportSetup, p.limits.InitTimeout, p.config)
	if err == nil && st == hostfns.OutError {
		err = &CallError{Plugin: p.name, Export: hostfns.ExportSetup, Err: fmt.Errorf("%w: %s", ErrGuest, out)}
	}
	if err != nil {
		in.close(errDiscarded)
		return nil, err
	}
	if !cs.scoped {
		// A setup that asked the host nothing about the agent ends in the
		// same state for every agent: later instances can skip it too.
		p.captureSetup(mod, env, alloc.Guard)
	}
	return in, nil
}

// adopt makes the instance of a module just instantiated, for every ABI:
// it takes over the module's logger, jail and sleeper, the memory guard
// (nil on the Go heap), the modules instantiated beside it for it alone
// (linked) and the ABI's state; finds the interrupt flag and the exports;
// and registers it with its budget guard, so that haltAll and close can
// stop it from now on, whoever owns it (haltOpen). On failure what it
// took over is closed.
func (p *Plugin) adopt(mod api.Module, loadTime bool, facts *prompt.AgentFacts, lw *lineLogger, jail *fsjail.Jail,
	sl *budget.Sleeper, memg image.MemGuard, linked []api.Module, state any) (*instance, error) {
	in := &instance{p: p, mod: mod, mem: mod.Memory(), fns: map[string]api.Function{},
		loadTime: loadTime, stack: make([]uint64, 2), logw: lw, jail: jail, sleep: sl, memg: memg,
		linked: linked, state: state,
		sem: make(chan struct{}, 1), closing: make(chan struct{}), done: make(chan struct{})}
	if facts != nil {
		in.agentID = facts.ID
	}
	if p.interruptible {
		g, ok := mod.ExportedGlobal(interrupt.Global).(api.MutableGlobal)
		if !ok {
			in.close(errDiscarded)
			return nil, &CallError{Plugin: p.name, Export: "instantiate", Err: fmt.Errorf("%w: the interrupt flag is missing", ErrABI)}
		}
		in.flag = g
	}
	in.guard = budget.NewGuard(p.h.wd, in.flag, sl)
	p.byModule.Store(mod, in)
	for _, m := range linked {
		p.byModule.Store(m, in)
	}
	for name := range p.exports {
		in.fns[name] = mod.ExportedFunction(name)
	}
	return in, nil
}

// initialise runs a fresh instance's start-up: the data segments (made
// passive by PrepareSnapshot), then the reactor's initialiser, each under
// the init budget. On failure the instance is closed.
func (in *instance) initialise(ctx context.Context) error {
	p := in.p
	init := []string{hostfns.ExportInitialize}
	if p.prepared {
		init = []string{interrupt.DataExport, hostfns.ExportInitialize}
	}
	for _, name := range init {
		f := in.mod.ExportedFunction(name)
		if f == nil {
			continue
		}
		in.enterMem()
		callCtx := in.guard.Arm(ctx, p.limits.InitTimeout, p.limits.WallTimeout)
		if why := p.halted.Load(); why != nil {
			in.guard.Halt(*why)
		}
		_, err := f.Call(callCtx)
		in.guard.Disarm()
		in.leaveMem()
		if err != nil {
			in.close(errDiscarded)
			return &CallError{Plugin: p.name, Export: name, Err: in.guard.Why(err)}
		}
	}
	return nil
}

func (in *instance) checkVersion(ctx context.Context) error {
	// Guest code, so under a budget like any other call.
	in.enterMem()
	r, err := in.fns[hostfns.ExportABIVersion].Call(in.guard.Arm(ctx, in.p.limits.InitTimeout, in.p.limits.WallTimeout))
	in.guard.Disarm()
	in.leaveMem()
	if err != nil {
		return &CallError{Plugin: in.p.name, Export: hostfns.ExportABIVersion, Err: in.guard.Why(err)}
	}
	if v := int32(r[0]); v != hostfns.ABIVersion {
		return &CallError{Plugin: in.p.name, Export: hostfns.ExportABIVersion,
			Err: fmt.Errorf("%w: the plugin was built for ABI version %d; this host speaks version %d", ErrABI, v, hostfns.ABIVersion)}
	}
	return nil
}

// isClosed reports whether the instance can no longer be called: closed
// by the host, or — in the WithCloseOnContextDone fallback, when a budget
// expired just as a call returned — closed by wazero.
func (in *instance) isClosed() bool { return in.closed.Load() || in.mod.IsClosed() }

// close stops the call in progress, if any (for why: the plugin was
// unloaded, the agent ended...), and closes the module. It never waits
// for a guest or a command: the stopped call lets go at its next check or
// as soon as its host function sees its context cancelled; close waits
// for that at most closeWait, and past it the call finalises the instance
// itself when it ends. It reports whether the instance is finalised.
func (in *instance) close(why error) bool {
	return in.closeBy(why, time.Now().Add(closeWait))
}

// closeBy is close waiting until deadline at most, so that closing many
// instances waits closeWait in all, not for each.
func (in *instance) closeBy(why error, deadline time.Time) bool {
	in.closed.Store(true)
	in.closeOnce.Do(func() { close(in.closing) })
	if in.guard != nil {
		in.guard.Halt(why)
	}
	select {
	case in.sem <- struct{}{}:
	default:
		t := time.NewTimer(max(time.Until(deadline), 0))
		defer t.Stop()
		select {
		case in.sem <- struct{}{}:
		case <-t.C:
			return false
		}
	}
	in.finalize()
	<-in.sem
	return true
}

// finalize releases the module and what the instance holds; the caller
// holds sem.
func (in *instance) finalize() {
	if in.finalized {
		return
	}
	in.finalized = true
	in.closed.Store(true)
	in.closeOnce.Do(func() { close(in.closing) })
	in.p.byModule.Delete(in.mod)
	in.mod.Close(context.Background())
	for _, m := range in.linked {
		in.p.byModule.Delete(m)
		m.Close(context.Background())
	}
	in.logw.Close()
	if in.jail != nil {
		in.jail.Close()
	}
	if in.guard != nil {
		in.guard.Release()
	}
	close(in.done)
}

// errInstanceClosed: the instance was discarded (a trap, a cancelled
// call) while this call waited for it; CallTool retries on a fresh one.
var errInstanceClosed = errors.New("instance closed")

// call is one guest call of export in the instance, for every ABI: it
// refuses a reentrant call, waits for the instance (the wait-for graph),
// refuses a discarded instance or an ended context, arms the compute
// budget of timeout and makes cs the call in progress; run then does the
// ABI's part with the context to call the guest under. A guest failure
// goes through fail, which discards the instance and wraps the cause in a
// *CallError. held, if not nil, sees the call's outcome while the
// instance is still held.
func (in *instance) call(ctx context.Context, cs *callState, export string, timeout time.Duration, held func(error),
	run func(callCtx context.Context, fn api.Function, fail func(error) error) error) (err error) {
	if isActive(ctx, in) {
		return &CallError{Plugin: in.p.name, Export: export, Err: errors.New("reentrant call into an instance that is already running")}
	}
	fn := in.fns[export]
	if fn == nil {
		return &CallError{Plugin: in.p.name, Export: export, Err: fmt.Errorf("%w: the plugin does not export %s", ErrABI, export)}
	}
	if a := activeOf(ctx); a != nil {
		cs.root = a.root
	}
	if err := in.acquire(ctx, cs.rootCall()); err != nil {
		return &CallError{Plugin: in.p.name, Export: export, Err: err}
	}
	defer in.release()
	if held != nil {
		defer func() { held(err) }()
	}
	if in.closed.Load() {
		return &CallError{Plugin: in.p.name, Export: export, Err: errInstanceClosed}
	}
	// A call whose context has already ended never enters the guest: the
	// guest checks its kill flag only every FuelPerCheck units, so a short
	// call would otherwise run to completion. The instance stays whole.
	if ctx.Err() != nil {
		return &CallError{Plugin: in.p.name, Export: export, Err: fmt.Errorf("call cancelled before it started: %w", context.Cause(ctx))}
	}
	g := in.guard
	callCtx := g.Arm(ctx, timeout, in.p.limits.WallTimeout)
	defer g.Disarm()
	if why := in.p.halted.Load(); why != nil {
		g.Halt(*why) // the plugin is going: this call stops at once
	}
	cs.ctx = ctx
	cs.export = export
	cs.guard = g
	in.cur = cs
	defer func() { in.cur = nil }()
	in.enterMem()
	defer in.leaveMem()
	return run(callCtx, fn, func(err error) error {
		in.closed.Store(true) // finalised by release, when the call lets go
		return &CallError{Plugin: in.p.name, Export: export, Err: err}
	})
}

// invoke calls a dsh:host/v1 export with the input frame made of parts
// joined by NUL, under a compute budget of timeout. A guest failure
// (trap, budget, bad output) discards the instance and is returned as a
// *CallError; the export's own status comes back as st.
func (in *instance) invoke(ctx context.Context, cs *callState, export string, timeout time.Duration, parts ...[]byte) (st hostfns.OutStatus, out []byte, err error) {
	var held func(error)
	if cs.held != nil {
		held = func(err error) { cs.held(st, out, err) }
	}
	err = in.call(ctx, cs, export, timeout, held, func(callCtx context.Context, fn api.Function, fail func(error) error) error {
		in.scratch.Pending = nil
		defer func() { in.scratch.Pending = nil }()
		size := len(parts) - 1
		for _, b := range parts {
			size += len(b)
		}
		ptr := uint32(0)
		if size > 0 {
			in.stack[0] = uint64(uint32(size))
			if err := in.alloc.CallWithStack(callCtx, in.stack); err != nil {
				return fail(in.guard.Why(err))
			}
			ptr = uint32(in.stack[0])
			if ptr == 0 || !in.writeFrame(ptr, parts) {
				return fail(fmt.Errorf("%w: dsh_alloc(%d) returned %#x, not %d writable bytes", ErrBadOutput, size, ptr, size))
			}
		}
		in.stack[0], in.stack[1] = uint64(ptr), uint64(uint32(size))
		if err := fn.CallWithStack(callCtx, in.stack); err != nil {
			return fail(in.guard.Why(err))
		}
		optr, n := hostfns.UnpackPtr(in.stack[0])
		if n == 0 {
			st = hostfns.OutOK
			return nil
		}
		if n > hostfns.MaxOutputBytes {
			return fail(fmt.Errorf("%w: %d bytes of output exceed the limit of %d", ErrBadOutput, n, hostfns.MaxOutputBytes))
		}
		if cs.maxOut > 0 && int64(n)-1 > cs.maxOut {
			// Refused before the host copies it; the guest is whole, so its
			// instance stays.
			err := fmt.Errorf("%d bytes of output, %d allowed", n-1, cs.maxOut)
			if cs.quotaErr != nil {
				if qe := cs.quotaErr(int64(n) - 1); qe != nil {
					err = qe
				}
			}
			return &CallError{Plugin: in.p.name, Export: export, Err: fmt.Errorf("%w: %w", ErrQuota, err)}
		}
		b, ok := in.mem.Read(optr, n)
		if !ok {
			return fail(fmt.Errorf("%w: output at %#x+%d is outside guest memory (%d bytes)", ErrBadOutput, optr, n, in.mem.Size()))
		}
		// OutResult is dsh_tool's alone; any other export that returns it
		// is refused here, as an unknown status.
		if s := hostfns.OutStatus(b[0]); s > hostfns.OutNoValue && !(s == hostfns.OutResult && export == hostfns.ExportTool) {
			return fail(fmt.Errorf("%w: unknown output status %d", ErrBadOutput, s))
		}
		st, out = hostfns.OutStatus(b[0]), append([]byte(nil), b[1:]...)
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	return st, out, nil
}

// activeCtx is the call's context marked with its instance, for host
// functions whose work can call back into plugins (event_emit): a call
// back into this instance is then refused as reentrant.
func (cs *callState) activeCtx(in *instance) context.Context {
	return context.WithValue(cs.guard.HostCtx(), activeKey{}, &activeSet{inst: in, root: cs.rootCall(), next: activeOf(cs.ctx)})
}

func activeOf(ctx context.Context) *activeSet {
	a, _ := ctx.Value(activeKey{}).(*activeSet)
	return a
}

func (in *instance) writeFrame(ptr uint32, parts [][]byte) bool {
	for i, b := range parts {
		if i > 0 {
			if !in.mem.WriteByte(ptr, hostfns.FrameSep) {
				return false
			}
			ptr++
		}
		if len(b) > 0 && !in.mem.Write(ptr, b) {
			return false
		}
		ptr += uint32(len(b))
	}
	return true
}

// classifyTrap explains a guest call that failed on its own.
func classifyTrap(err error) error {
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		return fmt.Errorf("%w: the plugin exited with code %d", ErrTrap, exit.ExitCode())
	}
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i] // drop wazero's stack trace from the message
	}
	return fmt.Errorf("%w: %s", ErrTrap, msg)
}

// lineLogger forwards a guest's stdout and stderr to the plugin's logger,
// a line at a time.
type lineLogger struct {
	pw    *io.PipeWriter
	done  chan struct{}
	wrote atomic.Bool // the guest wrote to stdout or stderr
}

func newLineLogger(p *Plugin) *lineLogger {
	pr, pw := io.Pipe()
	l := &lineLogger{pw: pw, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 4096), 64<<10)
		for sc.Scan() {
			line := sc.Text()
			p.rateLog(len(line), func() { p.log.Info(line, "stream", "stdio") })
		}
		io.Copy(io.Discard, pr)
	}()
	return l
}

func (l *lineLogger) Write(b []byte) (int, error) {
	if len(b) > 0 {
		l.wrote.Store(true)
	}
	return l.pw.Write(b)
}

func (l *lineLogger) Close() error {
	l.pw.Close()
	<-l.done
	return nil
}

type ctxCache struct {
	facts prompt.AgentFacts
	json  []byte
}

// contextJSON is callContextJSON, remembered: an instance serves one agent,
// whose facts rarely change between calls.
func (in *instance) contextJSON(f *prompt.AgentFacts) []byte {
	if f == nil {
		return emptyContext
	}
	if c := in.ctxJSON.Load(); c != nil && c.facts == *f {
		return c.json
	}
	b := callContextJSON(f)
	in.ctxJSON.Store(&ctxCache{facts: *f, json: b})
	return b
}

var emptyContext = []byte("{}")

// callContextJSON encodes the facts a guest call is for.
func callContextJSON(f *prompt.AgentFacts) []byte {
	if f == nil {
		return []byte("{}")
	}
	b, _ := json.Marshal(hostfns.CallContext{AgentID: f.ID, SessionID: f.Session, Model: f.Model,
		Cwd: f.Cwd, Depth: f.Depth, Parent: f.Parent})
	return b
}
