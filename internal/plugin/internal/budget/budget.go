// Package budget enforces the compute budget and the wall-clock cap of
// plugin calls: one Watchdog per host looks at every call in progress, each
// instance owns one Guard re-armed per call, and a Sleeper is the WASI sleep
// a kill wakes. It knows nothing of plugins, instances or ABIs: the host
// hands it an interrupt flag and a classifier of traps.
package budget

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// A call's compute budget runs down while the guest computes and while the
// host works for it (see Guard). It is enforced by
// the host's Watchdog, one goroutine that looks at every call in progress
// each Tick, instead of a timer and a context watcher per call:
// arming a Guard is then a few field writes and two atomic adds, which is
// what keeps a warm tool call near a microsecond (see RATIONALE). The price
// is precision: a call is stopped up to one tick after its budget ran out
// or its context ended (a context that has ended before the call stops it
// at once).
const (
	Tick = 5 * time.Millisecond
	// Linger is how long an idle Watchdog keeps ticking before its
	// goroutine exits; the next call starts it again. A busy agent thus
	// pays for no goroutine start per call, and an idle host holds none.
	Linger = time.Second
)

// Watchdog enforces the budgets and cancellations of a host's calls in
// progress. It knows every instance's Guard from the instance's creation
// to its close; arming and disarming a Guard touch only the Guard and two
// atomic counters.
type Watchdog struct {
	active  atomic.Int64  // guards armed now
	arms    atomic.Uint64 // arm calls ever, so the loop notices short calls
	running atomic.Bool

	classify func(error) error

	mu      sync.Mutex
	guards  map[*Guard]struct{}
	stopped bool
	quit    chan struct{}
	exited  chan struct{}
}

// NewWatchdog returns an idle watchdog; classify explains a guest call's
// failure when the call was not stopped by its guard (a trap).
func NewWatchdog(classify func(error) error) *Watchdog {
	return &Watchdog{guards: map[*Guard]struct{}{}, classify: classify}
}

// Running reports whether the watchdog's goroutine runs now.
func (w *Watchdog) Running() bool { return w.running.Load() }

// Active is the number of calls armed now.
func (w *Watchdog) Active() int64 { return w.active.Load() }

// register adds an instance's Guard; release removes it when the instance
// closes.
func (w *Watchdog) register(g *Guard) {
	w.mu.Lock()
	w.guards[g] = struct{}{}
	w.mu.Unlock()
}

func (w *Watchdog) release(g *Guard) {
	w.mu.Lock()
	delete(w.guards, g)
	w.mu.Unlock()
}

// armed counts a call in progress and makes sure the loop runs. Either
// this sees the loop not running and starts it, or the loop, after saying
// it stops, sees the count and goes on (see run). A loop that takes itself
// back after stop still ends at its closed quit channel.
func (w *Watchdog) armed() {
	w.active.Add(1)
	w.arms.Add(1)
	if !w.running.Load() {
		w.start()
	}
}

func (w *Watchdog) disarmed() { w.active.Add(-1) }

func (w *Watchdog) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running.Load() || w.stopped {
		return
	}
	w.running.Store(true)
	w.quit, w.exited = make(chan struct{}), make(chan struct{})
	go w.run(w.quit, w.exited)
}

func (w *Watchdog) run(quit, exited chan struct{}) {
	defer close(exited)
	t := time.NewTicker(Tick)
	defer t.Stop()
	seen := w.arms.Load()
	idle := time.Duration(0)
	var calls []*Guard
	for {
		select {
		case <-quit:
			return
		case <-t.C:
		}
		if arms := w.arms.Load(); w.active.Load() > 0 || arms != seen {
			seen, idle = arms, 0
		} else {
			if idle += Tick; idle < Linger {
				continue
			}
			// Say we stop, then look again: a call armed before the
			// store is seen here, one armed after it starts a new loop
			// (armed sees running false). If one was seen, take the
			// loop back, unless a new one has already started.
			w.running.Store(false)
			if w.active.Load() == 0 && w.arms.Load() == seen || !w.running.CompareAndSwap(false, true) {
				return
			}
			idle = 0
			continue
		}
		w.mu.Lock()
		for g := range w.guards {
			calls = append(calls, g)
		}
		w.mu.Unlock()
		now := Monotime()
		for i, g := range calls {
			g.check(now)
			calls[i] = nil
		}
		calls = calls[:0]
	}
}

// stop ends the loop for good and waits for it; calls armed afterwards
// are not watched. The host stops its Watchdog after closing every
// instance, when no call can be in progress.
func (w *Watchdog) Stop() {
	w.mu.Lock()
	w.stopped = true
	quit, exited := w.quit, w.exited
	w.running.Store(false)
	w.mu.Unlock()
	if quit != nil {
		select {
		case <-quit:
		default:
			close(quit)
		}
		<-exited
	}
}

// epoch is the origin of Monotime.
var epoch = time.Now()

// Monotime reads the monotonic clock: one clock read, where time.Now
// makes two (wall and monotonic).
func Monotime() time.Duration { return time.Since(epoch) }

// Guard stops one guest call when its compute budget or its wall-clock
// cap runs out, its caller's context ends, or the host stops it (unload,
// end of the agent, close). An instance owns one Guard and re-arms it for
// each call; its lock orders arming, disarming and the Watchdog's checks,
// so a kill can never reach a later call.
//
// The compute budget counts everything the call makes the host do: guest
// code and host functions alike, so a loop of cheap-to-ask, costly-to-serve
// host calls runs it down like a loop of guest code. Only a wait that
// another grant bounds (a command under its exec timeout, an HTTP request
// under grants.net.timeout) is left out of it, through beginWait and
// endWait; the wall-clock cap counts those too, so no loop of waits runs
// forever.
//
// With an instrumented module (flag != nil) a kill sets the module's
// interrupt flag, and the guest traps at its next loop head or function
// entry; the call runs under a context without cancellation, so wazero
// adds no per-call watcher. Without one it falls back to cancelling the
// call's context, which wazero (WithCloseOnContextDone) turns into closing
// the module. Either way a kill also cancels the context host functions
// wait under (hostCtx), so a blocked host call returns at once.
type Guard struct {
	w     *Watchdog
	flag  api.MutableGlobal
	sleep *Sleeper

	// halted mirrors stop != nil for the host functions' lock-free check.
	halted atomic.Bool

	mu      sync.Mutex
	armed   bool
	ctx     context.Context // the caller's
	cancel  context.CancelCauseFunc
	hctx    context.Context // host functions' waits; made on first use
	hcancel context.CancelCauseFunc
	limit   time.Duration
	wall    time.Duration // 0: no cap
	begin   time.Duration // when the call began (Monotime)
	used    time.Duration // compute time before start
	start   time.Duration // when the call last began counting (Monotime)
	waiting int           // exempt waits in progress
	stop    error         // why the call was stopped; nil while it may run
}

func NewGuard(w *Watchdog, flag api.MutableGlobal, sl *Sleeper) *Guard {
	g := &Guard{w: w, flag: flag, sleep: sl}
	w.register(g)
	return g
}

// release forgets the Guard when its instance closes.
func (g *Guard) Release() { g.w.release(g) }

// arm starts watching a call of ctx with the given compute budget and
// wall-clock cap (0: none). It returns the context to call the guest with.
func (g *Guard) Arm(ctx context.Context, limit, wall time.Duration) context.Context {
	g.sleep.killed.Store(false)
	g.halted.Store(false)
	// Host functions find their instance and call through the module, not
	// the context, so an instrumented call needs no context of its own.
	callCtx := context.Background()
	g.mu.Lock()
	if g.flag == nil {
		callCtx, g.cancel = context.WithCancelCause(ctx)
	}
	g.armed, g.ctx, g.limit, g.wall = true, ctx, limit, wall
	g.used, g.waiting, g.stop = 0, 0, nil
	g.start = Monotime()
	g.begin = g.start
	g.mu.Unlock()
	g.w.armed()
	// A context that has already ended stops the call at once rather
	// than a tick later.
	if err := ctx.Err(); err != nil {
		g.mu.Lock()
		g.killLocked(fmt.Errorf("call cancelled: %w", context.Cause(ctx)))
		g.mu.Unlock()
	}
	return callCtx
}

// disarm ends the watch when the call returns; nothing kills after it. If
// a kill raced with a call that returned normally, the flag is cleared:
// the guest finished, its state is whole.
func (g *Guard) Disarm() {
	g.w.disarmed()
	g.mu.Lock()
	g.armed = false
	g.ctx = nil
	cancel, hcancel := g.cancel, g.hcancel
	g.cancel, g.hctx, g.hcancel = nil, nil, nil
	g.mu.Unlock()
	if g.flag != nil && g.flag.Get() != 0 {
		g.flag.Set(0)
	}
	if cancel != nil {
		cancel(nil)
	}
	if hcancel != nil {
		hcancel(nil)
	}
}

// hostCtx is the context host functions of the call in progress wait
// under: the caller's, cancelled too when the call is stopped for any
// reason, with that reason as its cause.
func (g *Guard) HostCtx() context.Context {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.armed {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(errors.New("no call in progress"))
		return ctx
	}
	if g.hctx == nil {
		g.hctx, g.hcancel = context.WithCancelCause(g.ctx)
		if g.stop != nil {
			g.hcancel(g.stop)
		}
	}
	return g.hctx
}

// beginWait leaves the time until endWait out of the compute budget (not
// out of the wall-clock cap): for waits another grant bounds.
func (g *Guard) BeginWait() {
	g.mu.Lock()
	if g.waiting == 0 {
		g.used += Monotime() - g.start
	}
	g.waiting++
	g.mu.Unlock()
}

// endWait counts compute again; a budget that ran out meanwhile kills at
// once.
func (g *Guard) EndWait() {
	g.mu.Lock()
	g.waiting--
	if g.waiting == 0 {
		g.start = Monotime()
		if g.armed && g.stop == nil && g.used >= g.limit {
			g.killLocked(ErrBudget)
		}
	}
	g.mu.Unlock()
}

// Why a call was stopped by its own limits. The plugin facade re-exports
// ErrComputeBudget and ErrWallClock.
var (
	// ErrComputeBudget: a call exceeded its compute budget and was killed.
	ErrComputeBudget = errors.New("plugin exceeded its compute budget")
	// ErrWallClock: a call exceeded its wall-clock cap
	// (grants.limits.wall_timeout), which counts waits too, and was
	// killed.
	ErrWallClock = errors.New("plugin exceeded its wall-clock cap")
	// ErrBudget is the stop of a call whose compute budget ran out.
	ErrBudget = fmt.Errorf("%w (killed)", ErrComputeBudget)
)

// check is the Watchdog's look at the call at now.
func (g *Guard) check(now time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.armed || g.stop != nil {
		return
	}
	if g.ctx.Err() != nil {
		g.killLocked(fmt.Errorf("call cancelled: %w", context.Cause(g.ctx)))
		return
	}
	if g.wall > 0 && now-g.begin >= g.wall {
		g.killLocked(fmt.Errorf("%w of %v (waits included)", ErrWallClock, g.wall))
		return
	}
	used := g.used
	if g.waiting == 0 {
		used += now - g.start
	}
	if used >= g.limit {
		g.killLocked(ErrBudget)
	}
}

// halt stops the call in progress, if any, for why (the host's reason:
// unload, end of the agent, close). It reports whether a call was running.
func (g *Guard) Halt(why error) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.armed {
		return false
	}
	if g.stop == nil {
		g.killLocked(fmt.Errorf("call cancelled: %w", why))
	}
	return true
}

// killLocked stops the call for err: it wakes a sleeping guest, raises the
// interrupt flag (or cancels the fallback's context) and cancels what host
// functions wait on.
func (g *Guard) killLocked(err error) {
	g.stop = err
	g.halted.Store(true)
	g.sleep.killed.Store(true)
	if g.flag != nil {
		g.flag.Set(1)
	} else if g.cancel != nil {
		g.cancel(err)
	}
	if g.hcancel != nil {
		g.hcancel(err)
	}
}

// stopped returns why the call was stopped, or nil.
func (g *Guard) Stopped() error {
	if !g.halted.Load() {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stop
}

// why explains a failed guest call.
func (g *Guard) Why(err error) error {
	g.mu.Lock()
	stop := g.stop
	g.mu.Unlock()
	if stop != nil {
		return stop
	}
	return g.w.classify(err)
}

// Sleeper is an instance's WASI sleep. wazero's poll_oneoff sleeps without
// watching any context, so a guest asleep when its budget ran out (or its
// turn was cancelled) would sleep on; this one wakes when the call is
// killed, and the guest then meets its interrupt at the next check.
type Sleeper struct{ killed atomic.Bool }

// sleepSlice bounds how long a killed Sleeper goes on sleeping.
const sleepSlice = 5 * time.Millisecond

func (s *Sleeper) Sleep(ns int64) {
	deadline := time.Now().Add(time.Duration(ns))
	for !s.killed.Load() {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		time.Sleep(min(left, sleepSlice))
	}
}
