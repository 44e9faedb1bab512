package deploy_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
)

// Each Agent has its own plugin instances: the kit's in-guest counter
// counts per agent, and a closed agent calls nothing.
func TestAgentsAreSeparate(t *testing.T) {
	ctx := context.Background()
	d := open(t, deploy.Options{Plugins: []deploy.PluginSpec{testkit(t, "kit", map[string]any{"tools": []string{"counter"}})}})
	a, err := d.NewAgent(deploy.AgentOptions{Prefix: "x"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.NewAgent(deploy.AgentOptions{Prefix: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Facts().ID == b.Facts().ID || a.Facts().Model != d.Model() {
		t.Fatalf("facts %+v and %+v", a.Facts(), b.Facts())
	}
	count := func(ag *deploy.Agent) string {
		r, err := ag.CallTool(ctx, "counter", []byte(`{}`))
		if err != nil || r.IsError {
			t.Fatalf("counter = %+v, %v", r, err)
		}
		return r.Text
	}
	if got := []string{count(a), count(a), count(b)}; !slices.Equal(got, []string{"1", "2", "1"}) {
		t.Errorf("counters = %v, want a's 1 2 and b's own 1", got)
	}
	a.Close(ctx)
	if _, err := a.CallTool(ctx, "counter", []byte(`{}`)); !errors.Is(err, deploy.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	if got := count(b); got != "2" {
		t.Errorf("b after a closed = %s", got)
	}
	if _, err := d.NewAgent(deploy.AgentOptions{Cwd: "relative"}); err == nil {
		t.Error("a relative cwd was accepted")
	}
}

// Watch reports a tool change once Tools shows it.
func TestWatchSeesVisibleChanges(t *testing.T) {
	ctx := context.Background()
	d := open(t, deploy.Options{Plugins: []deploy.PluginSpec{testkit(t, "kit", map[string]any{"tools": []string{"echo"}})}})
	seen := make(chan []string, 4)
	stop := d.Watch(func(c deploy.Changes) {
		if !c.Tools {
			return
		}
		specs, err := d.Tools(ctx, deploy.PromptOptions{})
		if err != nil {
			t.Error(err)
		}
		var n []string
		for _, s := range specs {
			n = append(n, s.Name)
		}
		seen <- n
	})
	defer stop()
	if _, err := plugin.HostOf(d).Reload(ctx, deploy.HostSpec(testkit(t, "kit", map[string]any{"tools": []string{"echo", "counter"}}))); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case n := <-seen:
			if slices.Contains(n, "counter") {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Watch never reported the new tool as visible")
		}
	}
}
