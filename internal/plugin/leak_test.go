package plugin

import (
	"context"
	"errors"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// TestNoLeaks loads a plugin, runs agents through every kind of call,
// traps, kills and unloads, and checks that no goroutine and no instance
// outlives the host.
func TestNoLeaks(t *testing.T) {
	src := testkit(t)
	cache := sharedCache(t)
	runtime.GC()
	before := runtime.NumGoroutine()
	h, err := New(Options{Registry: prompt.NewRegistry(nil), Cache: cache, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := h.Load(bg, Spec{Name: "kit", Source: src, Grants: &config.Grants{Limits: config.Limits{CallTimeout: 200 * time.Millisecond}}, Config: cfg(t, map[string]any{
		"sections": []map[string]any{{"name": "kit:dyn", "order": 1, "dynamic": true}}, "variables": []string{"kv"},
		"tools": []string{"counter", "trap", "spin"}, "subscribe": []map[string]any{{"event": "custom/ping"}},
	})})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		a := agent(id, "m")
		if r, err := h.CallTool(bg, a, "counter", nil); err != nil || r.IsError || r.Text != "1" {
			t.Fatalf("agent %s counter: %+v, %v", id, r, err)
		}
		if _, err := h.CallTool(bg, a, "trap", nil); !errors.Is(err, ErrTrap) {
			t.Fatalf("agent %s trap: %v", id, err)
		}
		if _, err := h.CallTool(bg, a, "spin", nil); !errors.Is(err, ErrComputeBudget) {
			t.Fatalf("agent %s spin: %v", id, err)
		}
		asm, err := h.Registry().Assemble(bg, prompt.AssembleContext{Agent: a})
		if err != nil || len(asm.Sections) != 1 || asm.Sections[0].Text != "agent "+id+" runs m" || asm.Variables["kv"] != (prompt.Value{Text: "kv:m", OK: true, Owner: "plugin kit"}) {
			t.Fatalf("agent %s assembly: %+v, %v", id, asm, err)
		}
		if err := h.Bus().Emit(prompt.WithAgent(bg, a), "custom/ping", []byte(`{}`)); err != nil {
			t.Fatalf("agent %s emit: %v", id, err)
		}
		// The instance that trapped and the one killed were replaced.
		if r, err := h.CallTool(bg, a, "counter", nil); err != nil || r.Text != "1" {
			t.Fatalf("agent %s counter on a fresh instance: %+v, %v", id, r, err)
		}
	}
	if n := p.Instances(); n != 4 {
		t.Fatalf("%d instances open, want the load-time one and one per agent", n)
	}
	h.EndAgent(bg, "a")
	if n := p.Instances(); n != 3 {
		t.Fatalf("%d instances open after EndAgent(a), want 3", n)
	}
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := p.Instances(); n != 0 {
		t.Fatalf("%d instances open after Close", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("goroutines: %d before, %d after Close\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}
