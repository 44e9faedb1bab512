package plugin

import (
	"context"
	"errors"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// A guest whose dsh_abi_version never returns is killed by the init
// budget, instead of holding the load (and the registry) forever.
func TestABIVersionRunsUnderBudget(t *testing.T) {
	p, err := guestbuild.Build("testdata/hostile/spinabi")
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Name: "spin", Source: p,
		Grants: &config.Grants{Env: []string{"SPIN_ALWAYS"}, Limits: config.Limits{InitTimeout: 200 * time.Millisecond, CallTimeout: 200 * time.Millisecond}}}
	// The 5 s bound below is for the load, not the compiler: compile the
	// module before the clock starts.
	compileFirst(t, spec)
	t.Setenv("SPIN_ALWAYS", "1")
	h := newHost(t)
	// The context outlives the test's patience (5 s), so what stops the
	// guest is the 200 ms budget, not the context.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := h.Load(ctx, spec)
		done <- err
	}()
	select {
	case err := <-done:
		var ce *CallError
		if !errors.Is(err, ErrComputeBudget) || !errors.As(err, &ce) || ce.Export != "dsh_abi_version" || ce.Plugin != "spin" {
			t.Fatalf("Load = %v; want the compute budget to stop dsh_abi_version", err)
		}
		if h.Plugin("spin") != nil || len(h.Plugins()) != 0 {
			t.Fatalf("a plugin whose ABI check was killed is loaded: %v", h.Plugins())
		}
	case <-time.After(5 * time.Second):
		// show the registry writer lock is held
		upd := make(chan struct{})
		go func() { h.Registry().Update(func(*prompt.Tx) error { return nil }); close(upd) }()
		select {
		case <-upd:
			t.Fatal("Load hung >5s (InitTimeout 200ms) but registry free")
		case <-time.After(time.Second):
			t.Fatal("Load hung >5s despite InitTimeout=200ms; registry writer lock held too (all Loads/Unloads/registrations blocked)")
		}
	}
}
