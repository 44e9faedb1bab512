package plugin

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// budget is a call's compute allowance. It runs down only while the guest
// computes: host functions pause it on entry and resume it on return. When
// it runs out it calls kill.
type budget struct {
	mu     sync.Mutex
	left   time.Duration
	start  time.Time
	timer  *time.Timer
	kill   func()
	paused int
	done   bool // stopped, or fired
	fired  bool
}

func startBudget(d time.Duration, kill func()) *budget {
	b := &budget{left: d, start: time.Now(), kill: kill}
	b.timer = time.AfterFunc(d, b.fire)
	return b
}

func (b *budget) fire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.paused > 0 || b.done {
		return
	}
	b.done, b.fired = true, true
	b.kill()
}

func (b *budget) pause() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.paused == 0 {
		b.timer.Stop()
		b.left -= time.Since(b.start)
	}
	b.paused++
}

func (b *budget) resume() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.paused--
	if b.paused > 0 || b.done {
		return
	}
	if b.left <= 0 {
		b.done, b.fired = true, true
		b.kill()
		return
	}
	b.start = time.Now()
	b.timer.Reset(b.left)
}

// stop ends the budget when the call returns; nothing kills after it.
func (b *budget) stop() {
	b.mu.Lock()
	b.timer.Stop()
	b.done = true
	b.mu.Unlock()
}

func (b *budget) exhausted() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fired
}

// guard stops one guest call when its compute budget runs out or its
// caller's context ends.
//
// With an instrumented module (flag != nil) it sets the module's interrupt
// flag, and the guest traps at its next loop head or function entry; the
// call runs under a context without cancellation, so wazero adds no
// per-call watcher. Without one it falls back to cancelling the call's
// context, which wazero (WithCloseOnContextDone) turns into closing the
// module.
type guard struct {
	mu       sync.Mutex
	flag     api.MutableGlobal
	sleep    *sleeper
	cancel   context.CancelCauseFunc
	budget   *budget
	stopCtx  func() bool
	done     bool
	canceled error
}

// watch arms a guard for a call of ctx with the given budget. It returns
// the context to call the guest with.
func watch(ctx context.Context, flag api.MutableGlobal, sl *sleeper, timeout time.Duration) (context.Context, *guard) {
	sl.killed.Store(false)
	g := &guard{flag: flag, sleep: sl}
	// Host functions find their instance and call through the module, not
	// the context, so an instrumented call needs no context of its own.
	callCtx := context.Background()
	if flag == nil {
		callCtx, g.cancel = context.WithCancelCause(ctx)
	}
	g.budget = startBudget(timeout, func() { g.kill(nil) })
	g.stopCtx = context.AfterFunc(ctx, func() {
		g.kill(fmt.Errorf("call cancelled: %w", context.Cause(ctx)))
	})
	return callCtx, g
}

func (g *guard) kill(canceled error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done {
		return
	}
	if canceled != nil && g.canceled == nil {
		g.canceled = canceled
	}
	g.sleep.killed.Store(true)
	if g.flag != nil {
		g.flag.Set(1)
	} else {
		g.cancel(ErrComputeBudget)
	}
}

// stop disarms the guard. If a kill raced with a call that returned
// normally, the flag is cleared: the guest finished, its state is whole.
func (g *guard) stop() {
	g.budget.stop()
	g.stopCtx()
	g.mu.Lock()
	g.done = true
	g.mu.Unlock()
	if g.flag != nil && g.flag.Get() != 0 {
		g.flag.Set(0)
	}
	if g.cancel != nil {
		g.cancel(nil)
	}
}

// why explains a failed guest call.
func (g *guard) why(err error) error {
	g.mu.Lock()
	canceled := g.canceled
	g.mu.Unlock()
	switch {
	case g.budget.exhausted():
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
