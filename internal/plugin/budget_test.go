package plugin

import (
	"context"
	"errors"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/budget"
)

// TestWatchdogLifecycle: the watchdog's goroutine exists only while calls
// happen (and for budget.Linger after), and a call made after it exited
// is still stopped when its budget runs out.
func TestWatchdogLifecycle(t *testing.T) {
	h := newHost(t)
	const limit = 100 * time.Millisecond
	if _, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Grants: &config.Grants{Limits: config.Limits{CallTimeout: limit}},
		Config: cfg(t, map[string]any{"tools": []string{"counter", "spin"}})}); err != nil {
		t.Fatal(err)
	}
	a := agent("a", "m")
	spin := func() {
		t.Helper()
		start := time.Now()
		_, err := h.CallTool(bg, a, "spin", nil)
		if !errors.Is(err, ErrComputeBudget) {
			t.Fatalf("spin: %v", err)
		}
		if d := time.Since(start); d < limit {
			t.Fatalf("spin stopped after %v, before its budget of %v", d, limit)
		}
	}
	spin()
	if !h.wd.Running() {
		t.Fatal("no watchdog right after a call")
	}
	deadline := time.Now().Add(budget.Linger + 5*time.Second)
	for h.wd.Running() {
		if time.Now().After(deadline) {
			t.Fatal("the watchdog did not stop when idle")
		}
		time.Sleep(20 * time.Millisecond)
	}
	spin() // a fresh watchdog stops it
	if _, err := h.CallTool(bg, a, "counter", nil); err != nil {
		t.Fatalf("a call after the kill: %v", err)
	}
}

// TestCancelledContextStopsAtOnce: a call whose context has already ended
// is stopped at its first check, not a watchdog tick later, and says why.
func TestCancelledContextStopsAtOnce(t *testing.T) {
	h := newHost(t)
	if _, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t),
		Config: cfg(t, map[string]any{"tools": []string{"counter", "spin"}})}); err != nil {
		t.Fatal(err)
	}
	a := agent("a", "m")
	if _, err := h.CallTool(bg, a, "counter", nil); err != nil { // creates the instance
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	start := time.Now()
	_, err := h.CallTool(ctx, a, "spin", nil)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the cancelled call ran %v", d)
	}
	if err == nil || !strings.Contains(err.Error(), "call cancelled") || errors.Is(err, ErrComputeBudget) {
		t.Fatalf("spin under a cancelled context: %v", err)
	}
}

// TestBudgetsOfConcurrentCalls: calls of many agents at once each get
// their own budget; the spinning ones are all stopped and the others all
// succeed.
func TestBudgetsOfConcurrentCalls(t *testing.T) {
	h := newHost(t)
	if _, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Grants: &config.Grants{Limits: config.Limits{CallTimeout: 200 * time.Millisecond}},
		Config: cfg(t, map[string]any{"tools": []string{"counter", "spin"}})}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := agent(strings.Repeat("x", i+1), "m")
			if i%2 == 0 {
				if _, err := h.CallTool(bg, a, "spin", nil); !errors.Is(err, ErrComputeBudget) {
					errs <- err
				}
				return
			}
			for range 200 {
				if r, err := h.CallTool(bg, a, "counter", nil); err != nil || r.IsError {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("call: %v", err)
	}
	if n := h.wd.Active(); n != 0 {
		t.Fatalf("%d calls counted as active after all returned", n)
	}
}
