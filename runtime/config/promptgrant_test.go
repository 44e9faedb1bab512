package config

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestPromptAndEventGrants(t *testing.T) {
	e, err := Load("p.yaml", []byte("source: builtin:x\ngrants:\n  prompt: {order: [-50, 199]}\n  events: [system-prompt/assemble, tool/post-execute, \"plugin:x/ev\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := e.Grants.Prompt.OrderRange(); lo != -50 || hi != 199 {
		t.Fatalf("order = [%d, %d]", lo, hi)
	}
	if !e.Grants.GrantsEvent("system-prompt/assemble") || e.Grants.GrantsEvent("agent/request") {
		t.Fatalf("events = %v", e.Grants.Events)
	}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := e.Grants.Prompt.CheckOrder("s", -51); !errors.Is(err, ErrNotGranted) || !strings.Contains(err.Error(), "grants.prompt.order [-50, 199]") {
		t.Fatalf("CheckOrder(-51) = %v", err)
	}
	if err := e.Grants.Prompt.CheckOrder("s", 199); err != nil {
		t.Fatal(err)
	}

	// The default: after the persona, at 1 and above.
	var none Grants
	if lo, hi := none.Prompt.OrderRange(); lo != 1 || hi != math.MaxInt {
		t.Fatalf("default order = [%d, %d]", lo, hi)
	}
	for _, o := range []int{0, -1, -100, -1000000, math.MinInt} {
		err := none.Prompt.CheckOrder("evil:first", o)
		if !errors.Is(err, ErrNotGranted) || !strings.Contains(err.Error(), "grants.prompt.order [1, max]") {
			t.Errorf("order %d: %v", o, err)
		}
	}
	if len(none.Events) != 0 || none.GrantsEvent("system-prompt/assemble") {
		t.Fatal("events granted by default")
	}

	bad := []struct{ yaml, want string }{
		{"prompt: {order: [5]}", "p.yaml:3: grants.prompt.order: want a range [lo, hi]"},
		{"prompt: {order: 5}", "grants.prompt.order: want a range"},
		{"prompt: {order: [3, 1]}", "grants.prompt.order: [3, 1]: the low end is above the high end"},
		{"prompt: {order: [a, 1]}", "grants.prompt.order[0]: want an integer"},
		{"prompt: {order: [1, 2.5]}", "grants.prompt.order[1]: want an integer"},
		{"prompt: {place: 1}", "grants.prompt.place: unknown field"},
		{"events: [turn/start]", "grants.events[0]: turn/start is a contained event, not a waterfall: listening needs no grant"},
		{"events: [\"a b\"]", "grants.events[0]: event name"},
		{"events: system-prompt/assemble", "grants.events: want a list"},
	}
	for _, tc := range bad {
		_, err := Load("p.yaml", []byte("source: builtin:x\ngrants:\n  "+tc.yaml+"\n"))
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.yaml, err, tc.want)
		}
	}
	for _, g := range []Grants{{Prompt: PromptGrant{Order: &[2]int{2, 1}}}, {Events: []string{"agent/start"}}} {
		if err := (Entry{Source: "builtin:x", Grants: g}).Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Validate(%+v) = %v", g, err)
		}
	}
}
