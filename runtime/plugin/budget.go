package plugin

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// A call's compute budget runs down only while the guest computes: host
// functions pause it on entry and resume it on return. It is enforced by
// the host's watchdog, one goroutine that looks at every call in progress
// each watchdogTick, instead of a timer and a context watcher per call:
// arming a guard is then a few field writes and two atomic adds, which is
// what keeps a warm tool call near a microsecond (see RATIONALE). The price
// is precision: a call is stopped up to one tick after its budget ran out
// or its context ended (a context that has ended before the call stops it
// at once).
const (
	watchdogTick = 5 * time.Millisecond
	// watchdogLinger is how long an idle watchdog keeps ticking before its
	// goroutine exits; the next call starts it again. A busy agent thus
	// pays for no goroutine start per call, and an idle host holds none.
	watchdogLinger = time.Second
)

// watchdog enforces the budgets and cancellations of a host's calls in
// progress. It knows every instance's guard from the instance's creation
// to its close; arming and disarming a guard touch only the guard and two
// atomic counters.
type watchdog struct {
	active  atomic.Int64  // guards armed now
	arms    atomic.Uint64 // arm calls ever, so the loop notices short calls
	running atomic.Bool

	mu      sync.Mutex
	guards  map[*guard]struct{}
	stopped bool
	quit    chan struct{}
	exited  chan struct{}
}

func newWatchdog() *watchdog { return &watchdog{guards: map[*guard]struct{}{}} }

// register adds an instance's guard; release removes it when the instance
// closes.
func (w *watchdog) register(g *guard) {
	w.mu.Lock()
	w.guards[g] = struct{}{}
	w.mu.Unlock()
}

func (w *watchdog) release(g *guard) {
	w.mu.Lock()
	delete(w.guards, g)
	w.mu.Unlock()
}

// armed counts a call in progress and makes sure the loop runs. Either
// this sees the loop not running and starts it, or the loop, after saying
// it stops, sees the count and goes on (see run). A loop that takes itself
// back after stop still ends at its closed quit channel.
func (w *watchdog) armed() {
	w.active.Add(1)
	w.arms.Add(1)
	if !w.running.Load() {
		w.start()
	}
}

func (w *watchdog) disarmed() { w.active.Add(-1) }

func (w *watchdog) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running.Load() || w.stopped {
		return
	}
	w.running.Store(true)
	w.quit, w.exited = make(chan struct{}), make(chan struct{})
	go w.run(w.quit, w.exited)
}

func (w *watchdog) run(quit, exited chan struct{}) {
	defer close(exited)
	t := time.NewTicker(watchdogTick)
	defer t.Stop()
	seen := w.arms.Load()
	idle := time.Duration(0)
	var calls []*guard
	for {
		select {
		case <-quit:
			return
		case <-t.C:
		}
		if arms := w.arms.Load(); w.active.Load() > 0 || arms != seen {
			seen, idle = arms, 0
		} else {
			if idle += watchdogTick; idle < watchdogLinger {
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
		now := monotime()
		for i, g := range calls {
			g.check(now)
			calls[i] = nil
		}
		calls = calls[:0]
	}
}

// stop ends the loop for good and waits for it; calls armed afterwards
// are not watched. The host stops its watchdog after closing every
// instance, when no call can be in progress.
func (w *watchdog) stop() {
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

// epoch is the origin of monotime.
var epoch = time.Now()

// monotime reads the monotonic clock: one clock read, where time.Now
// makes two (wall and monotonic).
func monotime() time.Duration { return time.Since(epoch) }

// guard stops one guest call when its compute budget runs out or its
// caller's context ends. An instance owns one guard and re-arms it for
// each call; its lock orders arming, disarming and the watchdog's checks,
// so a kill can never reach a later call.
//
// With an instrumented module (flag != nil) a kill sets the module's
// interrupt flag, and the guest traps at its next loop head or function
// entry; the call runs under a context without cancellation, so wazero
// adds no per-call watcher. Without one it falls back to cancelling the
// call's context, which wazero (WithCloseOnContextDone) turns into closing
// the module.
type guard struct {
	w     *watchdog
	flag  api.MutableGlobal
	sleep *sleeper

	mu       sync.Mutex
	armed    bool
	ctx      context.Context // the caller's
	cancel   context.CancelCauseFunc
	limit    time.Duration
	used     time.Duration // compute time before start
	start    time.Duration // when the guest last began computing (monotime)
	paused   int
	fired    bool  // the budget ran out
	canceled error // the caller's context ended
}

func newGuard(w *watchdog, flag api.MutableGlobal, sl *sleeper) *guard {
	g := &guard{w: w, flag: flag, sleep: sl}
	w.register(g)
	return g
}

// release forgets the guard when its instance closes.
func (g *guard) release() { g.w.release(g) }

// arm starts watching a call of ctx with the given budget. It returns the
// context to call the guest with.
func (g *guard) arm(ctx context.Context, limit time.Duration) context.Context {
	g.sleep.killed.Store(false)
	// Host functions find their instance and call through the module, not
	// the context, so an instrumented call needs no context of its own.
	callCtx := context.Background()
	g.mu.Lock()
	if g.flag == nil {
		callCtx, g.cancel = context.WithCancelCause(ctx)
	}
	g.armed, g.ctx, g.limit = true, ctx, limit
	g.used, g.paused, g.fired, g.canceled = 0, 0, false, nil
	g.start = monotime()
	g.mu.Unlock()
	g.w.armed()
	// A context that has already ended stops the call at once rather
	// than a tick later.
	if err := ctx.Err(); err != nil {
		g.mu.Lock()
		g.killLocked(false)
		g.mu.Unlock()
	}
	return callCtx
}

// disarm ends the watch when the call returns; nothing kills after it. If
// a kill raced with a call that returned normally, the flag is cleared:
// the guest finished, its state is whole.
func (g *guard) disarm() {
	g.w.disarmed()
	g.mu.Lock()
	g.armed = false
	g.ctx = nil
	cancel := g.cancel
	g.cancel = nil
	g.mu.Unlock()
	if g.flag != nil && g.flag.Get() != 0 {
		g.flag.Set(0)
	}
	if cancel != nil {
		cancel(nil)
	}
}

// pause stops the budget while a host function works.
func (g *guard) pause() {
	g.mu.Lock()
	if g.paused == 0 {
		g.used += monotime() - g.start
	}
	g.paused++
	g.mu.Unlock()
}

// resume starts the budget again when a host function returns; a budget
// that ran out meanwhile kills at once.
func (g *guard) resume() {
	g.mu.Lock()
	g.paused--
	if g.paused == 0 {
		g.start = monotime()
		if g.armed && g.used >= g.limit {
			g.killLocked(true)
		}
	}
	g.mu.Unlock()
}

// check is the watchdog's look at the call at now.
func (g *guard) check(now time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.armed || g.fired || g.canceled != nil {
		return
	}
	if g.ctx.Err() != nil {
		g.killLocked(false)
		return
	}
	used := g.used
	if g.paused == 0 {
		used += now - g.start
	}
	if used >= g.limit {
		g.killLocked(true)
	}
}

// killLocked stops the call, for its budget or for its caller's context.
func (g *guard) killLocked(budget bool) {
	if budget {
		g.fired = true
	} else if g.canceled == nil {
		g.canceled = fmt.Errorf("call cancelled: %w", context.Cause(g.ctx))
	}
	g.sleep.killed.Store(true)
	if g.flag != nil {
		g.flag.Set(1)
	} else {
		g.cancel(ErrComputeBudget)
	}
}

// why explains a failed guest call.
func (g *guard) why(err error) error {
	g.mu.Lock()
	fired, canceled := g.fired, g.canceled
	g.mu.Unlock()
	switch {
	case fired:
		return fmt.Errorf("%w (killed)", ErrComputeBudget)
	case canceled != nil:
		return canceled
	}
	return classifyTrap(err)
}

// sleeper is an instance's WASI sleep. wazero's poll_oneoff sleeps without
// watching any context, so a guest asleep when its budget ran out (or its
// turn was cancelled) would sleep on; this one wakes when the call is
// killed, and the guest then meets its interrupt at the next check.
type sleeper struct{ killed atomic.Bool }

// sleepSlice bounds how long a killed sleeper goes on sleeping.
const sleepSlice = 5 * time.Millisecond

func (s *sleeper) sleep(ns int64) {
	deadline := time.Now().Add(time.Duration(ns))
	for !s.killed.Load() {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		time.Sleep(min(left, sleepSlice))
	}
}
