package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

var bg = context.Background()

func render(t *testing.T, h *Host, facts *prompt.AgentFacts) (string, error) {
	t.Helper()
	a, err := h.Registry().Assemble(bg, prompt.AssembleContext{Agent: facts})
	if err != nil {
		return "", err
	}
	return prompt.Render(a)
}

func TestLoadRegistersContribution(t *testing.T) {
	h := newHost(t)
	p, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{
		"sections":  []map[string]any{{"name": "kit:static", "order": 120, "text": "Static for {{kit_model}}."}, {"name": "kit:dyn", "order": 130, "dynamic": true}},
		"variables": []string{"kit_model"},
		"tools":     []string{"counter", "echo"},
	})})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != "kit" || len(p.Digest()) != 64 {
		t.Fatalf("plugin %q digest %q", p.Name(), p.Digest())
	}
	secs, vars, tools := h.Registry().Names()
	if strings.Join(secs, ",") != "kit:static,kit:dyn" || strings.Join(vars, ",") != "kit_model" || strings.Join(tools, ",") != "counter,echo" {
		t.Fatalf("registered %v %v %v", secs, vars, tools)
	}
	// Dynamic section and variable, per agent: two agents, two models.
	a1, err := render(t, h, agent("a1", "m-one"))
	if err != nil {
		t.Fatal(err)
	}
	a2, err := render(t, h, agent("a2", "m-two"))
	if err != nil {
		t.Fatal(err)
	}
	if a1 != "Static for kit_model:m-one.\n\nagent a1 runs m-one" || a2 != "Static for kit_model:m-two.\n\nagent a2 runs m-two" {
		t.Fatalf("renders:\n%q\n%q", a1, a2)
	}
	// No value from the provider when the agent has no model.
	if _, err := render(t, h, agent("a3", "")); !errors.Is(err, prompt.ErrNoValue) {
		t.Fatalf("err = %v", err)
	}
	if n := p.Instances(); n != 4 {
		t.Fatalf("instances = %d, want load-time + 3 agents", n)
	}
	h.EndAgent(bg, "a1")
	h.EndAgent(bg, "a2")
	h.EndAgent(bg, "a3")
	if n := p.Instances(); n != 1 {
		t.Fatalf("instances after EndAgent = %d, want 1", n)
	}
}

func TestPerAgentInstancesKeepSeparateState(t *testing.T) {
	h := newHost(t)
	if _, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{"tools": []string{"counter"}})}); err != nil {
		t.Fatal(err)
	}
	call := func(id string) string {
		t.Helper()
		r, err := h.CallTool(bg, agent(id, "m"), "counter", []byte(`{}`))
		if err != nil || r.IsError {
			t.Fatalf("counter for %s: %+v, %v", id, r, err)
		}
		return r.Text
	}
	var got []string
	for _, id := range []string{"a", "a", "b", "a", "b", "c"} {
		got = append(got, id+"="+call(id))
	}
	if want := "a=1 a=2 b=1 a=3 b=2 c=1"; strings.Join(got, " ") != want {
		t.Fatalf("counters %v, want %s", got, want)
	}
}

func TestInstancesCreatedConcurrently(t *testing.T) {
	h := newHost(t)
	p, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{"tools": []string{"counter"}})})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 8 {
		for range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := h.CallTool(bg, agent(string(rune('a'+i)), "m"), "counter", nil)
				errs <- err
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 8 {
		r, _ := h.CallTool(bg, agent(string(rune('a'+i)), "m"), "counter", nil)
		if r.Text != "6" {
			t.Fatalf("agent %c counter = %s, want 6: calls were lost or instances shared", 'a'+i, r.Text)
		}
	}
	if n := p.Instances(); n != 9 {
		t.Fatalf("instances = %d, want 9", n)
	}
}

func TestFailedInitRollsBack(t *testing.T) {
	h := newHost(t)
	h.Registry().RegisterSection(prompt.Section{Name: "taken", Text: "x"})
	cases := []struct {
		name string
		cfg  map[string]any
		want error
		msg  string
	}{
		{"guest error", map[string]any{"sections": []map[string]any{{"name": "kit:a", "order": 1, "text": "a"}}, "tools": []string{"counter"}, "init_fail": "config rejected"}, ErrGuest, "config rejected"},
		{"duplicate section", map[string]any{"sections": []map[string]any{{"name": "kit:a", "order": 1, "text": "a"}, {"name": "taken", "order": 1, "text": "b"}}}, ErrInit, "duplicate section name"},
		{"malformed variable", map[string]any{"tools": []string{"counter"}, "variables": []string{"Bad-Name"}}, ErrInit, "invalid variable name"},
		{"trap", map[string]any{"sections": []map[string]any{{"name": "kit:a", "order": 1, "text": "a"}}, "init_trap": true}, ErrTrap, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, tc.cfg)})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), `"kit"`) {
				t.Fatalf("err = %v, want %v containing %q", err, tc.want, tc.msg)
			}
			secs, vars, tools := h.Registry().Names()
			if strings.Join(secs, ",") != "taken" || len(vars)+len(tools) != 0 {
				t.Fatalf("failed init leaked %v %v %v", secs, vars, tools)
			}
			if h.Plugin("kit") != nil {
				t.Fatal("failed plugin is listed")
			}
		})
	}
}

func TestInitTimeoutKillsInfiniteLoop(t *testing.T) {
	h := newHost(t)
	spec := Spec{Name: "kit", Source: testkit(t), Grants: &config.Grants{Limits: config.Limits{InitTimeout: 300 * time.Millisecond}},
		Config: cfg(t, map[string]any{"init_spin": true})}
	compileFirst(t, spec) // the bound below is the spin's, not the compiler's
	start := time.Now()
	_, err := h.Load(bg, spec)
	if !errors.Is(err, ErrComputeBudget) || !strings.Contains(err.Error(), "dsh_init") {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > 20*time.Second {
		t.Fatal("the spin was not killed")
	}
}

func TestUnloadRemovesEverything(t *testing.T) {
	h := newHost(t)
	p, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{
		"sections": []map[string]any{{"name": "kit:a", "order": 1, "text": "a"}}, "variables": []string{"kv"},
		"tools": []string{"counter"}, "subscribe": []map[string]any{{"event": "custom/ping"}},
	})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.CallTool(bg, agent("a", "m"), "counter", nil); err != nil {
		t.Fatal(err)
	}
	if l := h.Bus().Listeners("custom/ping"); len(l) != 1 {
		t.Fatalf("listeners %v", l)
	}
	if err := h.Unload(bg, "kit"); err != nil {
		t.Fatal(err)
	}
	secs, vars, tools := h.Registry().Names()
	if len(secs)+len(vars)+len(tools) != 0 || len(h.Bus().Listeners("custom/ping")) != 0 {
		t.Fatalf("unload left %v %v %v %v", secs, vars, tools, h.Bus().Listeners("custom/ping"))
	}
	if p.Instances() != 0 {
		t.Fatalf("instances after unload: %d", p.Instances())
	}
	if _, err := h.CallTool(bg, agent("a", "m"), "counter", nil); !errors.Is(err, ErrNoTool) {
		t.Fatalf("err = %v", err)
	}
	if err := h.Unload(bg, "kit"); !errors.Is(err, ErrNotLoaded) {
		t.Fatalf("err = %v", err)
	}
}

func TestReloadSwapsAtomically(t *testing.T) {
	h := newHost(t)
	src := testkit(t)
	old := cfg(t, map[string]any{"sections": []map[string]any{{"name": "kit:old", "order": 1, "text": "old"}}, "tools": []string{"counter"}})
	neu := cfg(t, map[string]any{"sections": []map[string]any{{"name": "kit:new", "order": 1, "text": "new"}}, "tools": []string{"echo"}})
	if _, err := h.Load(bg, Spec{Name: "kit", Source: src, Config: old}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			text, err := render(t, h, nil)
			tools := h.Registry().Tools()
			if err != nil || (text != "old" && text != "new") {
				t.Errorf("mixed or failed render %q %v", text, err)
				return
			}
			_ = tools
		}
	}()
	for i := range 4 {
		c := []json.RawMessage{neu, old}[i%2]
		if _, err := h.Reload(bg, Spec{Name: "kit", Source: src, Config: c}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if got, _ := render(t, h, nil); got != "old" {
		t.Fatalf("after reloads: %q", got)
	}
	// A failing reload leaves the old plugin untouched.
	_, err := h.Reload(bg, Spec{Name: "kit", Source: src, Config: cfg(t, map[string]any{"init_fail": "nope"})})
	if !errors.Is(err, ErrGuest) {
		t.Fatalf("err = %v", err)
	}
	if got, _ := render(t, h, nil); got != "old" {
		t.Fatalf("after failed reload: %q", got)
	}
	if r, err := h.CallTool(bg, agent("a", "m"), "counter", nil); err != nil || r.Text != "1" {
		t.Fatalf("old tool after failed reload: %+v %v", r, err)
	}
}

func TestConstructorFailsAtRenderNotLoad(t *testing.T) {
	h := newHost(t)
	_, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{
		"sections": []map[string]any{{"name": "kit:proto", "order": 150, "text": "see {{constructor}}"}},
	})})
	if err != nil {
		t.Fatalf("load refused a section that only fails at render: %v", err)
	}
	_, err = render(t, h, agent("a", "m"))
	var re *prompt.RenderError
	if !errors.As(err, &re) || re.Section != "kit:proto" || !errors.Is(err, prompt.ErrUnknownVariable) {
		t.Fatalf("err = %v", err)
	}
}

func TestToolFailuresBecomeResults(t *testing.T) {
	h := newHost(t)
	p, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Grants: &config.Grants{Limits: config.Limits{CallTimeout: 300 * time.Millisecond}},
		Config: cfg(t, map[string]any{"tools": []string{"counter", "trap", "spin", "fail", "echo"}})})
	if err != nil {
		t.Fatal(err)
	}
	a := agent("a", "m")
	h.CallTool(bg, a, "counter", nil)
	if r, err := h.CallTool(bg, a, "fail", nil); err != nil || !r.IsError || r.Text != "Error: the tool failed on purpose" {
		t.Fatalf("fail: %+v %v", r, err)
	}
	if r, err := h.CallTool(bg, a, "echo", []byte(`{"text":`)); err != nil || !r.IsError || !strings.Contains(r.Text, "bad arguments") {
		t.Fatalf("echo with malformed JSON: %+v %v", r, err)
	}
	if _, err := h.CallTool(bg, a, "trap", nil); !errors.Is(err, ErrTrap) {
		t.Fatalf("trap: %v", err)
	}
	// The trapped instance was discarded: a fresh one starts from zero.
	if r, _ := h.CallTool(bg, a, "counter", nil); r.Text != "1" {
		t.Fatalf("counter after trap = %q, want a fresh instance", r.Text)
	}
	if _, err := h.CallTool(bg, a, "spin", nil); !errors.Is(err, ErrComputeBudget) {
		t.Fatalf("spin: %v", err)
	}
	if r, err := h.CallTool(bg, a, "echo", []byte(`{"text":"still works"}`)); err != nil || r.Text != "still works" {
		t.Fatalf("after spin: %+v %v", r, err)
	}
	if _, err := h.CallTool(bg, a, "nope", nil); !errors.Is(err, ErrNoTool) {
		t.Fatalf("unknown tool: %v", err)
	}
	// Cancellation from the caller kills a running call.
	ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer cancel()
	p.limits.CallTimeout = time.Hour
	if _, err := h.CallTool(ctx, a, "spin", nil); err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("cancelled spin: %v", err)
	}
}

func TestHostStateOutlivesInstances(t *testing.T) {
	h := newHost(t)
	if _, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{"tools": []string{"state", "trap"}})}); err != nil {
		t.Fatal(err)
	}
	a, b := agent("a", "m"), agent("b", "m")
	for _, want := range []string{"1", "2"} {
		if r, err := h.CallTool(bg, a, "state", nil); err != nil || r.Text != want {
			t.Fatalf("state: %+v %v, want %s", r, err, want)
		}
	}
	h.CallTool(bg, a, "trap", nil) // discards a's instance
	h.EndAgent(bg, "a")
	if r, _ := h.CallTool(bg, a, "state", nil); r.Text != "3" {
		t.Fatalf("state after trap and re-creation = %q, want 3", r.Text)
	}
	if r, _ := h.CallTool(bg, b, "state", nil); r.Text != "1" {
		t.Fatalf("another session saw the state: %q", r.Text)
	}
}

func TestSourcesAndPins(t *testing.T) {
	h := newHost(t)
	src := testkit(t)
	b, _ := os.ReadFile(src)
	p, err := h.Load(bg, Spec{Name: "kit", Source: src, Config: cfg(t, map[string]any{})})
	if err != nil {
		t.Fatal(err)
	}
	digest := p.Digest()
	h.Unload(bg, "kit")
	if _, err := h.Load(bg, Spec{Name: "kit", Source: src, SHA256: "sha256:" + digest, Config: cfg(t, map[string]any{})}); err != nil {
		t.Fatalf("correct pin refused: %v", err)
	}
	h.Unload(bg, "kit")
	bad := strings.Repeat("0", 64)
	_, err = h.Load(bg, Spec{Name: "kit", Source: src, SHA256: "sha256:" + bad})
	if !errors.Is(err, ErrDigestMismatch) || !strings.Contains(err.Error(), digest) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("err = %v", err)
	}
	if _, err := h.Load(bg, Spec{Source: filepath.Join(t.TempDir(), "absent.wasm")}); !errors.Is(err, ErrSource) {
		t.Fatalf("err = %v", err)
	}
	if _, err := h.Load(bg, Spec{Source: "builtin:nope"}); !errors.Is(err, ErrSource) {
		t.Fatalf("err = %v", err)
	}
	junk := filepath.Join(t.TempDir(), "junk.wasm")
	os.WriteFile(junk, []byte("not wasm"), 0o644)
	if _, err := h.Load(bg, Spec{Source: junk}); !errors.Is(err, ErrABI) {
		t.Fatalf("err = %v", err)
	}
	if _, err := h.Load(bg, Spec{Name: "Bad Name", Source: src}); !errors.Is(err, ErrSource) {
		t.Fatalf("err = %v", err)
	}
	_ = b
}

func TestEventModes(t *testing.T) {
	h := newHost(t)
	_, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{
		"tools":     []string{"events", "emit"},
		"subscribe": []map[string]any{{"event": "custom/ping"}, {"event": "plugin:kit/echo"}, {"event": events.EventAgentRequest, "mode": "waterfall"}},
		"set_model": "from-waterfall",
	}), Grants: &config.Grants{Events: []string{events.EventAgentRequest}}})
	if err != nil {
		t.Fatal(err)
	}
	a := agent("a", "m")
	ctx := prompt.WithAgent(bg, a)
	// Plain emit: the plugin's failure reaches the emitter.
	if err := h.Bus().Emit(ctx, "custom/ping", json.RawMessage(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := h.Bus().Emit(ctx, "custom/ping", json.RawMessage(`"fail-please"`)); err == nil || !strings.Contains(err.Error(), "listener refused") {
		t.Fatalf("plain emit err = %v", err)
	}
	// Contained: the failure is isolated; a later listener still runs.
	ran := false
	h.Bus().On("custom/ping", "after", func(context.Context, any) error { ran = true; return nil })
	h.Bus().EmitContained(ctx, "custom/ping", json.RawMessage(`"fail-please"`))
	if !ran {
		t.Fatal("contained emit stopped at the failing plugin")
	}
	// Waterfall: the plugin modifies a typed payload.
	type request struct {
		Variables map[string]prompt.Value `json:"variables"`
	}
	out, err := h.Bus().Waterfall(ctx, events.EventAgentRequest, &request{})
	if err != nil {
		t.Fatal(err)
	}
	if r := out.(*request); r.Variables["model"].Text != "from-waterfall" {
		t.Fatalf("waterfall output %+v", r)
	}
	// Events reach the agent's own instance.
	r, _ := h.CallTool(bg, a, "events", nil)
	if !strings.Contains(r.Text, `custom/ping {\"n\":1}`) || !strings.Contains(r.Text, events.EventAgentRequest) {
		t.Fatalf("agent instance saw %s", r.Text)
	}
	r, _ = h.CallTool(bg, agent("b", "m"), "events", nil)
	if r.Text != "null" {
		t.Fatalf("another agent's instance saw events: %s", r.Text)
	}
	// A plugin emits in its own namespace only. Its own listener for the
	// event would run in the very instance that is emitting: refused as
	// reentrant, not deadlocked; another agent's instance receives it.
	r, _ = h.CallTool(bg, a, "emit", []byte(`{"event":"plugin:kit/echo","payload":{"x":1}}`))
	if !r.IsError || !strings.Contains(r.Text, "reentrant") {
		t.Fatalf("self-delivery: %+v", r)
	}
	var got []string
	h.Bus().On("plugin:kit/echo", "observer", func(_ context.Context, p any) error {
		got = append(got, string(p.(json.RawMessage)))
		return nil
	})
	h.Unload(bg, "kit")
	_, err = h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{"tools": []string{"emit"}})})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := h.CallTool(bg, a, "emit", []byte(`{"event":"plugin:kit/echo","payload":{"x":1}}`)); r.IsError || len(got) != 1 || got[0] != `{"x":1}` {
		t.Fatalf("own event: %+v, observer saw %v", r, got)
	}
	r, _ = h.CallTool(bg, a, "emit", []byte(`{"event":"agent/request","payload":{}}`))
	if !r.IsError || !strings.Contains(r.Text, "denied") {
		t.Fatalf("foreign event: %+v", r)
	}
}

func TestAssembleWaterfallSuppliesLateModel(t *testing.T) {
	h := newHost(t)
	h.Registry().RegisterSection(prompt.Section{Name: prompt.PersonaSection, Text: "powered by {{model}}"})
	h.Registry().RegisterVariable("model", func(_ context.Context, ac prompt.AssembleContext) (string, bool, error) {
		if ac.Agent == nil || ac.Agent.Model == "" {
			return "", false, nil
		}
		return ac.Agent.Model, true, nil
	})
	if _, err := render(t, h, agent("a", "")); !errors.Is(err, prompt.ErrNoValue) {
		t.Fatalf("err = %v", err)
	}
	_, err := h.Load(bg, Spec{Name: "router", Source: testkit(t), Config: cfg(t, map[string]any{
		"subscribe": []map[string]any{{"event": events.EventAssemble, "mode": "waterfall"}},
		"set_model": "late-model",
	}), Grants: &config.Grants{Events: []string{events.EventAssemble}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := render(t, h, agent("a", "")); err != nil || got != "powered by late-model" {
		t.Fatalf("render = %q, %v", got, err)
	}
	h.Unload(bg, "router")
	if _, err := render(t, h, agent("a", "")); !errors.Is(err, prompt.ErrNoValue) {
		t.Fatalf("hook outlived its plugin: %v", err)
	}
}

func TestCapabilitiesAreChecked(t *testing.T) {
	h := newHost(t)
	needs := map[string]any{"needs": map[string]any{"net": []string{"api.example.com"}}}
	_, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, needs)})
	if !errors.Is(err, ErrNotGranted) || !strings.Contains(err.Error(), "api.example.com") {
		t.Fatalf("err = %v", err)
	}
	_, err = h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, needs), checkNeeds: func(c hostfns.Capabilities) error {
		if len(c.Net) == 1 && c.Net[0] == "api.example.com" {
			return nil
		}
		return errors.New("no")
	}})
	if err != nil {
		t.Fatal(err)
	}
}

func TestEnvIsGranted(t *testing.T) {
	t.Setenv("DSH_TEST_SECRET", "s3cret")
	t.Setenv("DSH_TEST_OPEN", "open")
	h := newHost(t)
	if _, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Grants: &config.Grants{Env: []string{"DSH_TEST_OPEN"}}, Config: cfg(t, map[string]any{"tools": []string{"getenv"}})}); err != nil {
		t.Fatal(err)
	}
	a := agent("a", "m")
	if r, _ := h.CallTool(bg, a, "getenv", []byte("DSH_TEST_OPEN")); r.Text != "true:open" {
		t.Fatalf("granted env: %+v", r)
	}
	r, _ := h.CallTool(bg, a, "getenv", []byte("DSH_TEST_SECRET"))
	if !r.IsError || strings.Contains(r.Text, "s3cret") || !strings.Contains(r.Text, "not granted") {
		t.Fatalf("ungranted env: %+v", r)
	}
}

// TestBudgetKillsWithBothMechanisms runs the compute budget through the
// interrupt flag (the default) and through wazero's WithCloseOnContextDone
// (the fallback for modules that cannot be instrumented).
func TestBudgetKillsWithBothMechanisms(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		h := newHost(t)
		p, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), noInterrupt: fallback, Grants: &config.Grants{Limits: config.Limits{CallTimeout: 200 * time.Millisecond}},
			Config: cfg(t, map[string]any{"tools": []string{"spin", "counter"}})})
		if err != nil {
			t.Fatal(err)
		}
		if p.interruptible == fallback {
			t.Fatalf("fallback=%v: interruptible=%v", fallback, p.interruptible)
		}
		a := agent("a", "m")
		if _, err := h.CallTool(bg, a, "spin", nil); !errors.Is(err, ErrComputeBudget) {
			t.Fatalf("fallback=%v: spin: %v", fallback, err)
		}
		if r, err := h.CallTool(bg, a, "counter", nil); err != nil || r.Text != "1" {
			t.Fatalf("fallback=%v: after the kill: %+v %v", fallback, r, err)
		}
	}
}
