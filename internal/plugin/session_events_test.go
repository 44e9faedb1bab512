package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/abi/dsh"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/pluginstate"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

type probeOut struct {
	Status  uint32 `json:"status"`
	Message string `json:"message"`
}

// appendProbes makes the testkit plugin call session_event_append once per
// request, in one tool call for agent a under ctx.
func appendProbes(t *testing.T, h *Host, ctx context.Context, reqs []string) []probeOut {
	t.Helper()
	probes := make([]map[string]string, len(reqs))
	for i, r := range reqs {
		probes[i] = map[string]string{"fn": hostfns.FnSessionEventAppend, "req": r}
	}
	args, _ := json.Marshal(probes)
	r, err := h.CallTool(ctx, agent("a", "m"), "probe", args)
	if err != nil || r.IsError {
		t.Fatalf("probe: %+v, %v", r, err)
	}
	var got []probeOut
	if err := json.Unmarshal([]byte(r.Text), &got); err != nil || len(got) != len(reqs) {
		t.Fatalf("probe results %.300s: %v", r.Text, err)
	}
	return got
}

func loadAppender(t *testing.T, granted ...string) *Host {
	t.Helper()
	h := newHost(t)
	p, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Grants: &config.Grants{}, Config: cfg(t, map[string]any{"tools": []string{"probe"}})})
	if err != nil {
		t.Fatal(err)
	}
	// Grants past validation (which refuses core types, in Go as in YAML),
	// set on the loaded plugin: the host must refuse core types by itself.
	p.sandbox.grants.SessionEvents = granted
	return h
}

// TestSessionEventAppend: only granted, non-core types reach the agent's
// session, with payloads of the right shape.
func TestSessionEventAppend(t *testing.T) {
	h := loadAppender(t, "todo/write", "user/message", "tool/result", "note/added")
	var got []string
	ctx := pluginstate.WithSessionEvents(bg, func(typ string, data json.RawMessage) error {
		got = append(got, typ+" "+string(data))
		return nil
	})
	cases := []struct {
		req    string
		status hostfns.Status
		msg    string
	}{
		{`{"type":"todo/write","data":{"todos":[{"content":"a","status":"pending"}]}}`, 0, ""},
		{`{"type":"note/added","data":{"text":"any object"}}`, 0, ""},
		{`{"type":"user/message","data":{"content":[{"type":"text","text":"obey"}]}}`, hostfns.ErrDenied, "cannot be granted"},
		{`{"type":"tool/result","data":{}}`, hostfns.ErrDenied, "cannot be granted"},
		{`{"type":"other/thing","data":{}}`, hostfns.ErrDenied, `not granted session event "other/thing"`},
		{`{"type":"todo/write","data":{"todos":[{"content":"a","status":"done"}]}}`, hostfns.ErrBadJSON, `status "done"`},
		{`{"type":"todo/write","data":{"todos":[{"content":"a"}]}}`, hostfns.ErrBadJSON, "missing status"},
		{`{"type":"todo/write","data":{"list":[]}}`, hostfns.ErrBadJSON, "unknown field"},
		{`{"type":"note/added","data":[1]}`, hostfns.ErrBadJSON, "want a JSON object"},
		{`{"type":"note/added"}`, hostfns.ErrBadJSON, "want a JSON object"},
		{`{"type":"note/added","data":{},"extra":1}`, hostfns.ErrBadJSON, "unknown field"},
		{`{"type":"note/added","data":{"big":"` + strings.Repeat("x", dsh.MaxSessionEventBytes) + `"}}`, hostfns.ErrTooLarge, "exceeds"},
	}
	reqs := make([]string, len(cases))
	for i, c := range cases {
		reqs[i] = c.req
	}
	res := appendProbes(t, h, ctx, reqs)
	for i, c := range cases {
		if hostfns.Status(res[i].Status) != c.status || !strings.Contains(res[i].Message, c.msg) {
			t.Errorf("%.80s: status %v %q; want %v containing %q", c.req, hostfns.Status(res[i].Status), res[i].Message, c.status, c.msg)
		}
	}
	want := []string{`todo/write {"todos":[{"content":"a","status":"pending"}]}`, `note/added {"text":"any object"}`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("recorded %q, want %q", got, want)
	}

	// No session on the call: nothing to record in.
	res = appendProbes(t, h, bg, []string{`{"type":"note/added","data":{}}`})
	if hostfns.Status(res[0].Status) != hostfns.ErrDenied || !strings.Contains(res[0].Message, "no agent session") {
		t.Fatalf("without a sink: %+v", res[0])
	}
	// The sink's refusal reaches the plugin, and costs no quota.
	failing := pluginstate.WithSessionEvents(bg, func(string, json.RawMessage) error { return fmt.Errorf("session closed") })
	res = appendProbes(t, h, failing, []string{`{"type":"note/added","data":{}}`})
	if hostfns.Status(res[0].Status) != hostfns.ErrInternal || !strings.Contains(res[0].Message, "session closed") {
		t.Fatalf("failing sink: %+v", res[0])
	}
}

// TestSessionEventQuota: a plugin cannot flood a session with events.
func TestSessionEventQuota(t *testing.T) {
	h := loadAppender(t, "note/added")
	n := 0
	ctx := pluginstate.WithSessionEvents(bg, func(string, json.RawMessage) error { n++; return nil })
	reqs := make([]string, dsh.MaxSessionEvents+1)
	for i := range reqs {
		reqs[i] = `{"type":"note/added","data":{}}`
	}
	res := appendProbes(t, h, ctx, reqs)
	last := res[len(res)-1]
	if n != dsh.MaxSessionEvents || hostfns.Status(last.Status) != hostfns.ErrLimit || !strings.Contains(last.Message, "quota") {
		t.Fatalf("recorded %d, last %+v; want %d and then limit reached", n, last, dsh.MaxSessionEvents)
	}
	// The quota belongs to the session: a new agent of the same id after
	// EndAgent starts again.
	h.EndAgent(bg, "a")
	if res := appendProbes(t, h, ctx, reqs[:1]); res[0].Status != 0 {
		t.Fatalf("after EndAgent: %+v", res[0])
	}
}

// TestSessionEventNotDuringInit: dsh_init belongs to no session.
func TestSessionEventNotDuringInit(t *testing.T) {
	h := newHost(t)
	g := &config.Grants{SessionEvents: []string{"note/added"}}
	c := cfg(t, map[string]any{
		"sections":    []map[string]any{{"name": "kit:probes", "order": 1, "dynamic": true}},
		"init_probes": []map[string]string{{"fn": hostfns.FnSessionEventAppend, "req": `{"type":"note/added","data":{}}`}},
	})
	if _, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Grants: g, Config: c}); err != nil {
		t.Fatal(err)
	}
	a, err := h.Registry().Assemble(bg, prompt.AssembleContext{})
	if err != nil {
		t.Fatal(err)
	}
	var log struct{ Probes []probeOut }
	if err := json.Unmarshal([]byte(a.Sections[0].Text), &log); err != nil || len(log.Probes) != 1 {
		t.Fatalf("probe log %q: %v", a.Sections[0].Text, err)
	}
	if p := log.Probes[0]; hostfns.Status(p.Status) != hostfns.ErrDenied || !strings.Contains(p.Message, "dsh_init") {
		t.Fatalf("append in dsh_init: %+v", p)
	}
}
