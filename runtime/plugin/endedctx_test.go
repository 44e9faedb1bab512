package plugin

import (
	"context"
	"strings"
	"testing"
)

// A call whose context has already ended is stopped before the guest
// computes anything: not a watchdog tick later, when a short call would
// already have done its work. The state tool's host-side counter shows
// whether the guest ran.
func TestEndedContextStopsBeforeComputing(t *testing.T) {
	h := newHost(t)
	if _, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t),
		Config: cfg(t, map[string]any{"tools": []string{"state", "counter"}})}); err != nil {
		t.Fatal(err)
	}
	a := agent("a", "m")
	if r, err := h.CallTool(bg, a, "state", nil); err != nil || r.Text != "1" {
		t.Fatalf("first call: %+v, %v", r, err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	for range 5 {
		for _, tool := range []string{"state", "counter"} {
			r, err := h.CallTool(ctx, a, tool, nil)
			if err == nil || !strings.Contains(err.Error(), "call cancelled") {
				t.Fatalf("%s under an ended context: %+v, %v; want it stopped", tool, r, err)
			}
		}
	}
	if r, err := h.CallTool(bg, a, "state", nil); err != nil || r.Text != "2" {
		t.Fatalf("after the ended calls the state is %+v, %v; want 2 (the ended calls must not have run)", r, err)
	}
}
