package guests

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

func bashGrants(outputBytes config.ByteSize) config.Grants {
	g := workspaceRW()
	g.Exec = config.ExecGrant{Allowed: true, OutputBytes: outputBytes}
	return g
}

func TestToolBashMarkers(t *testing.T) {
	e := loadTool(t, "tool-bash", bashGrants(0), "", 0)
	cases := []struct{ command, want string }{
		{"echo SNAPSHOT_OK", "SNAPSHOT_OK\n"},
		{"true", "(no output)"},
		{"exit 3", "(no output)\n[exit code: 3]"},
		{"echo oops >&2", "[stderr]\noops\n"},
		{"printf out; echo err >&2; exit 2", "out\n[stderr]\nerr\n[exit code: 2]"},
		{"echo out; echo err >&2", "out\n[stderr]\nerr\n"},
		{"pwd", e.dir + "\n"},
	}
	for _, c := range cases {
		if got := e.ok(t, "bash", jsonArgs("command", c.command, "description", "test")); got != c.want {
			t.Errorf("bash %q = %q, want %q", c.command, got, c.want)
		}
	}
	// Without the optional description, as recorded sessions call it.
	if got := e.ok(t, "bash", `{"command":"echo hi"}`); got != "hi\n" {
		t.Errorf("no description: %q", got)
	}
	if err := os.Mkdir(filepath.Join(e.dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := e.ok(t, "bash", `{"command":"pwd","workdir":"sub"}`); got != filepath.Join(e.dir, "sub")+"\n" {
		t.Errorf("workdir: %q", got)
	}
	e.fails(t, "bash", `{"command":"pwd","workdir":"../.."}`, "workdir", "outside the granted roots")
	e.fails(t, "bash", `{"command":"   "}`, `"command"`)
	e.fails(t, "bash", `{"command":"true","timeoutMs":0}`, `"timeoutMs"`)

	// A timeout: the host kills the command's whole tree with SIGKILL,
	// and what it printed before is kept. The timeout runs from the
	// command's start, sandbox setup included, which a loaded machine
	// can stretch past it before the echo: then the same is asked again
	// with a longer timeout, since what is tested is the result's form.
	got := ""
	for ms := 300; ; ms *= 2 {
		got = e.ok(t, "bash", `{"command":"echo started; sleep 60","timeoutMs":`+strconv.Itoa(ms)+`}`)
		if want := "started\n[timed out after " + strconv.Itoa(ms) + "ms]\n[killed by signal: SIGKILL]"; got == want {
			break
		}
		if strings.HasPrefix(got, "started\n") || ms >= 10_000 {
			t.Fatalf("timeout after %d ms: %q", ms, got)
		}
		t.Logf("the command did not echo within its %d ms timeout (a loaded machine): %q; again with %d ms", ms, got, 2*ms)
	}
	// A signal that ends a command inside the shell is reported by the
	// shell (it may be PID 1 of a PID namespace, which ignores signals it
	// sends itself): the marker is its exit status.
	got = e.ok(t, "bash", `{"command":"sh -c 'kill -TERM $$'; exit $?"}`)
	if !strings.HasPrefix(got, "[stderr]\n") || !strings.HasSuffix(got, "Terminated\n[exit code: 143]") {
		t.Errorf("child signalled: %q", got)
	}
}

func TestToolBashTruncationSavesFullOutput(t *testing.T) {
	e := loadTool(t, "tool-bash", bashGrants(1000), "", 0)
	got := e.ok(t, "bash", `{"command":"seq 1 20000; echo done >&2"}`)
	m := regexp.MustCompile(`\n\[output truncated: (\d+) bytes omitted; full output: (\.dsh-wasm/scratch/exec-[^\]\s]+\.stdout)\]\n`).FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("no truncation marker naming the saved file:\n%s", got)
	}
	var full strings.Builder
	for i := 1; i <= 20000; i++ {
		full.WriteString(strconv.Itoa(i) + "\n")
	}
	if !strings.HasPrefix(got, "1\n2\n3\n") || !strings.HasSuffix(got, "19999\n20000\n[stderr]\ndone\n") {
		t.Fatalf("head and tail:\n%.200s ... %s", got, got[len(got)-100:])
	}
	if n, _ := strconv.Atoi(m[1]); n != full.Len()-1000 {
		t.Fatalf("omitted %s bytes, want %d", m[1], full.Len()-1000)
	}
	saved := e.read(t, m[2])
	if saved != full.String() {
		t.Fatalf("saved file holds %d bytes, want the whole %d", len(saved), full.Len())
	}
	// The short stream was not saved: only a truncated stream spills.
	files, _ := filepath.Glob(filepath.Join(e.dir, ".dsh-wasm/scratch/*"))
	if len(files) != 1 {
		t.Fatalf("scratch holds %v, want only the stdout file", files)
	}
}

func TestToolBashBackgroundTasks(t *testing.T) {
	e := loadTool(t, "tool-bash", bashGrants(0), "", 0)
	if got := e.ok(t, "bash", `{"command":"for i in 1 2 3; do echo tick$i; sleep 0.1; done; exit 4","run_in_background":true}`); got != "started background task bash-1" {
		t.Fatalf("start: %q", got)
	}
	var seen strings.Builder
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := e.ok(t, "bash_output", `{"task_id":"bash-1"}`)
		if strings.HasSuffix(got, "[task bash-1: running]") {
			seen.WriteString(strings.TrimSuffix(strings.TrimSuffix(got, "[task bash-1: running]"), "(no new output)\n"))
			if time.Now().After(deadline) {
				t.Fatalf("task still running: %q", got)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if !strings.HasSuffix(got, "[task bash-1: finished]\n[exit code: 4]") {
			t.Fatalf("finished task: %q", got)
		}
		seen.WriteString(strings.TrimSuffix(strings.TrimSuffix(got, "[task bash-1: finished]\n[exit code: 4]"), "(no new output)\n"))
		break
	}
	if seen.String() != "tick1\ntick2\ntick3\n" {
		t.Fatalf("output shown once each: %q", seen.String())
	}
	if got := e.ok(t, "bash_output", `{"task_id":"bash-1"}`); got != "(no new output)\n[task bash-1: finished]\n[exit code: 4]" {
		t.Fatalf("after the end: %q", got)
	}

	if got := e.ok(t, "bash", `{"command":"echo begin; sleep 60","run_in_background":true}`); got != "started background task bash-2" {
		t.Fatalf("start 2: %q", got)
	}
	// Kill it once it has begun (on a loaded machine that may take a
	// while): the kill shows the output not yet shown, and its end.
	begun := ""
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(begun, "begin\n"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("task 2 did not begin: %q", begun)
		}
		got := e.ok(t, "bash_output", `{"task_id":"bash-2"}`)
		if !strings.HasSuffix(got, "[task bash-2: running]") {
			t.Fatalf("task 2 before the kill: %q", got)
		}
		begun += strings.TrimSuffix(strings.TrimSuffix(got, "[task bash-2: running]"), "(no new output)\n")
	}
	if begun != "begin\n" {
		t.Fatalf("task 2 printed %q before the kill", begun)
	}
	if got := e.ok(t, "bash_kill", `{"task_id":"bash-2"}`); got != "(no new output)\n[task bash-2: killed]" {
		t.Fatalf("kill: %q", got)
	}
	e.fails(t, "bash_output", `{"task_id":"bash-9"}`, `no background task "bash-9"`)
}

// TestToolBashTasksEndWithSession: a background task stops when its
// agent's session ends.
func TestToolBashTasksEndWithSession(t *testing.T) {
	e := loadTool(t, "tool-bash", bashGrants(0), "", 0)
	e.ok(t, "bash", `{"command":"while true; do date +%s%N > tick; sleep 0.05; done","run_in_background":true}`)
	tick := filepath.Join(e.dir, "tick")
	changed := func(within time.Duration) bool {
		before, _ := os.ReadFile(tick)
		deadline := time.Now().Add(within)
		for time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			now, _ := os.ReadFile(tick)
			if string(now) != string(before) {
				return true
			}
		}
		return false
	}
	if !changed(10 * time.Second) {
		t.Fatal("the background task never ran")
	}
	e.h.EndAgent(bg, e.facts.ID)
	time.Sleep(300 * time.Millisecond) // a tick already in flight
	if changed(time.Second) {
		t.Fatal("the background task outlived its session")
	}
}

// TestToolBashReadOnlyWorkspace: with a read-only workspace there is no
// scratch directory; commands still run, long output is cut unsaved.
func TestToolBashReadOnlyWorkspace(t *testing.T) {
	g := config.Grants{FS: []config.FSGrant{{Path: config.Workspace, Mode: config.ModeRO}}, Exec: config.ExecGrant{Allowed: true, OutputBytes: 100}}
	e := loadTool(t, "tool-bash", g, "", 0)
	if got := e.ok(t, "bash", `{"command":"echo hi"}`); got != "hi\n" {
		t.Fatalf("echo: %q", got)
	}
	got := e.ok(t, "bash", `{"command":"seq 1 1000"}`)
	if !strings.Contains(got, "bytes omitted; full output: (not saved)]") {
		t.Fatalf("long output: %q", got)
	}
	if _, err := os.Stat(filepath.Join(e.dir, ".dsh-wasm")); !os.IsNotExist(err) {
		t.Fatalf("scratch created in a read-only workspace: %v", err)
	}
}
