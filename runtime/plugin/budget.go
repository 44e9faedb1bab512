package plugin

import (
	"context"
	"sync"
	"time"
)

// budget is a call's compute allowance. It runs down only while the guest
// computes: host functions pause it on entry and resume it on return. When
// it runs out it cancels the call's context, and wazero (configured with
// WithCloseOnContextDone) closes the module at its next check.
type budget struct {
	mu      sync.Mutex
	left    time.Duration
	start   time.Time
	timer   *time.Timer
	cancel  context.CancelCauseFunc
	paused  int
	expired bool
	cause   error
}

func startBudget(d time.Duration, cancel context.CancelCauseFunc, cause error) *budget {
	b := &budget{left: d, start: time.Now(), cancel: cancel, cause: cause}
	b.timer = time.AfterFunc(d, b.fire)
	return b
}

func (b *budget) fire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.paused > 0 || b.expired {
		return
	}
	b.expired = true
	b.cancel(b.cause)
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
	if b.paused > 0 || b.expired {
		return
	}
	if b.left <= 0 {
		b.expired = true
		b.cancel(b.cause)
		return
	}
	b.start = time.Now()
	b.timer.Reset(b.left)
}

// stop ends the budget when the call returns; nothing cancels after it.
func (b *budget) stop() {
	b.mu.Lock()
	b.timer.Stop()
	b.expired = true
	b.mu.Unlock()
}
