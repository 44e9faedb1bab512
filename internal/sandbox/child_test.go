package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// The infinite-loop attacks run in a child process: the test binary
// re-executed with childEnv set. A guest that the host cannot stop can
// freeze the whole process (a garbage collection waits for every
// goroutine to reach a safe point, and no timer runs meanwhile), and a
// frozen process cannot even fail its own test. The parent watches the
// child with a deadline and reports a freeze as a failure.
const childEnv = "DSH_HOSTILE_CHILD"

// childSpec is what the child runs.
type childSpec struct {
	// Scenario is where the guest spins: "init", "tool", "section" or
	// "variable" for the attacker guest; "raw" for the module at Wasm,
	// loaded as plugin "raw", whose tool "hijack" spins.
	Scenario string `json:"scenario"`
	// Attacker is the attacker guest, built by the parent; Wasm the
	// module of the raw scenario.
	Attacker string `json:"attacker"`
	Wasm     string `json:"wasm"`
	// Spinners is how many agents spin at once (tool scenario).
	Spinners int `json:"spinners"`
	// GC forces a garbage collection while the guests spin.
	GC bool `json:"gc"`
}

// childResult is what the child reports on stdout.
type childResult struct {
	LoadErr   string   `json:"load_err"`   // the raw module was refused
	Errors    []string `json:"errors"`     // how each spinning call ended
	ElapsedMs []int64  `json:"elapsed_ms"` // how long each took
	GCMs      int64    `json:"gc_ms"`      // how long the forced GC took; -1 if none
	Legit     string   `json:"legit"`      // a legitimate call afterwards
	LegitErr  string   `json:"legit_err"`
	Logs      []string `json:"logs"`
}

func TestMain(m *testing.M) {
	if s := os.Getenv(childEnv); s != "" {
		os.Exit(runChild(s))
	}
	os.Exit(m.Run())
}

func runChild(raw string) int {
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "child spec:", err)
		return 2
	}
	res, err := childScenario(spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	b, _ := json.Marshal(res)
	os.Stdout.Write(b)
	return 0
}

func childScenario(spec childSpec) (childResult, error) {
	ctx := context.Background()
	res := childResult{GCMs: -1}
	dir, err := guestbuild.CompileCacheDir()
	if err != nil {
		return res, err
	}
	cache, err := plugin.NewCache(dir)
	if err != nil {
		return res, err
	}
	logs := &logCapture{}
	h, err := plugin.New(plugin.Options{Registry: prompt.NewRegistry(nil), Cache: cache, Logger: slog.New(captureHandler{c: logs})})
	if err != nil {
		return res, err
	}
	defer h.Close(ctx)
	grants := &config.Grants{Limits: config.Limits{CallTimeout: 300 * time.Millisecond, InitTimeout: 300 * time.Millisecond, Memory: 64 * config.MiB}}
	loadAs := func(name, source string, cfg map[string]any) error {
		cfg["self"] = name
		b, _ := json.Marshal(cfg)
		_, err := h.Load(ctx, plugin.Spec{Name: name, Source: source, Config: b, Grants: grants})
		return err
	}
	load := func(cfg map[string]any) error { return loadAs("attacker", spec.Attacker, cfg) }
	factsOf := func(i int) *prompt.AgentFacts {
		return &prompt.AgentFacts{ID: fmt.Sprintf("spinner-%d", i), Model: "spin"}
	}
	spinner := func(i int) func() error {
		facts := factsOf(i)
		switch spec.Scenario {
		case "init":
			return func() error { return load(map[string]any{"init": "spin"}) }
		case "tool":
			return func() error {
				_, err := h.CallTool(ctx, facts, "attack", []byte(`{"attack":"spin"}`))
				return err
			}
		case "raw":
			return func() error {
				_, err := h.CallTool(ctx, facts, "hijack", []byte(`{}`))
				return err
			}
		case "section", "variable":
			return func() error {
				_, err := h.Registry().Assemble(ctx, prompt.AssembleContext{Agent: facts})
				return err
			}
		}
		return nil
	}
	switch spec.Scenario {
	case "tool":
	case "raw":
		if err := loadAs("raw", spec.Wasm, map[string]any{}); err != nil {
			res.LoadErr = err.Error()
			spec.Spinners, spec.GC = 0, false
		}
	case "section", "variable":
		if err := load(map[string]any{"provider": spec.Scenario}); err != nil {
			return res, err
		}
	case "init":
		spec.Spinners = 1
	default:
		return res, fmt.Errorf("unknown scenario %q", spec.Scenario)
	}
	if spec.Scenario == "tool" {
		if err := load(map[string]any{}); err != nil {
			return res, err
		}
	}
	// What a spinner's time bounds is the spin: compile the module, and
	// make each spinner's instance, before the clocks start. On a cold
	// cache and a loaded machine the compiler, or a Go guest's start,
	// takes seconds of the wall clock.
	switch spec.Scenario {
	case "init":
		if err := loadAs("warm", spec.Attacker, map[string]any{"prefix": "warm_"}); err != nil {
			return res, fmt.Errorf("compile first: %w", err)
		}
		if err := h.Unload(ctx, "warm"); err != nil {
			return res, err
		}
	case "tool", "section", "variable":
		for i := range spec.Spinners {
			if _, err := h.CallTool(ctx, factsOf(i), "ok", nil); err != nil {
				return res, fmt.Errorf("make spinner %d's instance: %w", i, err)
			}
		}
	}
	res.Errors = make([]string, spec.Spinners)
	res.ElapsedMs = make([]int64, spec.Spinners)
	var wg sync.WaitGroup
	for i := range spec.Spinners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			err := spinner(i)()
			res.ElapsedMs[i] = time.Since(start).Milliseconds()
			if err == nil {
				err = errors.New("<no error>")
			}
			res.Errors[i] = err.Error()
		}()
	}
	if spec.GC {
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		runtime.GC()
		res.GCMs = time.Since(start).Milliseconds()
	}
	wg.Wait()
	// A legitimate call on the same host, to a benign plugin loaded now.
	if err := loadAs("benign", spec.Attacker, map[string]any{"prefix": "benign_"}); err != nil {
		res.LegitErr = err.Error()
	}
	facts := &prompt.AgentFacts{ID: "legit", Model: "m"}
	if r, err := h.CallTool(ctx, facts, "benign_ok", nil); err != nil {
		res.LegitErr = err.Error()
	} else {
		res.Legit = r.Text
	}
	if _, err := h.Registry().Assemble(ctx, prompt.AssembleContext{Agent: facts}); err != nil {
		res.LegitErr += "assemble: " + err.Error()
	}
	res.Logs = logs.all()
	return res, nil
}

// childRun runs spec in a child process with gomaxprocs Ps (0: the
// default) and fails the test if the child does not finish in time.
func (e *env) childRun(spec childSpec, gomaxprocs int) childResult {
	e.t.Helper()
	spec.Attacker = guestWasm(e.t, "attacker")
	b, err := json.Marshal(spec)
	must(e.t, err)
	// Generous: the child compiles and starts a Go guest, under -race on a
	// loaded 2-core machine. A host that cannot stop its guest never
	// finishes, however long it is given.
	ctx, cancel := context.WithTimeout(e.ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(b))
	if gomaxprocs > 0 {
		cmd.Env = append(cmd.Env, fmt.Sprintf("GOMAXPROCS=%d", gomaxprocs))
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	e.record(stdout.String())
	e.record(stderr.String())
	if ctx.Err() != nil {
		e.t.Fatalf("the host process froze: a %s loop (spinners %d, GC %v, GOMAXPROCS %d) was not stopped in %v; the process had to be killed",
			spec.Scenario, spec.Spinners, spec.GC, gomaxprocs, time.Since(start).Round(time.Second))
	}
	if err != nil {
		e.t.Fatalf("child: %v\n%s", err, stderr.String())
	}
	var res childResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		e.t.Fatalf("child output %q: %v", stdout.String(), err)
	}
	for _, l := range res.Logs {
		e.record(l)
	}
	return res
}

// wantKilled checks that every spinner was killed for its budget, within
// limit, that the forced GC (if any) completed, and that the host then
// served a legitimate call.
func (e *env) wantKilled(res childResult, msg string, limit time.Duration) string {
	e.t.Helper()
	for i, got := range res.Errors {
		if !strings.Contains(got, msg) {
			e.t.Errorf("spinner %d: %s, want %q", i, got, msg)
		}
		if d := time.Duration(res.ElapsedMs[i]) * time.Millisecond; d > limit {
			e.t.Errorf("spinner %d was killed after %v, want under %v", i, d, limit)
		}
	}
	if res.GCMs > 1000 {
		e.t.Errorf("a garbage collection took %d ms while guests spun", res.GCMs)
	}
	if res.Legit != "ok" || res.LegitErr != "" {
		e.t.Errorf("the next legitimate call: %q, %s", res.Legit, res.LegitErr)
	}
	return fmt.Sprintf("killed after %v ms; a GC during the loop took %d ms", res.ElapsedMs, res.GCMs)
}
