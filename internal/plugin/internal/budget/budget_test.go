package budget

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// errHalted stands for a host's reason to stop a call (an unload, say).
var errHalted = errors.New("the plugin was unloaded")

// armedGuard returns a guard of a fallback (uninstrumented) call, armed.
func armedGuard(t *testing.T, limit, wall time.Duration) *Guard {
	t.Helper()
	w := NewWatchdog(func(err error) error { return err })
	t.Cleanup(w.Stop)
	g := NewGuard(w, nil, &Sleeper{})
	g.Arm(context.Background(), limit, wall)
	t.Cleanup(g.Disarm)
	return g
}

// waitStopped waits up to d for the guard to stop its call.
func waitStopped(g *Guard, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := g.Stopped(); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// TestHostWorkCounts: time in a host function is the call's compute, so
// the budget runs out during it; a bounded wait leaves the budget, but
// not the wall-clock cap.
func TestHostWorkCounts(t *testing.T) {
	g := armedGuard(t, 50*time.Millisecond, time.Hour)
	// No pause around host work any more: the watchdog stops the call
	// while "the host" works.
	if err := waitStopped(g, 2*time.Second); !errors.Is(err, ErrComputeBudget) {
		t.Fatalf("host work past the budget: %v", err)
	}

	g = armedGuard(t, 50*time.Millisecond, 300*time.Millisecond)
	g.BeginWait()
	if err := waitStopped(g, 150*time.Millisecond); err != nil {
		t.Fatalf("a bounded wait ran the compute budget down: %v", err)
	}
	if err := waitStopped(g, 2*time.Second); !errors.Is(err, ErrWallClock) || !strings.Contains(err.Error(), "300ms") {
		t.Fatalf("a wait past the wall-clock cap: %v", err)
	}
	g.EndWait()
}

// TestHaltCancelsHostWaits: halting a call cancels the context its host
// functions wait under, with the reason, and marks it stopped.
func TestHaltCancelsHostWaits(t *testing.T) {
	g := armedGuard(t, time.Hour, 0)
	ctx := g.HostCtx()
	if !g.Halt(errHalted) {
		t.Fatal("halt found no call")
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
		t.Fatal("the host context was not cancelled")
	}
	if !errors.Is(context.Cause(ctx), errHalted) || !errors.Is(g.Stopped(), errHalted) {
		t.Fatalf("cause %v, stopped %v", context.Cause(ctx), g.Stopped())
	}
	// A host context asked for after the stop is born cancelled.
	if g.HostCtx().Err() == nil {
		t.Fatal("a host context after the stop is live")
	}
}
