package plugin

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

// A call that queued behind a call whose cancellation discarded the
// agent's instance runs on a fresh instance instead of failing with
// "instance closed" (an MCP client's cancellation and its next call can
// arrive in either order).
func TestCallQueuedBehindDiscardedInstance(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	if _, err := h.Load(ctx, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{"tools": []string{"spin", "echo"}})}); err != nil {
		t.Fatal(err)
	}
	a := agent("a", "m")
	sctx, cancel := context.WithCancel(ctx)
	spun := make(chan error, 1)
	go func() {
		_, err := h.CallTool(sctx, a, "spin", []byte(`{}`))
		spun <- err
	}()
	time.Sleep(300 * time.Millisecond) // the spin holds the instance
	queued := make(chan error, 1)
	var res tool.Result
	go func() {
		var err error
		res, err = h.CallTool(ctx, a, "echo", []byte(`{"text":"next"}`))
		queued <- err
	}()
	time.Sleep(300 * time.Millisecond) // the echo waits for the instance
	cancel()
	if err := <-spun; err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("spin after cancel: %v", err)
	}
	select {
	case err := <-queued:
		if err != nil || res.IsError || res.Text != "next" {
			t.Fatalf("queued echo = %+v, %v; want it to run on a fresh instance", res, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the queued echo never finished")
	}
}
