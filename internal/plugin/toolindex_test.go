package plugin

import (
	"errors"
	"testing"
)

// TestToolIndexFollowsLoads checks that the tool index never answers with
// a plugin that no longer has the tool: a tool a reload drops is not
// found, one it adds resolves to the new plugin, and a tool that moves to
// another plugin resolves to that one.
func TestToolIndexFollowsLoads(t *testing.T) {
	h := newHost(t)
	src := testkit(t)
	a := agent("a", "m")
	tools := func(names ...string) Spec {
		return Spec{Name: "kit", Source: src, Config: cfg(t, map[string]any{"tools": names})}
	}
	if _, err := h.Load(bg, tools("counter")); err != nil {
		t.Fatal(err)
	}
	if r, err := h.CallTool(bg, a, "counter", nil); err != nil || r.Text != "1" {
		t.Fatalf("counter: %+v %v", r, err)
	}
	// The reload renames the plugin's tool: counter is gone, echo is the
	// new plugin's.
	neu, err := h.Reload(bg, tools("echo"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.CallTool(bg, a, "counter", nil); !errors.Is(err, ErrNoTool) {
		t.Fatalf("counter after the reload dropped it: err = %v", err)
	}
	if r, err := h.CallTool(bg, a, "echo", []byte(`{"text":"hi"}`)); err != nil || r.Text != "hi" {
		t.Fatalf("echo after the reload: %+v %v", r, err)
	}
	if got := h.toolOwner("echo"); got != neu {
		t.Fatalf("echo resolves to %p, want the reloaded plugin %p", got, neu)
	}
	// The tool moves to another plugin.
	if err := h.Unload(bg, "kit"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.CallTool(bg, a, "echo", []byte(`{"text":"hi"}`)); !errors.Is(err, ErrNoTool) {
		t.Fatalf("echo after unload: err = %v", err)
	}
	other, err := h.Load(bg, Spec{Name: "other", Source: src, Config: cfg(t, map[string]any{"tools": []string{"echo"}})})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.toolOwner("echo"); got != other {
		t.Fatalf("echo resolves to %p, want plugin other %p", got, other)
	}
	if r, err := h.CallTool(bg, a, "echo", []byte(`{"text":"there"}`)); err != nil || r.Text != "there" {
		t.Fatalf("echo in other: %+v %v", r, err)
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	for name, p := range h.tools {
		if h.plugins[p.name] != p {
			t.Errorf("index entry %q holds a plugin that is not loaded", name)
		}
	}
}
