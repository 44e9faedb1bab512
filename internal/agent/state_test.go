package agent

import (
	"context"
	"github.com/dsh-wasm/dsh-wasm/internal/plugintest"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// A plugin's host-side state (the testkit "state" tool counts in it) is
// recorded in the session, and a resumed session on a fresh host — every
// instance and every in-memory store gone — finds it where it was.
func TestPluginStateSurvivesResume(t *testing.T) {
	store := newStore(t)
	sess, err := store.Create(session.Header{Cwd: "/srv/project"})
	if err != nil {
		t.Fatal(err)
	}
	id := sess.Header().ID
	prov := scripted(t,
		step(1, 1, callAnswer(call{"c1", "state", "{}"}, call{"c2", "state", "{}"})),
		step(1, 2, textAnswer("counted")),
		step(2, 1, callAnswer(call{"c3", "state", "{}"})),
		step(2, 2, textAnswer("counted again")),
	)
	run := func(sess *session.Session, text string) []string {
		t.Helper()
		reg := newRegistry(t, testPersona)
		bus := events.New(discard)
		state := NewPluginState()
		host, err := plugin.New(plugin.Options{Registry: reg, Bus: bus, Cache: plugintest.SharedCache(t), Logger: discard, State: state})
		if err != nil {
			t.Fatal(err)
		}
		defer host.Close(context.Background())
		loadTestkit(t, host, "kit", map[string]any{"tools": []string{"state"}}, config.Limits{})
		f := newFixture(t, Options{Session: sess, Registry: reg, Bus: bus, Tools: host, Provider: prov, State: state})
		res := f.prompt(t, text)
		f.Close(context.Background())
		if res.End.Kind != session.EndCompleted {
			t.Fatalf("turn = %+v", res)
		}
		var got []string
		for _, r := range ofType[session.ToolResult](t, sess.Events()) {
			got = append(got, r.Content[0].Text)
		}
		return got
	}
	if got := run(sess, "count"); len(got) != 2 || got[0] != "1" || got[1] != "2" {
		t.Fatalf("first run results %v", got)
	}
	if n := len(ofType[PluginStateChange](t, sess.Events())); n != 2 {
		t.Fatalf("%d plugin/state events recorded, want 2", n)
	}
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}
	reopened, err := store.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	if got := run(reopened, "again"); len(got) != 3 || got[2] != "3" {
		t.Fatalf("after resume results %v, want the count to go on at 3", got)
	}
}
