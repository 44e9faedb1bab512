package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// These tests run the loop with the real plugin host and the testkit
// guest (testdata/guests/testkit).

// A plugin section referencing {{cwd}} fails the turn on a cwd-less
// session; once the plugin is unloaded the same agent's next turn runs.
func TestRenderFailureMidConversation(t *testing.T) {
	reg := newRegistry(t, testPersona)
	bus := events.New(discard)
	host := newHost(t, reg, bus)
	store := newStore(t)
	sess := newSession(t, store, session.Header{}) // no cwd
	f := newFixture(t, Options{Session: sess, Registry: reg, Bus: bus, Tools: host, Provider: scripted(t,
		step(1, 1, textAnswer("first")),
		step(3, 1, textAnswer("third")),
	)})

	if res := f.prompt(t, "one"); res.End.Kind != session.EndCompleted {
		t.Fatalf("turn 1 = %+v", res)
	}
	loadTestkit(t, host, "workspace", map[string]any{
		"sections": []map[string]any{{"name": "workspace:cwd", "order": 50, "text": "You work in {{cwd}}."}},
	}, config.Limits{})

	res := f.prompt(t, "two")
	if res.End.Kind != session.EndError || res.End.Step != 1 || res.End.Code != "" || !errors.Is(res.Err, ErrPrompt) ||
		!errors.Is(res.Err, prompt.ErrNoValue) || !strings.Contains(res.End.Message, "workspace:cwd") || res.Steps != 0 {
		t.Fatalf("turn 2 = %+v", res)
	}
	// The failed render records no step: turn 2 is its start, its
	// message and its end (before: an empty step/start, step/end pair).
	var turn2 []string
	for _, e := range sess.Events() {
		if e.Type == session.TypeTurnStart && strings.Contains(string(e.Data), `"turn":2`) || len(turn2) > 0 && len(turn2) < 3 {
			turn2 = append(turn2, e.Type)
		}
	}
	if strings.Join(turn2, ",") != "turn/start,user/message,turn/end" {
		t.Fatalf("turn 2 recorded %v", turn2)
	}
	if n := len(f.prov.requests()); n != 1 {
		t.Fatalf("the model was asked %d times, want once (turn 1)", n)
	}
	if err := host.Unload(context.Background(), "workspace"); err != nil {
		t.Fatal(err)
	}
	res = f.prompt(t, "three")
	if res.End.Kind != session.EndCompleted || res.Text != "third" || res.Turn != 3 {
		t.Fatalf("turn 3 = %+v", res)
	}
	var ends []string
	for _, e := range ofType[session.TurnEnd](t, sess.Events()) {
		ends = append(ends, e.Reason.Kind)
	}
	if strings.Join(ends, ",") != "completed,error,completed" {
		t.Fatalf("turn ends = %v", ends)
	}
}

// A tool whose plugin traps gives the model an error result; the turn
// goes on to its next step.
func TestTrappingToolPlugin(t *testing.T) {
	reg := newRegistry(t, testPersona)
	bus := events.New(discard)
	host := newHost(t, reg, bus)
	loadTestkit(t, host, "kit", map[string]any{"tools": []string{"trap", "echo"}}, config.Limits{})
	f := newFixture(t, Options{Registry: reg, Bus: bus, Tools: host, Provider: scripted(t,
		step(1, 1, callAnswer(call{"t1", "trap", `{}`})),
		step(1, 2, callAnswer(call{"e1", "echo", `{"text":"still alive"}`})),
		step(1, 3, textAnswer("recovered")),
	)})
	res := f.prompt(t, "call the trap")
	if res.End.Kind != session.EndCompleted || res.Steps != 3 || res.Text != "recovered" {
		t.Fatalf("result = %+v", res)
	}
	rs := ofType[session.ToolResult](t, f.sess.Events())
	if len(rs) != 2 {
		t.Fatalf("%d results", len(rs))
	}
	if !rs[0].IsError || rs[0].Error == nil || rs[0].Error.Code != CodePluginFailure || !strings.Contains(rs[0].Content.Text(), "trap") {
		t.Fatalf("trap result = %+v", rs[0])
	}
	// The plugin's instance was replaced: the next call works.
	if rs[1].IsError || rs[1].Content.Text() != "still alive" {
		t.Fatalf("echo result after the trap = %+v", rs[1])
	}
	msgs := f.prov.requests()[1].Messages
	if last := msgs[len(msgs)-1]; last.Role != model.RoleTool || !last.IsError {
		t.Fatalf("the model did not see the error: %+v", last)
	}
}

// Cancel stops a tool that is running in its plugin.
func TestCancelRunningTool(t *testing.T) {
	reg := newRegistry(t, testPersona)
	bus := events.New(discard)
	host := newHost(t, reg, bus)
	loadTestkit(t, host, "kit", map[string]any{"tools": []string{"spin"}}, config.Limits{CallTimeout: 30 * time.Second})
	var a *Agent
	var once sync.Once
	f := newFixture(t, Options{Registry: reg, Bus: bus, Tools: host,
		Provider: scripted(t, step(1, 1, callAnswer(call{"s", "spin", `{}`}, call{"s2", "spin", `{}`}))),
		OnEvent: func(e session.Event) {
			if e.Type == session.TypeToolCall {
				once.Do(func() { time.AfterFunc(100*time.Millisecond, func() { a.Cancel("session/cancel") }) })
			}
		}})
	a = f.Agent
	start := time.Now()
	res := f.prompt(t, "spin")
	if res.End.Kind != session.EndAborted || res.End.Reason != "session/cancel" {
		t.Fatalf("result = %+v", res)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("cancel took %v", d)
	}
	// The running call records its result; the call after it records
	// nothing, as in the reference.
	rs := ofType[session.ToolResult](t, f.sess.Events())
	if len(rs) != 1 || rs[0].CallID != "s" || rs[0].Error == nil || rs[0].Error.Code != CodeAborted {
		t.Fatalf("results = %+v", rs)
	}
	if cs := ofType[session.ToolCall](t, f.sess.Events()); len(cs) != 1 {
		t.Fatalf("calls = %+v", cs)
	}
}

// The supply path: the agent has no model; a plugin states it on the
// system-prompt/assemble waterfall (so a {{model}} persona renders) and
// supplies it on the agent/request waterfall.
func TestLateBoundModelSupplyPath(t *testing.T) {
	reg := newRegistry(t, "You are powered by the {{model}} model.")
	bus := events.New(discard)
	host := newHost(t, reg, bus)
	supplier, err := json.Marshal(map[string]any{
		"subscribe": []map[string]any{{"event": events.EventAssemble, "mode": hostfns.ModeWaterfall}},
		"set_model": "late-model",
	})
	if err != nil {
		t.Fatal(err)
	}
	kit, err := guestbuild.Build("testdata/guests/testkit")
	if err != nil {
		t.Fatal(err)
	}
	// Joining the assemble waterfall is a grant.
	if _, err := host.Load(context.Background(), plugin.Spec{Name: "supplier", Source: kit, Config: supplier,
		Grants: &config.Grants{Events: []string{events.EventAssemble}}}); err != nil {
		t.Fatal(err)
	}
	off, err := bus.OnWaterfall(events.EventAgentRequest, "supplier", func(_ context.Context, p any) (any, error) {
		req := p.(*model.Request)
		if req.Model == "" {
			req.Model = "late-model"
		}
		return req, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer off()
	noModel = true
	defer func() { noModel = false }()
	f := newFixture(t, Options{Registry: reg, Bus: bus, Tools: host, Provider: scripted(t, step(1, 1, textAnswer("hi")))})
	if f.Facts().Model != "" {
		t.Fatal("the agent has a model")
	}
	res := f.prompt(t, "who are you")
	if res.End.Kind != session.EndCompleted {
		t.Fatalf("result = %+v", res)
	}
	req := f.prov.requests()[0]
	if req.Model != "late-model" || !strings.Contains(req.System, "You are powered by the late-model model.") {
		t.Fatalf("request model %q, system %q", req.Model, req.System)
	}

	// Without the supplier the {{model}} persona has no value: the turn
	// fails at render, loudly.
	if err := host.Unload(context.Background(), "supplier"); err != nil {
		t.Fatal(err)
	}
	res = f.prompt(t, "again")
	if res.End.Kind != session.EndError || !errors.Is(res.Err, prompt.ErrNoValue) {
		t.Fatalf("without the supplier: %+v", res)
	}
}

// A Wasm policy plugin subscribing to a tool event's former name is
// refused at load, with the new name in the error: otherwise it would load
// and silently never be called.
func TestPluginSubscriptionToOldToolEventRefused(t *testing.T) {
	reg := newRegistry(t, testPersona)
	bus := events.New(discard)
	host := newHost(t, reg, bus)
	path, err := guestbuild.Build("testdata/guests/testkit")
	if err != nil {
		t.Fatal(err)
	}
	for _, old := range []string{"tool/pre-execute", "tool/post-execute"} {
		cfg, _ := json.Marshal(map[string]any{"subscribe": []map[string]any{{"event": old, "mode": hostfns.ModeWaterfall}}})
		_, err := host.Load(context.Background(), plugin.Spec{Name: "policy", Source: path, Config: cfg})
		want := "subscribe to tools/" + strings.TrimPrefix(old, "tool/")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("loading a plugin subscribed to %s = %v, want an error naming %q", old, err, want)
		}
	}
}
