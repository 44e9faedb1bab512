package agent

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// TestAgentOpenListenerRefusesTheOpen: a failing agent/open listener
// fails New with its error, before agent/start, and what the runner holds
// for the agent is let go.
func TestAgentOpenListenerRefusesTheOpen(t *testing.T) {
	bus := events.New(discard)
	started := false
	if _, err := bus.On(events.EventAgentStart, "test", func(context.Context, any) error { started = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.On(events.EventAgentOpen, "test", func(ctx context.Context, payload any) error {
		if ev, ok := payload.(*AgentEvent); !ok || ev.Agent.Cwd != "/srv/project" {
			t.Errorf("agent/open payload %#v", payload)
		}
		return errors.New("hooks.json:3: bad policy")
	}); err != nil {
		t.Fatal(err)
	}
	tools := echoTools()
	sess := newSession(t, newStore(t), session.Header{Cwd: "/srv/project"})
	_, err := New(context.Background(), Options{Session: sess, Provider: scripted(t), Registry: newRegistry(t, testPersona), Tools: tools, Bus: bus, Logger: discard})
	if err == nil || !errors.Is(err, ErrListener) || !strings.Contains(err.Error(), `"agent/open"`) || !strings.Contains(err.Error(), "hooks.json:3: bad policy") {
		t.Fatalf("New: %v, want the agent/open listener's error", err)
	}
	if started {
		t.Error("agent/start was emitted for an agent whose open failed")
	}
	if !slices.Equal(tools.ended, []string{sess.Header().ID}) {
		t.Errorf("EndAgent calls %q, want the refused agent's", tools.ended)
	}
}
