package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/lazy"
	"testing"
	"time"
)

type regProbe struct {
	Fn  string `json:"fn"`
	Req string `json:"req"`
}

func registrationProbes(n int, unregister bool) []byte {
	var ps []regProbe
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("s%d", i)
		ps = append(ps, regProbe{"section_register", `{"name":"` + name + `","text":"x"}`})
		if unregister {
			ps = append(ps, regProbe{"section_unregister", `{"name":"` + name + `"}`})
		}
	}
	b, _ := json.Marshal(ps)
	return b
}

// The load-time instance registering while the plugin is unloaded:
// neither may deadlock, and nothing the plugin registers may outlive it.
func TestUnloadWhileRegistering(t *testing.T) {
	bg := context.Background()
	kit := testkit(t)
	hung, orphans := 0, 0
	for trial := 0; trial < 12; trial++ {
		h := newHost(t)
		if _, err := h.Load(bg, Spec{Name: "kit", Source: kit, Config: cfg(t, map[string]any{"tools": []string{"probe"}})}); err != nil {
			t.Fatal(err)
		}
		unreg := trial%2 == 0
		started := make(chan struct{})
		callDone := make(chan struct{})
		go func() {
			close(started)
			h.CallTool(bg, nil, "probe", registrationProbes(300, unreg)) // nil facts: the load-time instance
			close(callDone)
		}()
		<-started
		time.Sleep(time.Duration(trial%5+1) * time.Millisecond)
		unloadDone := make(chan error, 1)
		go func() { unloadDone <- h.Unload(bg, "kit") }()
		select {
		case <-unloadDone:
			<-callDone
			secs, _, _ := h.Registry().Names()
			if len(secs) > 0 {
				orphans++
				t.Logf("trial %d (unregister=%v): after Unload the registry still holds %d sections of the unloaded plugin, e.g. %v", trial, unreg, len(secs), secs[:min(3, len(secs))])
			}
		case <-time.After(10 * time.Second):
			hung++
			t.Logf("trial %d (unregister=%v): DEADLOCK: Unload and the guest's section_register both stuck >10s", trial, unreg)
		}
	}
	if hung+orphans > 0 {
		t.Fatalf("%d deadlocks, %d trials with orphaned registrations", hung, orphans)
	}
}

// No instance is made once a plugin has started closing, even while the
// runtime is still open because someone else holds it (a check running in
// an instance no slot owns, a slow creation): holdRuntime is the one gate
// every instance goes through (newInstanceWith), and it shuts at close's
// first step.
func TestNoInstanceOnceClosing(t *testing.T) {
	h := newHost(t)
	p, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{"tools": []string{"counter"}})})
	if err != nil {
		t.Fatal(err)
	}
	if !p.holdRuntime() {
		t.Fatal("holdRuntime refused before the plugin closed")
	}
	held := true
	defer func() {
		if held {
			p.letGoRuntime()
		}
	}()
	unloaded := make(chan error, 1)
	go func() { unloaded <- h.Unload(bg, "kit") }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		p.users.mu.Lock()
		stopping := p.users.stopping
		p.users.mu.Unlock()
		if stopping {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Unload did not start closing the plugin")
		}
	}
	for _, c := range []struct {
		what string
		make func() (*instance, error)
	}{
		{"an agent's instance", func() (*instance, error) { return p.newInstance(bg, false, agent("late", "m")) }},
		{"a load-time instance", func() (*instance, error) { return p.newInstance(bg, true, nil) }},
		{"a check's bare instance", func() (*instance, error) { return p.newInstanceWith(bg, true, nil, lazy.ClockShift, true) }},
	} {
		in, err := c.make()
		if in != nil {
			in.close(errDiscarded)
		}
		if !errors.Is(err, ErrNotLoaded) {
			t.Errorf("%s made while the plugin closes: %v, want ErrNotLoaded", c.what, err)
		}
	}
	if _, err := h.CallTool(bg, agent("late2", "m"), "counter", nil); err == nil {
		t.Error("a tool call for a new agent ran while the plugin closes")
	}
	p.letGoRuntime()
	held = false
	if err := <-unloaded; err != nil {
		t.Fatal(err)
	}
	if n := p.Instances(); n != 0 {
		t.Fatalf("%d instances after the unload", n)
	}
}
