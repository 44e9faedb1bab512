package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/prereq"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/execjail"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

const execGrant = "exec: {allowed: true, timeout: 2s, max_timeout: 5s, output_bytes: 4096}"

// execOK runs one exec host function through the attacker and decodes a
// successful response into v.
func (e *env) execOK(facts *prompt.AgentFacts, attack string, a attackArgs, v any) {
	e.t.Helper()
	a.Attack = attack
	s := e.attack(facts, a).Steps[0]
	if s.Status != "ok" {
		e.t.Fatalf("%s: %s (%d) %s", attack, s.Status, s.Code, s.Msg)
	}
	if err := json.Unmarshal([]byte(s.Data), v); err != nil {
		e.t.Fatalf("%s: bad response %q: %v", attack, s.Data, err)
	}
}

// daemonScript starts a setsid daemon that, unless killed, writes marker
// after a short sleep.
func daemonScript(marker string) string {
	return fmt.Sprintf("setsid sh -c 'sleep 0.4; echo escaped > %s' </dev/null >/dev/null 2>&1 &", marker)
}

// requireStrongIsolation skips the daemon attacks where execjail can only
// kill a process group, which a setsid daemon escapes by design (see
// execjail's package doc and docs/SECURITY.md).
func requireStrongIsolation(e *env) {
	if m := execjail.Isolation(); m == execjail.ModeProcessGroup || m == "" {
		prereq.Missing(e.t, "execjail isolation here is %q: %s", m, m.Describe())
	}
}

// wantNoMarker waits past the daemon's sleep and checks it never wrote.
func (e *env) wantNoMarker(marker string) {
	e.t.Helper()
	time.Sleep(800 * time.Millisecond)
	if b, err := os.ReadFile(marker); err == nil {
		e.t.Errorf("the daemon outlived its command and wrote %q", b)
	}
}

func execAttacks() []hostileAttack {
	return []hostileAttack{
		{name: "exec-without-grant", run: func(e *env) string {
			e.attacker(nil)
			r := e.attack(e.main, attackArgs{Attack: "exec-all", ID: "1", Exec: &hostfns.ExecRequest{Command: "cat " + e.outside + "/secret.txt"}})
			for _, op := range []string{"exec_run", "exec_start", "exec_poll", "exec_kill"} {
				e.wantStatus(r, op, hostfns.ErrDenied, `plugin "attacker" is not granted exec (add under grants.exec: allowed: true)`)
			}
			return "refused (denied: not granted exec)"
		}},
		{name: "exec-cwd-outside-roots", run: func(e *env) string {
			e.attacker(nil, execGrant)
			for _, cwd := range []string{e.outside, e.ws + "/host-dir-link", "/", e.ws + "/../" + e.rel[3:]} {
				r := e.attack(e.main, attackArgs{Attack: "exec", Exec: &hostfns.ExecRequest{Command: "cat secret.txt", Cwd: cwd}})
				e.wantStatus(r, "exec_run", hostfns.ErrDenied, "working directory outside the granted roots")
			}
			return "refused (denied: cwd outside the roots, through a symlink or ..)"
		}},
		{name: "exec-setsid-daemon-timeout", run: func(e *env) string {
			requireStrongIsolation(e)
			e.attacker(nil, execGrant)
			// Control: given the time, the daemon does write its marker.
			// The command waits for it rather than for a fixed time, which
			// a loaded machine can make too short.
			control := e.ws + "/control-marker"
			var res hostfns.ExecResult
			e.execOK(e.main, "exec", attackArgs{Exec: &hostfns.ExecRequest{
				Command:   daemonScript(control) + " while [ ! -s " + control + " ]; do sleep 0.05; done",
				TimeoutMs: 5000}}, &res) // grants.exec.max_timeout
			if b, err := os.ReadFile(control); err != nil || string(b) != "escaped\n" {
				e.t.Fatalf("control: the daemon did not write its marker: %q, %v (%+v)", b, err, res)
			}
			// The daemon says it is up as it starts: a timeout that came
			// before that proves nothing (the setup of a loaded machine can
			// take longer than 200 ms), so it is tried again, longer.
			marker, up := e.ws+"/daemon-marker", e.ws+"/daemon-up"
			script := fmt.Sprintf("setsid sh -c 'echo up > %s; sleep 0.4; echo escaped > %s' </dev/null >/dev/null 2>&1 & sleep 60", up, marker)
			for timeout := int64(200); ; timeout *= 2 {
				start := time.Now()
				e.execOK(e.main, "exec", attackArgs{Exec: &hostfns.ExecRequest{Command: script, TimeoutMs: timeout}}, &res)
				// The command sleeps 60 s: half that separates a kill at the
				// timeout from none, however loaded the machine.
				if took := time.Since(start); !res.TimedOut || res.Signal != "SIGKILL" || took > 30*time.Second {
					e.t.Fatalf("result %+v after %v, want timed out and SIGKILL at %d ms", res, took, timeout)
				}
				if _, err := os.Stat(up); err == nil {
					break
				}
				if timeout >= 3200 { // the next would pass grants.exec.max_timeout
					e.t.Fatalf("the daemon was never up before a timeout of %d ms", timeout)
				}
			}
			e.wantNoMarker(marker)
			return fmt.Sprintf("killed at its timeout with its setsid daemon (%s)", execjail.Isolation())
		}},
		{name: "exec-daemon-outlives-exit", run: func(e *env) string {
			requireStrongIsolation(e)
			e.attacker(nil, execGrant)
			marker := e.ws + "/daemon-marker"
			var res hostfns.ExecResult
			e.execOK(e.main, "exec", attackArgs{Exec: &hostfns.ExecRequest{Command: daemonScript(marker) + " echo started"}}, &res)
			if res.ExitCode != 0 || res.Stdout.Data != "started\n" || res.TimedOut {
				e.t.Errorf("result %+v", res)
			}
			e.wantNoMarker(marker)
			return "the daemon died with the command that started it"
		}},
		{name: "exec-background-daemon-kill", run: func(e *env) string {
			requireStrongIsolation(e)
			e.attacker(nil, execGrant)
			// The daemon appends to its marker every 20 ms while it lives:
			// the kill must come after it is up, or it proves nothing.
			marker := e.ws + "/daemon-marker"
			daemon := fmt.Sprintf("setsid sh -c 'while :; do echo alive >> %s; sleep 0.02; done' </dev/null >/dev/null 2>&1 &", marker)
			var st hostfns.ExecStatus
			e.execOK(e.main, "exec-start", attackArgs{Exec: &hostfns.ExecRequest{Command: daemon + " sleep 10"}}, &st)
			deadline := time.Now().Add(10 * time.Second)
			for {
				if b, err := os.ReadFile(marker); err == nil && strings.Count(string(b), "alive") >= 2 {
					break
				}
				if time.Now().After(deadline) {
					e.t.Fatalf("the daemon never came up")
				}
				time.Sleep(5 * time.Millisecond)
			}
			var killed hostfns.ExecStatus
			e.execOK(e.main, "exec-kill", attackArgs{ID: st.ID}, &killed)
			if killed.Running || !killed.Result.Canceled || killed.Result.Signal != "SIGKILL" {
				e.t.Errorf("after exec_kill: %+v", killed)
			}
			time.Sleep(100 * time.Millisecond) // a write already under way lands
			before, _ := os.ReadFile(marker)
			time.Sleep(400 * time.Millisecond) // twenty of the daemon's periods
			if after, _ := os.ReadFile(marker); len(after) != len(before) {
				e.t.Errorf("the daemon outlived exec_kill: its marker grew from %d to %d bytes", len(before), len(after))
			}
			return "exec_kill took the background task and its running daemon down"
		}},
		{name: "exec-task-other-session", run: func(e *env) string {
			e.attacker(nil, execGrant)
			var st hostfns.ExecStatus
			e.execOK(e.main, "exec-start", attackArgs{Exec: &hostfns.ExecRequest{Command: "sleep 5"}}, &st)
			thief := e.agent("thief")
			for _, attack := range []string{"exec-poll", "exec-kill"} {
				r := e.attack(thief, attackArgs{Attack: attack, ID: st.ID})
				e.wantStatus(r, strings.ReplaceAll(attack, "-", "_"), hostfns.ErrNotFound, "unknown task")
			}
			var still hostfns.ExecStatus
			e.execOK(e.main, "exec-poll", attackArgs{ID: st.ID}, &still)
			if !still.Running {
				e.t.Errorf("another session's exec_kill stopped the task: %+v", still)
			}
			e.execOK(e.main, "exec-kill", attackArgs{ID: st.ID}, &still)
			return "refused (not found: tasks belong to their session)"
		}},
		{name: "exec-task-flood", run: func(e *env) string {
			e.attacker(nil, execGrant)
			started := 0
			var last step
			for i := 0; i < 40; i++ {
				last = e.attack(e.main, attackArgs{Attack: "exec-start", Exec: &hostfns.ExecRequest{Command: "sleep 5"}}).Steps[0]
				if last.Status != "ok" {
					break
				}
				started++
			}
			if started != execjail.DefaultMaxRunning || last.Code != uint32(hostfns.ErrLimit) || !strings.Contains(last.Msg, "too many running tasks") {
				e.t.Errorf("started %d tasks, then %s (%d) %q; want %d, then a refusal", started, last.Status, last.Code, last.Msg, execjail.DefaultMaxRunning)
			}
			e.host.EndAgent(e.ctx, e.main.ID)
			return fmt.Sprintf("refused after %d running tasks (%s)", started, last.Msg)
		}},
		{name: "exec-env-scrubbed", run: func(e *env) string {
			e.attacker(nil, execGrant, "env: ["+grantedEnv+"]")
			var res hostfns.ExecResult
			e.execOK(e.main, "exec", attackArgs{Exec: &hostfns.ExecRequest{Command: "env; cat /proc/self/environ"}}, &res)
			if !strings.Contains(res.Stdout.Data, "PATH=") || strings.Contains(res.Stdout.Data, canaryEnv) {
				e.t.Errorf("command environment:\n%s", res.Stdout.Data)
			}
			return "ungranted variables never reach commands"
		}},
		{name: "exec-output-flood", run: func(e *env) string {
			e.attacker(nil, execGrant)
			var res hostfns.ExecResult
			e.execOK(e.main, "exec", attackArgs{Exec: &hostfns.ExecRequest{
				Command: "head -c 5000000 /dev/zero | tr '\\0' x; head -c 300000 /dev/zero | tr '\\0' y >&2"}}, &res)
			for name, o := range map[string]hostfns.ExecOutput{"stdout": res.Stdout, "stderr": res.Stderr} {
				if !o.Truncated || len(o.Data) > 4096 || o.Total < 300000 || o.Omitted != o.Total-int64(len(o.Data)) {
					e.t.Errorf("%s: truncated %v, kept %d of %d bytes, omitted %d", name, o.Truncated, len(o.Data), o.Total, o.Omitted)
				}
			}
			return fmt.Sprintf("capped (kept %d of %d bytes)", len(res.Stdout.Data), res.Stdout.Total)
		}},
		{name: "exec-timeout-beyond-grant", run: func(e *env) string {
			e.attacker(nil, execGrant)
			r := e.attack(e.main, attackArgs{Attack: "exec", Exec: &hostfns.ExecRequest{Command: "sleep 600", TimeoutMs: 600000}})
			e.wantStatus(r, "exec_run", hostfns.ErrDenied, "timeout 10m0s exceeds grants.exec.max_timeout 5s")
			return "refused (denied: beyond max_timeout)"
		}},
	}
}
