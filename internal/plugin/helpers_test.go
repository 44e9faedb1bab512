package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/prereq"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

var (
	cacheOnce sync.Once
	testCache *Cache
	cacheErr  error
)

// sharedCache is one on-disk compilation cache for every test in the
// package, so each module compiles once per machine, not once per test.
func sharedCache(t testing.TB) *Cache {
	cacheOnce.Do(func() {
		dir, err := guestbuild.CompileCacheDir()
		if err != nil {
			cacheErr = err
			return
		}
		testCache, cacheErr = NewCache(dir)
	})
	if cacheErr != nil {
		t.Fatal(cacheErr)
	}
	return testCache
}

// compileFirst loads spec once, in a host of its own on the shared
// cache, and closes it: a later Load of the same module finds its
// interrupt rewrite and its machine code in the cache. A test whose
// wall-clock bound covers a Load calls it first, so that the bound
// measures the load and not the compiler, which on a cold cache and a
// loaded two-core machine takes seconds. What the load itself does is
// not the test's: a spinning guest is stopped by a short init budget,
// an error is ignored.
func compileFirst(t testing.TB, spec Spec) {
	t.Helper()
	h, err := New(Options{Registry: prompt.NewRegistry(nil), Cache: sharedCache(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	g := spec.effectiveGrants()
	g.Limits.InitTimeout, g.Limits.CallTimeout = 100*time.Millisecond, 100*time.Millisecond
	spec.Grants = &g
	_, _ = h.Load(context.Background(), spec)
}

func testkit(t testing.TB) string {
	t.Helper()
	p, err := guestbuild.Build("testdata/guests/testkit")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newHost(t testing.TB) *Host {
	t.Helper()
	h, err := New(Options{Registry: prompt.NewRegistry(nil), Cache: sharedCache(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

func cfg(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func agent(id, model string) *prompt.AgentFacts {
	return &prompt.AgentFacts{ID: id, Session: "s-" + id, Model: model}
}

// cGuest builds testdata/guests/bench-c. Without clang it skips, except
// under CI (CI=true), where .ci/run installs clang and a skip would hide a
// broken setup.
func cGuest(t testing.TB) string {
	t.Helper()
	p, err := guestbuild.Build("testdata/guests/bench-c")
	checkCBuild(t, err)
	return p
}

// checkCBuild fails t on a C build error, or skips it when clang is not
// installed outside CI.
func checkCBuild(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, guestbuild.ErrNoClang) || errors.Is(err, guestbuild.ErrNoWat2Wasm) {
		prereq.Missing(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// snapshot is a grants.limits.snapshot value.
func snapshot(on bool) *bool { return &on }
