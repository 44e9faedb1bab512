package extism

import (
	"context"
	"log/slog"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/netguard"
)

type stubHost struct{}

func (stubHost) Context() context.Context     { return context.Background() }
func (stubHost) Logger() *slog.Logger         { return slog.New(slog.DiscardHandler) }
func (stubHost) RateLog(int, func())          {}
func (stubHost) Config(string) (string, bool) { return "", false }
func (stubHost) Fetch(netguard.Request) (netguard.Response, error) {
	return netguard.Response{}, nil
}

// TestServeNeverPanics: a host function that panics fails the call with
// its name and "internal error", once, and raises the abort flag; an
// unknown name fails it too.
func TestServeNeverPanics(t *testing.T) {
	x := NewInstance(kernelAlone(t, 2))
	impls["test_panic"] = func(Host, *Instance, []uint64) error { panic("boom") }
	t.Cleanup(func() { delete(impls, "test_panic") })
	x.Begin()
	x.Serve(stubHost{}, "test_panic", make([]uint64, 2))
	if err := x.Failure(); err == nil || err.Error() != "test_panic: internal error" || x.abort.Get() != 1 {
		t.Fatalf("after a panic: failure %v, abort %d", err, x.abort.Get())
	}
	x.Begin()
	if x.Failure() != nil || x.abort.Get() != 0 {
		t.Fatal("Begin kept the last call's failure")
	}
	x.Serve(stubHost{}, "no_such_function", make([]uint64, 2))
	if x.Failure() == nil {
		t.Fatal("an unknown host function did not fail the call")
	}
}
