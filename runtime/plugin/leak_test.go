package plugin

import (
	"context"
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
	p, err := h.Load(bg, Spec{Name: "kit", Source: src, Limits: Limits{CallTimeout: 200 * time.Millisecond}, Config: cfg(t, map[string]any{
		"sections": []map[string]any{{"name": "kit:dyn", "order": 1, "dynamic": true}}, "variables": []string{"kv"},
		"tools": []string{"counter", "trap", "spin"}, "subscribe": []map[string]any{{"event": "custom/ping"}},
	})})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		a := agent(id, "m")
		h.CallTool(bg, a, "counter", nil)
		h.CallTool(bg, a, "trap", nil)
		h.CallTool(bg, a, "spin", nil)
		h.Registry().Assemble(bg, prompt.AssembleContext{Agent: a})
		h.Bus().Emit(WithAgent(bg, a), "custom/ping", []byte(`{}`))
	}
	h.EndAgent(bg, "a")
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
