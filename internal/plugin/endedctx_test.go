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

// The same holds for a community plugin: its calls go through the same
// call path, so an ended context stops the call before the kernel is
// reset or the guest entered, and the agent's instance stays whole.
func TestEndedContextCommunityCallKeepsTheInstance(t *testing.T) {
	h := newHost(t)
	p, err := h.Load(bg, Spec{Name: "v1", Source: communityGuest(t, "mcp-v1")})
	if err != nil {
		t.Fatal(err)
	}
	a := agent("a", "m")
	if r, err := h.CallTool(bg, a, "echo", []byte(`{"text":"x"}`)); err != nil || r.Text != "x" {
		t.Fatalf("first call: %+v, %v", r, err)
	}
	before, err := p.instanceFor(bg, a)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	for range 3 {
		r, err := h.CallTool(ctx, a, "echo", []byte(`{"text":"x"}`))
		if err == nil || !strings.Contains(err.Error(), "call cancelled before it started") {
			t.Fatalf("echo under an ended context: %+v, %v; want it refused before it started", r, err)
		}
	}
	after, err := p.instanceFor(bg, a)
	if err != nil || after != before || after.closed.Load() {
		t.Fatalf("the agent's instance was replaced or discarded by calls that never started (%v)", err)
	}
}
