package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/abi/dsh"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/budget"
	"github.com/tetratelabs/wazero/api"
)

func hogGuest(t testing.TB) string {
	t.Helper()
	p, err := guestbuild.Build("testdata/hostile/hog")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// armed returns a guard of a fallback (uninstrumented) call, armed.
func armedGuard(t *testing.T, limit, wall time.Duration) *budget.Guard {
	t.Helper()
	w := budget.NewWatchdog(classifyTrap)
	t.Cleanup(w.Stop)
	g := budget.NewGuard(w, nil, &budget.Sleeper{})
	g.Arm(context.Background(), limit, wall)
	t.Cleanup(g.Disarm)
	return g
}

type fakeModule struct{ api.Module }

// TestStoppedCallHostCallsCanceled: a host function called by a stopped
// call answers canceled, naming why, without doing its work.
func TestStoppedCallHostCallsCanceled(t *testing.T) {
	p := &Plugin{limits: limitsOf(config.Grants{}.Effective())}
	mod := &fakeModule{}
	in := &instance{p: p}
	p.byModule.Store(api.Module(mod), in)
	g := armedGuard(t, time.Hour, 0)
	g.Halt(errAgentEnd)
	in.cur = &callState{guard: g}
	var f hostfns.Func
	for _, x := range hostfns.Funcs {
		if x.Name == hostfns.FnStateGet {
			f = x
		}
	}
	worked := false
	fn := p.wrapHost(f, func(dsh.Host, []byte) ([]byte, hostfns.Status, string) {
		worked = true
		return nil, 0, ""
	})
	stack := []uint64{0, 10, 0, 0}
	fn(context.Background(), mod, stack)
	st, n := hostfns.Unpack(stack[0])
	if st != hostfns.ErrCanceled || worked || !strings.Contains(string(in.scratch.Pending), "the agent ended") || int(n) != len(in.scratch.Pending) {
		t.Fatalf("status %v, worked %v, message %q", st, worked, in.scratch.Pending)
	}
}

// TestWaitForGraph: a chain about to wait for an instance held by a
// chain that waits for it is refused with ErrDeadlock at once; other
// waits wait, and end with their context.
func TestWaitForGraph(t *testing.T) {
	newInst := func() *instance {
		return &instance{sem: make(chan struct{}, 1), closing: make(chan struct{})}
	}
	x, y, z := newInst(), newInst(), newInst()
	a, b, c := &callState{}, &callState{}, &callState{}
	bg := context.Background()
	for _, p := range []struct {
		in   *instance
		root *callState
	}{{x, a}, {y, b}, {z, c}} {
		if err := p.in.acquire(bg, p.root); err != nil {
			t.Fatal(err)
		}
	}
	// a waits for y (b's); b waits for z (c's); c asking for x closes
	// the cycle a -> b -> c -> a.
	got := make(chan error, 2)
	go func() { got <- y.acquire(bg, a) }()
	go func() { got <- z.acquire(bg, b) }()
	deadline := time.Now().Add(5 * time.Second)
	for a.waitingFor.Load() == nil || b.waitingFor.Load() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the waits did not start")
		}
		time.Sleep(time.Millisecond)
	}
	if err := x.acquire(bg, c); !errors.Is(err, ErrDeadlock) {
		t.Fatalf("closing the cycle: %v", err)
	}
	// c gives up z: b gets it, then gives y up: a gets it.
	z.release()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	y.release()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// A wait with no cycle ends with its context.
	ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
	defer cancel()
	if err := x.acquire(ctx, c); err == nil || errors.Is(err, ErrDeadlock) || !strings.Contains(err.Error(), "cancelled while waiting") {
		t.Fatalf("a wait under an ending context: %v", err)
	}
}

// TestEventCycle: two plugins each listen for the other's event, and two
// calls for one agent emit at once, each holding its own instance. One
// emit is refused with ErrDeadlock; nothing hangs (run with -race).
func TestEventCycle(t *testing.T) {
	h := newHost(t)
	hog := hogGuest(t)
	for _, p := range []struct{ name, listen string }{{"hoga", "plugin:hogb/ping"}, {"hogb", "plugin:hoga/ping"}} {
		if _, err := h.Load(bg, Spec{Name: p.name, Source: hog, Grants: &config.Grants{Limits: config.Limits{CallTimeout: 10 * time.Second}},
			Config: cfg(t, map[string]any{"self": p.name, "prefix": p.name[3:] + "_", "listen": p.listen, "emit": "plugin:" + p.name + "/pong"})}); err != nil {
			t.Fatal(err)
		}
	}
	a := agent("a", "m")
	var wg sync.WaitGroup
	out := make([]string, 2)
	for i, p := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args, _ := json.Marshal(map[string]any{"op": "emit", "event": "plugin:hog" + p + "/ping", "ms": 200})
			r, err := h.CallTool(bg, a, p+"_hog", args)
			if err != nil {
				out[i] = "error: " + err.Error()
				return
			}
			out[i] = r.Text
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("deadlock: the two calls did not return")
	}
	if !strings.Contains(out[0]+out[1], ErrDeadlock.Error()) {
		t.Fatalf("no emit refused as a deadlock: %q", out)
	}
	start := time.Now()
	if err := h.Unload(bg, "hoga"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Unload took %v", d)
	}
}

// TestUnloadStopsCall: Unload of a plugin whose call spins under a long
// budget stops the call and returns without waiting for it to end.
func TestUnloadStopsCall(t *testing.T) {
	h := newHost(t)
	if _, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Grants: &config.Grants{Limits: config.Limits{CallTimeout: time.Minute}},
		Config: cfg(t, map[string]any{"tools": []string{"counter", "spin"}})}); err != nil {
		t.Fatal(err)
	}
	a := agent("a", "m")
	if _, err := h.CallTool(bg, a, "counter", nil); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { _, err := h.CallTool(bg, a, "spin", nil); errc <- err }()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if err := h.Unload(bg, "kit"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Unload took %v", d)
	}
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "the plugin was unloaded") {
			t.Fatalf("the spinning call: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the spinning call goes on after Unload")
	}
}

func TestLogRate(t *testing.T) {
	now := 1000 * time.Second
	r := &logRate{now: func() time.Duration { return now }}
	for i := 0; i < 10; i++ {
		if ok, _, _ := r.allow(100, 10); !ok {
			t.Fatalf("record %d refused within the limit", i)
		}
	}
	ok, notice, _ := r.allow(100, 1)
	if ok || !strings.Contains(notice, "log rate limit reached") {
		t.Fatalf("past the limit: ok %v, notice %q", ok, notice)
	}
	if ok, notice, _ := r.allow(100, 1); ok || notice != "" {
		t.Fatalf("the second refusal: ok %v, notice %q (one warning only)", ok, notice)
	}
	now += logWindow
	ok, notice, dropped := r.allow(100, 10)
	if !ok || dropped != 2 || !strings.Contains(notice, "dropped") {
		t.Fatalf("the next minute: ok %v, dropped %d, notice %q", ok, dropped, notice)
	}
}

func TestRequestLimits(t *testing.T) {
	p := &Plugin{limits: limitsOf(config.Grants{Limits: config.Limits{PromptBytes: 1000}}.Effective())}
	for fn, want := range map[string]uint32{
		hostfns.FnStateGet: dsh.SmallRequest, hostfns.FnEnvGet: dsh.SmallRequest, hostfns.FnExecKill: dsh.SmallRequest,
		hostfns.FnStateSet: hostfns.MaxRequestBytes, hostfns.FnSectionRegister: 6*1000 + dsh.SmallRequest,
		hostfns.FnLog: hostfns.MaxRequestBytes, hostfns.FnHTTPRequest: hostfns.MaxRequestBytes,
	} {
		if got, _ := p.requestLimit(fn); got != want {
			t.Errorf("requestLimit(%s) = %d, want %d", fn, got, want)
		}
	}
}

// TestCloseDuringLoad: Close while a Load's dsh_init spins under a long
// init budget stops the init and returns without waiting for the budget.
func TestCloseDuringLoad(t *testing.T) {
	h, err := New(Options{Registry: newHost(t).Registry(), Cache: sharedCache(t)})
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Name: "kit", Source: testkit(t), Grants: &config.Grants{Limits: config.Limits{InitTimeout: time.Minute}},
		Config: cfg(t, map[string]any{"init_spin": true})}
	// Compiled first, so that 300 ms from now the load is in dsh_init,
	// and the bounds below are Close's, not the compiler's.
	compileFirst(t, spec)
	errc := make(chan error, 1)
	go func() {
		_, err := h.Load(bg, spec)
		errc <- err
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	if err := h.Close(bg); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Close took %v during a spinning dsh_init", d)
	}
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "closed") {
			t.Fatalf("the load: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the load goes on after Close")
	}
}
