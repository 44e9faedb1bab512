package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/agent"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/internal/plugintest"
	"github.com/dsh-wasm/dsh-wasm/internal/turntest"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// The bounds attacks (issue 9): a plugin with few or no grants makes the
// host spend time, memory and waits on its behalf, or hangs its lifecycle.
// Each must be cut by a bound that comes from the plugin's grants or the
// agent's options, and the host must go on serving.

// boundSlack is what a loaded two-core machine may add to a bound before
// the suite calls it broken. Every attack here runs unbounded (seconds,
// or forever) without its fix, far past bound + boundSlack.
const boundSlack = 1500 * time.Millisecond

// hogArgs and hogResult mirror the hog guest's.
type hogArgs struct {
	Op      string `json:"op"`
	N       int    `json:"n,omitempty"`
	Size    int    `json:"size,omitempty"`
	MS      int    `json:"ms,omitempty"`
	URL     string `json:"url,omitempty"`
	Command string `json:"command,omitempty"`
	Event   string `json:"event,omitempty"`
}

type hogResult struct {
	Calls  int            `json:"calls"`
	Status map[string]int `json:"status"`
	Last   string         `json:"last"`
	MS     int64          `json:"ms"`
}

// hog loads the hog guest as plugin name (tools <prefix>hog and
// <prefix>hog_ok) with the workspace grants and the given ones.
func (e *env) hog(name, prefix string, cfg map[string]any, grants ...string) (*plugin.Plugin, error) {
	e.t.Helper()
	if cfg == nil {
		cfg = map[string]any{}
	}
	cfg["self"], cfg["prefix"] = name, prefix
	return e.load(name, "hog", cfg, append([]string{e.fsGrant()}, grants...)...)
}

func (e *env) mustHog(name, prefix string, cfg map[string]any, grants ...string) *plugin.Plugin {
	e.t.Helper()
	p, err := e.hog(name, prefix, cfg, grants...)
	if err != nil {
		e.t.Fatalf("load %s: %v", name, err)
	}
	return p
}

// hogCall runs tool (a hog's) with a and returns what came back and how
// long it took.
func (e *env) hogCall(ctx context.Context, facts *prompt.AgentFacts, tool string, a hogArgs) (hogResult, error, time.Duration) {
	e.t.Helper()
	b, _ := json.Marshal(a)
	// The agent's instance is made first, by the hog's benign tool: how
	// long the call took is then the call's, not a Go guest's start.
	if _, err := e.callRaw(e.ctx, facts, tool+"_ok", nil); err != nil {
		e.t.Fatalf("make %s's instance: %v", facts.ID, err)
	}
	start := time.Now()
	res, err := e.callRaw(ctx, facts, tool, b)
	took := time.Since(start)
	var r hogResult
	if err == nil {
		if res.IsError {
			return r, fmt.Errorf("tool error: %s", res.Text), took
		}
		if jerr := json.Unmarshal([]byte(res.Text), &r); jerr != nil {
			e.t.Fatalf("%s: bad result %q", a.Op, res.Text)
		}
	}
	return r, err, took
}

// wantCut asserts that a call was cut with target (mentioning msg) within
// bound + boundSlack.
func (e *env) wantCut(what string, r hogResult, err error, took time.Duration, target error, msg string, bound time.Duration) {
	e.t.Helper()
	if err == nil {
		e.t.Errorf("%s: returned after %v, having made %d host calls (%v): not cut", what, took.Round(time.Millisecond), r.Calls, r.Status)
		return
	}
	e.wantErr(what, err, target, msg)
	if took > bound+boundSlack {
		e.t.Errorf("%s: cut after %v, want within %v", what, took.Round(time.Millisecond), bound)
	}
}

// heapNow is the live heap after a collection.
func heapNow() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// heapGrowth bounds what an attack may leave the host holding: the
// attacks here would leave 512 MiB to 1 GiB; the bound leaves room for
// what a busy process's heap does meanwhile (one plugin's 64 MiB of
// linear memory not yet collected, say).
const heapGrowth = 64 << 20

func (e *env) wantHeap(what string, before uint64) uint64 {
	e.t.Helper()
	after := heapNow()
	grew := int64(after) - int64(before)
	if grew > heapGrowth {
		e.t.Errorf("%s: the host heap grew by %d MiB (limit %d MiB)", what, grew>>20, heapGrowth>>20)
	}
	return uint64(max(grew, 0))
}

// turn runs one agent turn with model on the host's registry, under
// bounds; the model answers "done" at once.
func (e *env) turn(modelName string, bounds agent.AssemblyBounds) (agent.TurnResult, error, time.Duration) {
	e.t.Helper()
	opts := agent.Options{ID: "hogturn-" + randomToken(e.t)[:8], Model: modelName, Provider: &scripted.Tools{},
		Logger: slog.New(captureHandler{c: e.logs}), Bounds: bounds}
	start := time.Now()
	res, _, err := turntest.Turn(e.ctx, e.t, e.host, opts, e.ws, "hello")
	took := time.Since(start)
	e.recordErr(err)
	if err != nil {
		e.t.Fatalf("the turn did not run: %v", err)
	}
	e.recordErr(res.Err)
	return res, res.Err, took
}

// slowServer answers with one byte every 250 ms, 80 bytes in all (20 s),
// and stops when the client goes.
func (e *env) slowServer() *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "80")
		w.WriteHeader(http.StatusOK)
		for i := 0; i < 80; i++ {
			if _, err := w.Write([]byte("s")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}))
	e.t.Cleanup(s.Close)
	return s
}

// inFlight starts tool with a on another goroutine and returns a channel
// that receives how it ended: its error, or, when the guest returned
// anyway (it saw its host call answer canceled and returned before its
// next interrupt check), its result as an error, which then carries the
// canceled host call's message.
func (e *env) inFlight(tool string, a hogArgs) <-chan error {
	done := make(chan error, 1)
	go func() {
		b, _ := json.Marshal(a)
		r, err := e.host.CallTool(e.ctx, e.main, tool, b)
		if err == nil {
			err = errors.New("the tool returned: " + r.Text)
		}
		e.record(r.Text)
		done <- err
	}()
	return done
}

// wantEnds asserts that an in-flight call ends within d, with an error
// containing msg.
func (e *env) wantEnds(what string, done <-chan error, d time.Duration, msg string) {
	e.t.Helper()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), msg) {
			e.t.Errorf("%s: the call ended with %v, want an error containing %q", what, err, msg)
		}
	case <-time.After(d):
		e.t.Errorf("%s: the call still runs %v later", what, d)
	}
}

// within runs fn and asserts that it returns within d.
func (e *env) within(what string, d time.Duration, fn func()) time.Duration {
	e.t.Helper()
	start := time.Now()
	done := make(chan struct{})
	go func() { fn(); close(done) }()
	select {
	case <-done:
	case <-time.After(d + 10*time.Second):
		e.t.Fatalf("%s: still waiting %v later: hung", what, d+10*time.Second)
	}
	took := time.Since(start)
	if took > d {
		e.t.Errorf("%s took %v, want at most %v", what, took.Round(time.Millisecond), d)
	}
	return took
}

// A command long enough that waiting for it is visible, short enough to
// keep the suite fast.
const longCommand = "sleep 4; echo late > "

func boundsAttacks() []hostileAttack {
	hostLimits := limits("500ms", "500ms", "64MiB")
	return []hostileAttack{
		{name: "hostcall-loop-tool", run: func(e *env) string {
			// state_get with 4 MiB requests, in a loop, from a tool with a
			// 500 ms budget: each request cost the host ~20 ms to decode
			// while the budget was paused.
			e.mustHog("hog", "", nil, hostLimits)
			r, err, took := e.hogCall(e.ctx, e.main, "hog", hogArgs{Op: "state-loop", Size: 4 << 20, MS: 8000})
			e.wantCut("state_get loop", r, err, took, plugin.ErrComputeBudget, `plugin "hog": dsh_tool`, 500*time.Millisecond)
			return fmt.Sprintf("killed by its 500 ms compute budget after %v", took.Round(10*time.Millisecond))
		}},
		{name: "hostcall-loop-log", run: func(e *env) string {
			// A neighbour whose requests are accepted: 4 MiB log records,
			// each parsed in full. The host's time counts, and past the
			// call's host byte budget the records are refused unread.
			e.mustHog("hog", "", nil, hostLimits)
			r, err, took := e.hogCall(e.ctx, e.main, "hog", hogArgs{Op: "log-loop", Size: 4 << 20, MS: 8000})
			e.wantCut("log loop", r, err, took, plugin.ErrComputeBudget, `plugin "hog": dsh_tool`, 500*time.Millisecond)
			return fmt.Sprintf("killed by its compute budget after %v", took.Round(10*time.Millisecond))
		}},
		{name: "hostcall-byte-budget", run: func(e *env) string {
			// With a long compute budget, the per-call host byte budget
			// refuses the requests past it before reading them.
			e.mustHog("hog", "", nil, limits("20s", "5s", "64MiB"))
			r, err, _ := e.hogCall(e.ctx, e.main, "hog", hogArgs{Op: "log-loop", Size: 4 << 20, N: 80})
			if err != nil {
				e.t.Fatalf("log loop: %v", err)
			}
			if r.Status["ok"] != 64 || r.Status["limit reached"] != 16 || !strings.Contains(r.Last, "grants.limits.host_bytes") {
				e.t.Errorf("80 log records of 4 MiB under a 256 MiB host byte budget: %v, last %q", r.Status, r.Last)
			}
			return fmt.Sprintf("%d records accepted, then refused: %s", r.Status["ok"], r.Last)
		}},
		{name: "hostcall-loop-section", run: func(e *env) string {
			e.mustHog("hog", "", map[string]any{"section": "state-loop", "size": 4 << 20, "ms": 8000}, hostLimits)
			facts := e.agent("a2")
			facts.Model = "hog"
			if _, err := e.callRaw(e.ctx, facts, "hog_ok", nil); err != nil { // the instance, before the clock
				e.t.Fatalf("make a2's instance: %v", err)
			}
			start := time.Now()
			_, err := e.host.Registry().Assemble(e.ctx, prompt.AssembleContext{Agent: facts})
			took := time.Since(start)
			e.recordErr(err)
			e.wantCut("assembly", hogResult{}, err, took, plugin.ErrComputeBudget, `plugin "hog": dsh_section`, 500*time.Millisecond)
			return fmt.Sprintf("the dynamic section was killed by its budget after %v; the assembly failed naming it", took.Round(10*time.Millisecond))
		}},
		{name: "hostcall-loop-init", run: func(e *env) string {
			e.compileFirst("hog") // the bound is dsh_init's, not the compiler's
			start := time.Now()
			_, err := e.hog("hog", "", map[string]any{"init": "state-loop", "size": 4 << 20, "ms": 8000}, hostLimits)
			took := time.Since(start)
			e.wantCut("dsh_init", hogResult{}, err, took, plugin.ErrComputeBudget, `plugin "hog": dsh_init`, 500*time.Millisecond)
			if e.host.Plugin("hog") != nil {
				e.t.Errorf("the plugin is loaded")
			}
			return fmt.Sprintf("init killed by its 500 ms budget after %v; nothing loaded", took.Round(10*time.Millisecond))
		}},
		{name: "exec-run-loop", run: func(e *env) string {
			// Each exec_run is bounded by the exec timeout, and its wait is
			// not compute; a loop of them is bounded by the wall-clock cap.
			e.mustHog("hog", "", nil, "exec: {allowed: true, timeout: 1s, max_timeout: 1s}",
				"limits: {call_timeout: 500ms, init_timeout: 500ms, wall_timeout: 2s, memory: 64MiB}")
			r, err, took := e.hogCall(e.ctx, e.main, "hog", hogArgs{Op: "exec-loop", Command: "sleep 0.2", MS: 10000})
			e.wantCut("exec_run loop", r, err, took, plugin.ErrWallClock, "wall-clock cap of 2s", 2*time.Second)
			return fmt.Sprintf("killed by its 2 s wall-clock cap after %v", took.Round(10*time.Millisecond))
		}},
		{name: "http-slow-response", run: func(e *env) string {
			s := e.slowServer()
			e.mustHog("hog", "", nil, netGrant(hostPort(s), ", timeout: 1s"),
				"limits: {call_timeout: 500ms, init_timeout: 500ms, wall_timeout: 10s, memory: 64MiB}")
			r, err, took := e.hogCall(e.ctx, e.main, "hog", hogArgs{Op: "http", URL: s.URL})
			if err != nil || r.Status["timeout"] != 1 {
				e.t.Errorf("a response of one byte every 250 ms under net.timeout 1s: %+v, %v", r, err)
			}
			if took > time.Second+boundSlack {
				e.t.Errorf("the request took %v, want within its 1 s net.timeout", took)
			}
			return fmt.Sprintf("http_request answered timeout after %v (grants.net.timeout 1s): %.80s", took.Round(10*time.Millisecond), r.Last)
		}},
		{name: "http-request-loop", run: func(e *env) string {
			s := e.slowServer()
			e.mustHog("hog", "", nil, netGrant(hostPort(s), ", timeout: 1s"),
				"limits: {call_timeout: 500ms, init_timeout: 500ms, wall_timeout: 3s, memory: 64MiB}")
			r, err, took := e.hogCall(e.ctx, e.main, "hog", hogArgs{Op: "http-loop", URL: s.URL, MS: 20000})
			e.wantCut("http_request loop", r, err, took, plugin.ErrWallClock, "wall-clock cap of 3s", 3*time.Second)
			return fmt.Sprintf("killed by its 3 s wall-clock cap after %v", took.Round(10*time.Millisecond))
		}},
		{name: "static-section-flood", run: func(e *env) string {
			// 256 static sections of ~4 MiB from a plugin limited to 64 MiB
			// of memory: the registry would hold 1 GiB.
			before := heapNow()
			_, err := e.hog("hog", "", map[string]any{"init": "static-flood", "n": 256, "size": 4<<20 - 4096}, limits("20s", "20s", "64MiB"))
			e.wantErr("load", err, plugin.ErrInit, "grants.limits.prompt_bytes")
			grew := e.wantHeap("static sections", before)
			return fmt.Sprintf("refused (too large, grants.limits.prompt_bytes) before the host read it; heap +%d MiB", grew>>20)
		}},
		{name: "static-section-quota", run: func(e *env) string {
			// Sections each under the quota, adding up past it.
			before := heapNow()
			_, err := e.hog("hog", "", map[string]any{"init": "static-flood", "n": 256, "size": 16 << 10}, defaultLimits)
			e.wantErr("load", err, plugin.ErrInit, "past grants.limits.prompt_bytes (65536)")
			grew := e.wantHeap("static sections", before)
			return fmt.Sprintf("the fifth 16 KiB section was refused (too large); heap +%d MiB", grew>>20)
		}},
		{name: "tool-schema-flood", run: func(e *env) string {
			before := heapNow()
			_, err := e.hog("hog", "", map[string]any{"init": "schema-flood", "n": 64, "size": 1 << 20}, limits("20s", "20s", "64MiB"))
			e.wantErr("load", err, plugin.ErrInit, "grants.limits.prompt_bytes")
			grew := e.wantHeap("tool schemas", before)
			return fmt.Sprintf("a 1 MiB schema refused (too large); heap +%d MiB", grew>>20)
		}},
		{name: "dynamic-section-flood", run: func(e *env) string {
			// 32 dynamic sections of 16 MiB each: one assembly would hold
			// 512 MiB. The first is refused before the host copies it.
			e.mustHog("hog", "", map[string]any{"section": "big", "sections": 32, "size": 16<<20 - 1}, limits("20s", "5s", "128MiB"))
			before := heapNow()
			res, err, took := e.turn("hog", agent.AssemblyBounds{})
			if !errors.Is(err, agent.ErrPrompt) || !errors.Is(err, plugin.ErrQuota) || !strings.Contains(err.Error(), `plugin "hog"`) ||
				!strings.Contains(err.Error(), "grants.limits.prompt_bytes") || res.End.Kind != session.EndError {
				e.t.Errorf("a turn with 32 dynamic sections of 16 MiB: %+v, %v", res.End, err)
			}
			grew := e.wantHeap("dynamic sections", before)
			return fmt.Sprintf("the turn failed in %v naming plugin hog and its prompt_bytes quota; heap +%d MiB", took.Round(10*time.Millisecond), grew>>20)
		}},
		{name: "whole-prompt-quota", run: func(e *env) string {
			// Three plugins, each within its own 64 KiB, together past a
			// deployment's 128 KiB whole-prompt quota.
			for _, n := range []string{"hoga", "hogb", "hogc"} {
				e.mustHog(n, n+"_", map[string]any{"section": "big", "size": 60 << 10}, defaultLimits)
			}
			res, err, _ := e.turn("hog", agent.AssemblyBounds{PromptBytes: 128 << 10})
			if !errors.Is(err, prompt.ErrPromptQuota) || !strings.Contains(err.Error(), `plugin "hogc"`) ||
				!strings.Contains(err.Error(), "whole-prompt quota") || res.End.Kind != session.EndError {
				e.t.Errorf("three 60 KiB sections under a 128 KiB prompt: %+v, %v", res.End, err)
			}
			return "the turn failed naming plugin hogc and the whole-prompt quota"
		}},
		{name: "assembly-deadline", run: func(e *env) string {
			// Within its own 20 s budget a dynamic section can take as long
			// as it likes; the assembly's deadline cuts the turn.
			e.mustHog("hog", "", map[string]any{"section": "state-loop", "size": 1024, "ms": 20000}, limits("20s", "5s", "64MiB"))
			res, err, took := e.turn("hog", agent.AssemblyBounds{Timeout: time.Second})
			if !errors.Is(err, agent.ErrAssemblyTimeout) || !strings.Contains(err.Error(), `plugin "hog": dsh_section`) || res.End.Kind != session.EndError {
				e.t.Errorf("a section taking 20 s under a 1 s assembly deadline: %+v, %v", res.End, err)
			}
			if took > time.Second+boundSlack {
				e.t.Errorf("the turn took %v", took)
			}
			return fmt.Sprintf("the turn failed after %v naming plugin hog", took.Round(10*time.Millisecond))
		}},
		{name: "endagent-during-command", run: func(e *env) string {
			e.mustHog("hog", "", nil, "exec: {allowed: true, timeout: 10s, max_timeout: 10s}", defaultLimits)
			marker := e.ws + "/endagent-marker"
			done := e.inFlight("hog", hogArgs{Op: "exec", Command: longCommand + marker})
			time.Sleep(300 * time.Millisecond)
			took := e.within("EndAgent", closeBound, func() { e.host.EndAgent(e.ctx, e.main.ID) })
			e.wantEnds("the call", done, closeBound, "the agent ended")
			e.wantCommandKilled(marker)
			return fmt.Sprintf("EndAgent returned in %v; the call was cancelled and the command killed", took.Round(10*time.Millisecond))
		}},
		{name: "unload-during-command", run: func(e *env) string {
			e.mustHog("hog", "", nil, "exec: {allowed: true, timeout: 10s, max_timeout: 10s}", defaultLimits)
			marker := e.ws + "/unload-marker"
			done := e.inFlight("hog", hogArgs{Op: "exec", Command: longCommand + marker})
			time.Sleep(300 * time.Millisecond)
			took := e.within("Unload", closeBound, func() {
				if err := e.host.Unload(e.ctx, "hog"); err != nil {
					e.t.Errorf("unload: %v", err)
				}
			})
			e.wantEnds("the call", done, closeBound, "the plugin was unloaded")
			// The load lock is free: another load works at once.
			e.within("a load after the unload", 10*time.Second, func() { e.mustHog("hog", "", nil, defaultLimits) })
			e.wantCommandKilled(marker)
			return fmt.Sprintf("Unload returned in %v; the call was cancelled and the command killed", took.Round(10*time.Millisecond))
		}},
		{name: "close-during-command", run: func(e *env) string {
			// A second host, so that the suite's own goes on serving.
			h, err := plugin.New(plugin.Options{Registry: prompt.NewRegistry(nil), Cache: plugintest.SharedCache(e.t), Logger: slog.New(captureHandler{c: e.logs})})
			must(e.t, err)
			spec := e.spec("hog", guestWasm(e.t, "hog"), "", map[string]any{"self": "hog"}, e.fsGrant(), "exec: {allowed: true, timeout: 10s, max_timeout: 10s}", defaultLimits)
			if _, err := h.Load(e.ctx, spec); err != nil {
				e.t.Fatal(err)
			}
			marker := e.ws + "/close-marker"
			done := make(chan error, 1)
			go func() {
				b, _ := json.Marshal(hogArgs{Op: "exec", Command: longCommand + marker})
				r, err := h.CallTool(e.ctx, e.main, "hog", b)
				if err == nil { // see inFlight
					err = errors.New("the tool returned: " + r.Text)
				}
				done <- err
			}()
			time.Sleep(300 * time.Millisecond)
			took := e.within("Close", closeBound, func() { must(e.t, h.Close(e.ctx)) })
			e.wantEnds("the call", done, closeBound, "the plugin host closed")
			e.wantCommandKilled(marker)
			return fmt.Sprintf("Close returned in %v; the call was cancelled and the command killed", took.Round(10*time.Millisecond))
		}},
		{name: "event-cycle", run: func(e *env) string {
			// Each plugin listens for the other's event; two calls for the
			// same agent emit at once, each holding its own instance.
			e.mustHog("hoga", "a_", map[string]any{"listen": "plugin:hogb/ping", "emit": "plugin:hoga/pong"}, defaultLimits)
			e.mustHog("hogb", "b_", map[string]any{"listen": "plugin:hoga/ping", "emit": "plugin:hogb/pong"}, defaultLimits)
			var wg sync.WaitGroup
			results := make([]hogResult, 2)
			errs := make([]error, 2)
			for i, p := range []string{"a", "b"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i], errs[i], _ = e.hogCall(e.ctx, e.main, p+"_hog", hogArgs{Op: "emit", Event: "plugin:hog" + p + "/ping", MS: 300})
				}()
			}
			var took time.Duration
			took = e.within("two plugins emitting to each other", 2*time.Second+boundSlack, wg.Wait)
			refused := 0
			for i := range results {
				if errs[i] != nil {
					e.t.Errorf("call %d: %v", i, errs[i])
				}
				if results[i].Status["denied"] == 1 && strings.Contains(results[i].Last, plugin.ErrDeadlock.Error()) {
					refused++
				}
			}
			if refused == 0 {
				e.t.Errorf("no emit was refused as a deadlock: %+v", results)
			}
			e.within("Unload after the cycle", closeBound, func() { must(e.t, e.host.Unload(e.ctx, "hoga")) })
			return fmt.Sprintf("%d of 2 emits refused (%v) after %v; no hang", refused, plugin.ErrDeadlock, took.Round(10*time.Millisecond))
		}},
		{name: "state-quota-grant", run: func(e *env) string {
			// The state bound comes from the grants: 2 MiB here.
			e.attacker(nil, "limits: {call_timeout: 30s, init_timeout: 5s, memory: 64MiB, state_bytes: 2MiB}")
			r := e.attack(e.main, attackArgs{Attack: "state-flood", N: 64})
			s := r.Steps[0]
			if s.Code != uint32(hostfns.ErrLimit) || !strings.Contains(s.Msg, "(limit 2097152)") || s.Op != "state_set after 2 MiB" {
				e.t.Errorf("state flood under state_bytes 2MiB: %+v", s)
			}
			return "refused (limit reached) at the third value of ~1 MiB: grants.limits.state_bytes is 2 MiB"
		}},
		{name: "log-rate", run: func(e *env) string {
			e.mustHog("hog", "", nil, "limits: {call_timeout: 5s, init_timeout: 5s, memory: 64MiB, log_bytes: 64KiB}")
			r, err, _ := e.hogCall(e.ctx, e.main, "hog", hogArgs{Op: "log-loop", Size: 1024, N: 2000})
			if err != nil || r.Status["ok"] != 2000 {
				e.t.Fatalf("log loop: %+v, %v", r, err)
			}
			kept, warned := 0, 0
			for _, l := range e.logs.all() {
				if strings.Contains(l, "lllll") {
					kept++
				}
				if strings.Contains(l, "log rate limit reached") {
					warned++
				}
			}
			if want := (64 << 10) / (1024 - 30); kept != want || warned != 1 {
				e.t.Errorf("2000 records of 1 KiB under 64 KiB a minute: %d kept, %d warnings", kept, warned)
			}
			return fmt.Sprintf("%d of 2000 records logged, then one warning; the rest dropped", kept)
		}},
	}
}

// closeBound is how long Unload, EndAgent and Close may take with a call
// in progress: their own bounded wait (1 s) and slack.
const closeBound = 2 * time.Second

// wantCommandKilled waits past the end of longCommand and asserts the command
// did not finish.
func (e *env) wantCommandKilled(marker string) {
	e.t.Helper()
	time.Sleep(4500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		e.t.Errorf("the command outlived its call: %s exists", marker)
	}
}
