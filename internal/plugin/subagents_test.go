package plugin

import (
	"context"
	"encoding/json"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/abi/dsh"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

// fakeSubagents records the runs it is asked for.
type fakeSubagents struct{ runs []hostfns.SubagentRunRequest }

func (f *fakeSubagents) Providers() []hostfns.SubagentProvider {
	return []hostfns.SubagentProvider{{Name: "spawn"}, {Name: "fork", InheritsParentContext: true}}
}

func (f *fakeSubagents) Run(_ context.Context, parent prompt.AgentFacts, req hostfns.SubagentRunRequest) (hostfns.SubagentRunResponse, error) {
	f.runs = append(f.runs, req)
	return hostfns.SubagentRunResponse{StopReason: "completed", Text: "child of " + parent.ID}, nil
}

// TestSubagentRunOnlyFromATool: subagent_run runs a child only from a
// tool call for an agent, and only on a granted provider; dsh_init and a
// call for no agent are denied, and subagent_providers works everywhere.
func TestSubagentRunOnlyFromATool(t *testing.T) {
	subs := &fakeSubagents{}
	h, err := New(Options{Registry: prompt.NewRegistry(nil), Cache: sharedCache(t), Logger: slog.New(slog.DiscardHandler), Subagents: subs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	run := `{"provider":"spawn","description":"d","prompt":"p"}`
	c := cfg(t, map[string]any{
		"tools":    []string{"probe"},
		"sections": []map[string]any{{"name": "kit:probes", "order": 1, "dynamic": true}},
		"init_probes": []map[string]string{
			{"fn": hostfns.FnSubagentRun, "req": run},
			{"fn": hostfns.FnSubagentProviders, "req": `{}`},
		},
	})
	g := &config.Grants{Subagents: []string{"spawn"}}
	if _, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Grants: g, Config: c}); err != nil {
		t.Fatal(err)
	}
	a, err := h.Registry().Assemble(bg, prompt.AssembleContext{})
	if err != nil {
		t.Fatal(err)
	}
	var log struct{ Probes []probeOut }
	if err := json.Unmarshal([]byte(a.Sections[0].Text), &log); err != nil || len(log.Probes) != 2 {
		t.Fatalf("probe log %q: %v", a.Sections[0].Text, err)
	}
	if p := log.Probes[0]; hostfns.Status(p.Status) != hostfns.ErrDenied || !strings.Contains(p.Message, "dsh_tool") {
		t.Fatalf("subagent_run in dsh_init: %+v", p)
	}
	if p := log.Probes[1]; p.Status != 0 || !strings.Contains(p.Message, `"fork"`) {
		t.Fatalf("subagent_providers in dsh_init: %+v", p)
	}

	probe := func(facts *prompt.AgentFacts, req string) probeOut {
		args, _ := json.Marshal([]map[string]string{{"fn": hostfns.FnSubagentRun, "req": req}})
		r, err := h.CallTool(bg, facts, "probe", args)
		if err != nil || r.IsError {
			t.Fatalf("probe: %+v, %v", r, err)
		}
		var got []probeOut
		if err := json.Unmarshal([]byte(r.Text), &got); err != nil || len(got) != 1 {
			t.Fatalf("probe results %.300s: %v", r.Text, err)
		}
		return got[0]
	}
	if p := probe(nil, run); hostfns.Status(p.Status) != hostfns.ErrDenied {
		t.Fatalf("subagent_run for no agent: %+v", p)
	}
	if p := probe(agent("a", "m"), `{"provider":"fork","description":"d","prompt":"p"}`); hostfns.Status(p.Status) != hostfns.ErrDenied || !strings.Contains(p.Message, "grants.subagents") {
		t.Fatalf("subagent_run on an ungranted provider: %+v", p)
	}
	if p := probe(agent("a", "m"), `{"provider":"spawn","description":"d","prompt":""}`); hostfns.Status(p.Status) != hostfns.ErrRule {
		t.Fatalf("subagent_run with an empty prompt: %+v", p)
	}
	if len(subs.runs) != 0 {
		t.Fatalf("a denied call reached the provider: %+v", subs.runs)
	}
	if p := probe(agent("a", "m"), run); p.Status != 0 || !strings.Contains(p.Message, "child of a") {
		t.Fatalf("granted subagent_run: %+v", p)
	}
	if len(subs.runs) != 1 || subs.runs[0].Prompt != "p" {
		t.Fatalf("runs %+v", subs.runs)
	}
	// One call may run at most dsh.MaxSubagentRunsPerCall children.
	many := make([]map[string]string, dsh.MaxSubagentRunsPerCall+1)
	for i := range many {
		many[i] = map[string]string{"fn": hostfns.FnSubagentRun, "req": run}
	}
	args, _ := json.Marshal(many)
	r, err := h.CallTool(bg, agent("a", "m"), "probe", args)
	if err != nil || r.IsError {
		t.Fatalf("probe: %+v, %v", r, err)
	}
	var got []probeOut
	if err := json.Unmarshal([]byte(r.Text), &got); err != nil || len(got) != len(many) {
		t.Fatalf("probe results %.300s: %v", r.Text, err)
	}
	for i, p := range got[:dsh.MaxSubagentRunsPerCall] {
		if p.Status != 0 {
			t.Fatalf("run %d under the quota: %+v", i, p)
		}
	}
	if p := got[dsh.MaxSubagentRunsPerCall]; hostfns.Status(p.Status) != hostfns.ErrLimit {
		t.Fatalf("run past the quota: %+v", p)
	}
	if len(subs.runs) != 1+dsh.MaxSubagentRunsPerCall {
		t.Fatalf("%d runs reached the provider, want %d", len(subs.runs), 1+dsh.MaxSubagentRunsPerCall)
	}
}

// slowSubagents is a child that takes wait, or until the parent's
// context ends.
type slowSubagents struct {
	fakeSubagents
	wait time.Duration
}

func (s *slowSubagents) Run(ctx context.Context, parent prompt.AgentFacts, req hostfns.SubagentRunRequest) (hostfns.SubagentRunResponse, error) {
	select {
	case <-time.After(s.wait):
		return s.fakeSubagents.Run(ctx, parent, req)
	case <-ctx.Done():
		return hostfns.SubagentRunResponse{StopReason: "aborted"}, nil
	}
}

// TestSubagentTimeIsNotTheCallersBudget: a child that runs past the
// calling plugin's compute budget does not kill the call, and the
// caller's cancellation reaches it.
func TestSubagentTimeIsNotTheCallersBudget(t *testing.T) {
	subs := &slowSubagents{wait: 1500 * time.Millisecond}
	h, err := New(Options{Registry: prompt.NewRegistry(nil), Cache: sharedCache(t), Logger: slog.New(slog.DiscardHandler), Subagents: subs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	g := &config.Grants{Subagents: []string{"spawn"}, Limits: config.Limits{CallTimeout: 300 * time.Millisecond}}
	spec := Spec{Name: "kit", Source: testkit(t), Grants: g, Config: cfg(t, map[string]any{"tools": []string{"probe"}})}
	if _, err := h.Load(bg, spec); err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal([]map[string]string{{"fn": hostfns.FnSubagentRun, "req": `{"provider":"spawn","description":"d","prompt":"p"}`}})
	r, err := h.CallTool(bg, agent("a", "m"), "probe", args)
	if err != nil || r.IsError || !strings.Contains(r.Text, "child of a") {
		t.Fatalf("a child longer than the caller's budget: %+v, %v", r, err)
	}
	subs.wait = time.Hour
	ctx, cancel := context.WithTimeout(bg, 500*time.Millisecond)
	defer cancel()
	type out struct {
		r   tool.Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		r, err := h.CallTool(ctx, agent("a", "m"), "probe", args)
		done <- out{r, err}
	}()
	select {
	case o := <-done:
		if o.err == nil && !o.r.IsError && !strings.Contains(o.r.Text, "aborted") {
			t.Fatalf("cancelled call: %+v", o.r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the caller's cancellation did not reach the child")
	}
}
