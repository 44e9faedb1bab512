package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/abi/dsh"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/pluginstate"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// Unit tests of host-function guarantees that only the hostile suite
// pinned before: state scoping, pointer overlap and the log cut.

type probeResult struct {
	Status  hostfns.Status `json:"status"`
	Message string         `json:"message"`
}

func probe(t *testing.T, h *Host, facts *prompt.AgentFacts, probes ...map[string]any) []probeResult {
	t.Helper()
	args, err := json.Marshal(probes)
	if err != nil {
		t.Fatal(err)
	}
	r, err := h.CallTool(bg, facts, "probe", args)
	if err != nil || r.IsError {
		t.Fatalf("probe: %+v, %v", r, err)
	}
	var out []probeResult
	if err := json.Unmarshal([]byte(r.Text), &out); err != nil || len(out) != len(probes) {
		t.Fatalf("probe output %q: %v", r.Text, err)
	}
	return out
}

// State is scoped to (plugin, session): plugins never see each other's
// keys, sessions never share, and agents of one session do.
func TestStateIsScopedToPluginAndSession(t *testing.T) {
	h := newHost(t)
	// Tool names are unique, so the two plugins (the same module) are
	// loaded one at a time; state outlives the unloads.
	step := func(plugin string, facts *prompt.AgentFacts, want string) {
		t.Helper()
		if h.Plugin(plugin) == nil {
			for _, n := range h.Plugins() {
				h.Unload(bg, n)
			}
			if _, err := h.Load(bg, Spec{Name: plugin, Source: testkit(t), Config: cfg(t, map[string]any{"tools": []string{"state"}})}); err != nil {
				t.Fatal(err)
			}
		}
		if r, err := h.CallTool(bg, facts, "state", nil); err != nil || r.Text != want {
			t.Fatalf("plugin %s, session %s: %+v, %v; want %s", plugin, facts.Session, r, err, want)
		}
	}
	s1a := &prompt.AgentFacts{ID: "x", Session: "s1"}
	s1b := &prompt.AgentFacts{ID: "y", Session: "s1"}
	s2 := &prompt.AgentFacts{ID: "z", Session: "s2"}
	step("a", s1a, "1")
	step("a", s1a, "2")
	step("a", s1b, "3") // another agent of the same session shares it
	step("a", s2, "1")  // another session does not
	step("b", s1a, "1") // another plugin does not, in the same session
	step("b", s1a, "2")
	step("a", s1a, "4") // and a's state outlived its unload
	for _, c := range []struct{ plugin, session, want string }{{"a", "s1", "4"}, {"a", "s2", "1"}, {"b", "s1", "2"}} {
		v, ok, err := h.State().Get(c.plugin, c.session, "n")
		if err != nil || !ok || string(v) != c.want {
			t.Errorf("store %s/%s: %s %v %v", c.plugin, c.session, v, ok, err)
		}
	}
	if _, ok, _ := h.State().Get("b", "s2", "n"); ok {
		t.Error("b has state in a session it never ran in")
	}
}

// The per-(plugin, session) quota is counted per plugin and per session.
func TestStateQuotaIsPerPluginAndSession(t *testing.T) {
	m := pluginstate.NewMemory()
	val := json.RawMessage(`"` + strings.Repeat("v", dsh.MaxStateValue-2) + `"`)
	n := 0
	for ; n < 100; n++ {
		if err := m.Set("a", "s", string(rune('a'+n)), val); err != nil {
			if !errors.Is(err, pluginstate.ErrFull) {
				t.Fatal(err)
			}
			break
		}
	}
	if n != pluginstate.MaxBytes/(dsh.MaxStateValue+1) {
		t.Fatalf("%d values of 1 MiB fitted, want %d", n, pluginstate.MaxBytes/(dsh.MaxStateValue+1))
	}
	if err := m.Set("b", "s", "k", val); err != nil {
		t.Fatalf("another plugin in the same session: %v", err)
	}
	if err := m.Set("a", "t", "k", val); err != nil {
		t.Fatalf("the same plugin in another session: %v", err)
	}
	// Replacing a key counts its new size only; deleting frees.
	if err := m.Set("a", "s", "a", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	if err := m.Set("a", "s", "z", val); err != nil {
		t.Fatalf("after shrinking a value: %v", err)
	}
}

// A request and an out buffer that overlap are refused before the host
// function does anything; the same call without the overlap works.
func TestOverlappingPointersRefused(t *testing.T) {
	h := newHost(t)
	if _, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{"tools": []string{"probe"}})}); err != nil {
		t.Fatal(err)
	}
	a := agent("a", "m")
	set := `{"key":"k","value":"v"}`
	got := probe(t, h, a,
		map[string]any{"fn": hostfns.FnStateSet, "req": set, "overlap": true},
		map[string]any{"fn": hostfns.FnStateGet, "req": `{"key":"k"}`, "overlap": true},
		map[string]any{"fn": hostfns.FnStateGet, "req": `{"key":"k"}`},
	)
	for i, r := range got[:2] {
		if r.Status != hostfns.ErrBadPointer || !strings.Contains(r.Message, "overlaps the out buffer") {
			t.Errorf("overlapping call %d: %+v", i, r)
		}
	}
	// The refused state_set did nothing: the control call finds no k.
	if got[2].Status != hostfns.StatusOK || got[2].Message != `{"found":false}` {
		t.Errorf("control: %+v", got[2])
	}
	if _, ok, _ := h.State().Get("kit", a.Session, "k"); ok {
		t.Error("the overlapping state_set was carried out")
	}
}

type recordHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (r *recordHandler) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.msgs = append(r.msgs, rec.Message)
	r.mu.Unlock()
	return nil
}
func (r *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recordHandler) WithGroup(string) slog.Handler      { return r }

// A log message longer than 64 KiB is cut at 64 KiB and marked; one of
// exactly 64 KiB passes whole.
func TestLogMessageIsCut(t *testing.T) {
	rec := &recordHandler{}
	h, err := New(Options{Registry: prompt.NewRegistry(nil), Cache: sharedCache(t), Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(bg)
	if _, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{"tools": []string{"probe"}})}); err != nil {
		t.Fatal(err)
	}
	const limit = 64 << 10
	exact := strings.Repeat("e", limit)
	long := strings.Repeat("L", 3*limit)
	req := func(msg string) string {
		b, _ := json.Marshal(hostfns.LogRequest{Level: "info", Message: msg})
		return string(b)
	}
	got := probe(t, h, agent("a", "m"),
		map[string]any{"fn": hostfns.FnLog, "req": req(exact)},
		map[string]any{"fn": hostfns.FnLog, "req": req(long)},
	)
	for _, r := range got {
		if r.Status != hostfns.StatusOK {
			t.Fatalf("log: %+v", r)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var seen []string
	for _, m := range rec.msgs {
		if strings.HasPrefix(m, "e") || strings.HasPrefix(m, "L") {
			seen = append(seen, m)
		}
	}
	if len(seen) != 2 || seen[0] != exact || seen[1] != long[:limit]+"…(truncated)" {
		lens := []int{}
		for _, m := range seen {
			lens = append(lens, len(m))
		}
		t.Fatalf("log records of lengths %v; want %d and %d", lens, limit, limit+len("…(truncated)"))
	}
}
