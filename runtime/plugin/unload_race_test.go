package plugin

import (
	"context"
	"encoding/json"
	"fmt"
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
