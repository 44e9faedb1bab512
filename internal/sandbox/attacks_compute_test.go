package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
)

// killLimit bounds how long after its call began a spinning guest may
// still run: its budget is 300 ms; the rest is slack for a loaded machine.
const killLimit = 5 * time.Second

// loopLimits give loop attacks a small compute budget.
var loopLimits = limits("300ms", "300ms", "64MiB")

// killedCall runs an attack that must not return: the call fails with
// target, within limit.
func (e *env) killedCall(a attackArgs, target error, msg string, limit time.Duration) time.Duration {
	e.t.Helper()
	// The instance is made first, by the benign tool: the bound is the
	// attack's, not a Go guest's start.
	if _, err := e.call(e.main, "ok", nil); err != nil {
		e.t.Fatalf("make the instance: %v", err)
	}
	start := time.Now()
	res, err := e.call(e.main, "attack", a)
	took := time.Since(start)
	if err == nil {
		e.t.Fatalf("%s returned %+v", a.Attack, res)
	}
	e.wantErr(a.Attack, err, target, msg)
	var ce *plugin.CallError
	if !errors.As(err, &ce) || ce.Plugin != "attacker" || ce.Export != hostfns.ExportTool {
		e.t.Errorf("%s: error %v is not a CallError of attacker's %s", a.Attack, err, hostfns.ExportTool)
	}
	if took > limit {
		e.t.Errorf("%s took %v, want under %v", a.Attack, took, limit)
	}
	return took
}

// wantLog asserts that some log record contains s.
func (e *env) wantLog(s string) {
	e.t.Helper()
	if !slices.ContainsFunc(e.logs.all(), func(l string) bool { return strings.Contains(l, s) }) {
		e.t.Errorf("no log record contains %q", s)
	}
}

func computeAttacks() []hostileAttack {
	return []hostileAttack{
		{name: "memory-bomb", run: func(e *env) string {
			e.attacker(nil, limits("5s", "5s", "32MiB"))
			e.killedCall(attackArgs{Attack: "memory-bomb", N: 64}, plugin.ErrTrap, "wasm error: unreachable", 5*time.Second)
			e.wantLog("fatal error: out of memory")
			return "trapped at the 32 MiB limit (the Go runtime's out of memory); the instance was discarded"
		}},
		{name: "loop-in-init", run: func(e *env) string {
			res := e.childRun(childSpec{Scenario: "init", GC: true}, 0)
			return e.wantKilled(res, "plugin init failed: plugin \"attacker\": dsh_init: plugin exceeded its compute budget", killLimit)
		}},
		{name: "loop-in-provider-section", run: func(e *env) string {
			res := e.childRun(childSpec{Scenario: "section", Spinners: 1, GC: true}, 0)
			return e.wantKilled(res, "plugin \"attacker\": dsh_section: plugin exceeded its compute budget", killLimit)
		}},
		{name: "loop-in-provider-variable", run: func(e *env) string {
			res := e.childRun(childSpec{Scenario: "variable", Spinners: 1, GC: true}, 0)
			return e.wantKilled(res, "plugin \"attacker\": dsh_variable: plugin exceeded its compute budget", killLimit)
		}},
		{name: "loop-in-tool", run: func(e *env) string {
			res := e.childRun(childSpec{Scenario: "tool", Spinners: 1, GC: true}, 0)
			return e.wantKilled(res, "plugin \"attacker\": dsh_tool: plugin exceeded its compute budget", killLimit)
		}},
		{name: "loop-on-every-cpu", run: func(e *env) string {
			// As many agents spin as the process has Ps, so no idle P is
			// left to run the timers that enforce the budgets.
			res := e.childRun(childSpec{Scenario: "tool", Spinners: 2, GC: true}, 2)
			return e.wantKilled(res, "plugin exceeded its compute budget", killLimit)
		}},
		{name: "loop-single-cpu", run: func(e *env) string {
			// One P (a container limited to one CPU): the spinning guest
			// holds the only P.
			res := e.childRun(childSpec{Scenario: "tool", Spinners: 1}, 1)
			return e.wantKilled(res, "plugin exceeded its compute budget", killLimit)
		}},
		{name: "fuel-global-hijack", run: func(e *env) string {
			// A hand-written module writes the globals an instrumenting
			// host would append (fuel, interrupt flag) to loop forever
			// unchecked. It must be refused as invalid, or killed.
			path := filepath.Join(e.base, "hijack.wasm")
			must(e.t, os.WriteFile(path, fuelHijackModule(), 0o644))
			res := e.childRun(childSpec{Scenario: "raw", Wasm: path, Spinners: 1, GC: true}, 0)
			if res.LoadErr != "" {
				if !strings.Contains(res.LoadErr, plugin.ErrABI.Error()) {
					e.t.Errorf("load: %s, want %v", res.LoadErr, plugin.ErrABI)
				}
				if res.Legit != "ok" || res.LegitErr != "" {
					e.t.Errorf("the next legitimate call: %q, %s", res.Legit, res.LegitErr)
				}
				return "refused at load: the module uses globals it does not define"
			}
			return e.wantKilled(res, "plugin exceeded its compute budget", killLimit)
		}},
		{name: "stack-overflow", run: func(e *env) string {
			e.attacker(nil, limits("5s", "5s", "64MiB"))
			e.killedCall(attackArgs{Attack: "recurse"}, plugin.ErrTrap, "wasm error: unreachable", 5*time.Second)
			e.wantLog("fatal error: out of memory")
			return "trapped when the goroutine stack met the 64 MiB limit; the instance was discarded"
		}},
		{name: "cancel-during-host-call", run: func(e *env) string {
			// The guest is blocked in exec_run when the agent's turn is
			// cancelled: the command is killed, the host call returns,
			// and the module is closed as soon as the guest runs again.
			e.attacker(nil, execGrant, loopLimits)
			// Control: time blocked in a host call is not compute, so a
			// command longer than the 300 ms budget runs to its end.
			r := e.attack(e.main, attackArgs{Attack: "exec", Exec: &hostfns.ExecRequest{Command: "sleep 0.5; echo slept"}})
			if s := r.step(e.t, "exec_run"); s.Status != "ok" || !strings.Contains(s.Data, `"data":"slept\n"`) {
				e.t.Fatalf("a host call longer than the compute budget: %+v", s)
			}
			marker := e.ws + "/cancel-marker"
			ctx, cancel := context.WithTimeout(e.ctx, 300*time.Millisecond)
			defer cancel()
			b, _ := jsonBytes(attackArgs{Attack: "exec", Exec: &hostfns.ExecRequest{Command: "sleep 0.6; echo late > " + marker, TimeoutMs: 5000}})
			start := time.Now()
			res, err := e.callRaw(ctx, e.main, "attack", b)
			took := time.Since(start)
			// Either the host kills the guest with its call (an error for
			// the caller), or the guest sees exec_run end "canceled" and
			// returns; both within moments of the cancellation.
			seen := "the call failed: call cancelled"
			if err != nil {
				if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "call cancelled") {
					e.t.Errorf("cancelled during exec_run: %v", err)
				}
			} else {
				seen = "the guest saw exec_run canceled"
				e.wantStatus(decodeReport(e, res.Text), "exec_run", hostfns.ErrCanceled, "execjail: command canceled")
			}
			if took > 2*time.Second {
				e.t.Errorf("the cancelled call took %v", took)
			}
			time.Sleep(700 * time.Millisecond)
			if _, err := os.Stat(marker); err == nil {
				e.t.Errorf("the command outlived the cancelled call")
			}
			return fmt.Sprintf("%s %v after cancellation began; the command was killed", seen, took.Round(10*time.Millisecond))
		}},
		{name: "host-call-from-initialize", run: func(e *env) string {
			e.attacker(nil)
			r := e.attack(e.main, attackArgs{Attack: "initialize-hostcall"})
			for _, op := range []string{"section_register from _initialize", "state_get from _initialize"} {
				if s := r.step(e.t, op); s.Code != uint32(hostfns.ErrDenied) || s.N != 0 {
					e.t.Errorf("%s: %+v, want denied with no payload", op, s)
				}
			}
			secs, _, _ := e.host.Registry().Names()
			if slices.Contains(secs, "from:initialize") {
				e.t.Errorf("a section registered from _initialize: %v", secs)
			}
			return "refused (denied: no call in progress)"
		}},
		{name: "proc-exit-from-tool", run: func(e *env) string {
			e.attacker(nil)
			e.killedCall(attackArgs{Attack: "exit", Code: 3}, plugin.ErrTrap, "plugin trapped: the plugin exited with code 3", 2*time.Second)
			return "trapped (exit code 3); the instance was discarded"
		}},
		{name: "sleep-past-budget", run: func(e *env) string {
			// A guest blocked in WASI poll_oneoff (time.Sleep) is not
			// computing, but it holds its call: the budget must still end
			// it. wazero's own poll_oneoff sleeps in Go and ignores the
			// context, so the host has to cut the sleep short itself.
			e.attacker(nil, loopLimits)
			took := e.killedCall(attackArgs{Attack: "sleep", MS: 3000}, plugin.ErrComputeBudget, "plugin exceeded its compute budget (killed)", 1500*time.Millisecond)
			return fmt.Sprintf("killed %v into a 3 s sleep", took.Round(10*time.Millisecond))
		}},
		{name: "stdout-flood", run: func(e *env) string {
			e.attacker(nil, limits("10s", "5s", "64MiB"))
			r := e.attack(e.main, attackArgs{Attack: "stdout-flood", N: 8 << 20})
			s := r.step(e.t, "wrote to stdout")
			if s.N < 8<<20 {
				e.t.Errorf("stdout flood: %+v", s)
			}
			e.wantLog("stdout line 99 stream=stdio")
			longest := 0
			for _, l := range e.logs.all() {
				longest = max(longest, len(l))
			}
			if longest > 64<<10+512 {
				e.t.Errorf("a log record of %d bytes", longest)
			}
			return fmt.Sprintf("%d MiB written, longest log record %d bytes", s.N>>20, longest)
		}},
		{name: "log-flood", run: func(e *env) string {
			e.attacker(nil)
			e.attack(e.main, attackArgs{Attack: "log-flood", N: 1 << 20})
			var big, lines int
			for _, l := range e.logs.all() {
				if strings.Contains(l, "LLLL") {
					big++
					if n := strings.Count(l, "L"); n < 64<<10 || n > 64<<10+64 || !strings.Contains(l, "…(truncated)") {
						e.t.Errorf("the 1 MiB message was logged with %d L's: %.80q…", n, l)
					}
				}
				if strings.Contains(l, "flood line") {
					lines++
				}
			}
			if big != 1 || lines != 1000 {
				e.t.Errorf("logged %d big and %d small records, want 1 and 1000", big, lines)
			}
			return "a 1 MiB message truncated to 64 KiB; every record tagged plugin=attacker"
		}},
	}
}
