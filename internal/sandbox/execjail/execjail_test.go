//go:build linux

package execjail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/prereq"
)

var allModes = []Mode{ModePIDNamespace, ModeCgroup, ModeProcessGroup}

const testPath = "PATH=/usr/local/bin:/usr/bin:/bin"

// newManager builds a Manager in mode (skipping if the system lacks it)
// with one writable root, returned as the second value.
func newManager(t *testing.T, mode Mode, opts Options) (*Manager, string) {
	t.Helper()
	if err := probe(mode); err != nil {
		prereq.Missing(t, "isolation mode %s unavailable here: %v", mode, err)
	}
	root := t.TempDir()
	if opts.Roots == nil {
		opts.Roots = []Root{{Path: root, Writable: true}}
	}
	if opts.Env == nil {
		opts.Env = []string{testPath}
	}
	opts.Isolation = mode
	m, err := NewManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, root
}

func forEachMode(t *testing.T, f func(t *testing.T, mode Mode)) {
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) { f(t, mode) })
	}
}

func run(t *testing.T, m *Manager, cmd Command) Result {
	t.Helper()
	res, err := m.Run(context.Background(), cmd)
	if err != nil {
		t.Fatalf("Run(%+v): %v", cmd, err)
	}
	return res
}

// token returns a unique sleep duration that marks a test's processes.
func token() string {
	return fmt.Sprintf("%d.%06d", 900000+rand.Intn(90000), rand.Intn(1000000))
}

// procsWith lists host pids whose command line contains arg.
func procsWith(arg string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if slices.Contains(strings.Split(string(cmdline), "\x00"), arg) {
			// A zombie has an empty cmdline, so anything listed is alive.
			pids = append(pids, pid)
		}
	}
	return pids
}

func killAll(pids []int) {
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

func TestIsolationReported(t *testing.T) {
	best := Isolation()
	if best == "" || best.Describe() == "unknown isolation mode" {
		t.Fatalf("Isolation() = %q", best)
	}
	t.Logf("best isolation: %s (%s)", best, best.Describe())
	m, err := NewManager(Options{Roots: []Root{{Path: t.TempDir()}}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Isolation() != best {
		t.Errorf("Manager.Isolation() = %s, want %s", m.Isolation(), best)
	}
	if os.Geteuid() == 0 && probe(ModePIDNamespace) == nil && best != ModePIDNamespace {
		t.Errorf("PID namespaces work but best is %s", best)
	}
}

func TestNewManagerErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	cases := []struct {
		opts Options
		want error
	}{
		{Options{}, ErrInvalidOptions},
		{Options{Roots: []Root{{Path: "rel"}}}, ErrInvalidOptions},
		{Options{Roots: []Root{{Path: filepath.Join(dir, "missing")}}}, ErrInvalidOptions},
		{Options{Roots: []Root{{Path: file}}}, ErrInvalidOptions},
		{Options{Roots: []Root{{Path: dir}}, Env: []string{"NOEQUALS"}}, ErrInvalidOptions},
		{Options{Roots: []Root{{Path: dir}}, OutputBytes: -1}, ErrInvalidOptions},
		{Options{Roots: []Root{{Path: dir}}, Isolation: "chroot"}, ErrInvalidOptions},
	}
	for _, c := range cases {
		if _, err := NewManager(c.opts); !errors.Is(err, c.want) {
			t.Errorf("NewManager(%+v) = %v, want %v", c.opts, err, c.want)
		}
	}
}

func TestExitCodesAndStreams(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode Mode) {
		m, _ := newManager(t, mode, Options{})
		res := run(t, m, Command{Script: "echo out; echo err >&2; exit 3"})
		if res.ExitCode != 3 || res.Signal != "" || res.TimedOut || res.Canceled {
			t.Errorf("result = %+v", res)
		}
		if string(res.Stdout.Data) != "out\n" || string(res.Stderr.Data) != "err\n" {
			t.Errorf("stdout %q stderr %q", res.Stdout.Data, res.Stderr.Data)
		}
		if res := run(t, m, Command{Script: "true"}); res.ExitCode != 0 {
			t.Errorf("true: %+v", res)
		}
		if res := run(t, m, Command{Argv: []string{"sh", "-c", "exit 42"}}); res.ExitCode != 42 {
			t.Errorf("argv exit: %+v", res)
		}
		if res := run(t, m, Command{Script: "cat", Stdin: []byte("from stdin")}); string(res.Stdout.Data) != "from stdin" {
			t.Errorf("stdin: %q", res.Stdout.Data)
		}
	})
}

func TestSignals(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode Mode) {
		m, _ := newManager(t, mode, Options{})
		if mode != ModePIDNamespace {
			// In the PID namespace mode the command is PID 1 and, like
			// any init, cannot be killed by a signal it sends itself.
			res := run(t, m, Command{Script: "kill -TERM $$; sleep 5"})
			if res.Signal != "SIGTERM" || res.ExitCode != -1 || res.Canceled || res.TimedOut {
				t.Errorf("self SIGTERM: %+v", res)
			}
		}
		id, err := m.Start(context.Background(), Command{Script: "sleep 30"})
		if err != nil {
			t.Fatal(err)
		}
		st, err := m.Kill(id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Running || st.Result.Signal != "SIGKILL" || st.Result.ExitCode != -1 || !st.Result.Canceled {
			t.Errorf("killed task: %+v", st)
		}
	})
}

// daemonScript leaves behind two processes that try to outlive the
// command: a setsid daemon and a double-forked one, both named by tok.
func daemonScript(tok, marker string) string {
	return fmt.Sprintf(`setsid sleep %[1]s >/dev/null 2>&1 < /dev/null &
( ( setsid sh -c 'while :; do echo x >> %[2]s; sleep 0.02; done' %[1]s >/dev/null 2>&1 < /dev/null & ) & )
( sh -c 'sleep %[1]s' >/dev/null 2>&1 & )
while [ ! -s %[2]s ]; do sleep 0.01; done
echo ready
`, tok, marker)
}

func assertMarkerStill(t *testing.T, marker string) {
	t.Helper()
	before, err := os.ReadFile(marker)
	if err != nil {
		t.Fatalf("marker: %v", err)
	}
	time.Sleep(150 * time.Millisecond)
	after, _ := os.ReadFile(marker)
	if len(after) != len(before) {
		t.Errorf("the double-forked daemon is still writing its marker (%d -> %d bytes)", len(before), len(after))
	}
}

func TestTimeoutKillsDaemons(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode Mode) {
		t.Parallel()
		m, root := newManager(t, mode, Options{})
		tok, marker := token(), filepath.Join(root, "marker")
		t.Cleanup(func() { killAll(procsWith(tok)) })
		start := time.Now()
		res := run(t, m, Command{Script: daemonScript(tok, marker) + "sleep 30", Timeout: 2 * time.Second})
		if elapsed := time.Since(start); elapsed > 10*time.Second {
			t.Errorf("Run took %v", elapsed)
		}
		if !res.TimedOut || res.Signal != "SIGKILL" || res.Canceled {
			t.Errorf("result = %+v", res)
		}
		if !strings.Contains(string(res.Stdout.Data), "ready") {
			t.Fatalf("daemons never started: stdout %q stderr %q", res.Stdout.Data, res.Stderr.Data)
		}
		left := procsWith(tok)
		if mode == ModeProcessGroup {
			// The documented weakness: setsid daemons escape.
			if len(left) == 0 {
				t.Errorf("process-group mode killed setsid daemons; update the documentation")
			}
			return
		}
		if len(left) != 0 {
			t.Errorf("processes survived the timeout: %v", left)
		}
		assertMarkerStill(t, marker)
	})
}

func TestExitKillsLeftovers(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode Mode) {
		if mode == ModeProcessGroup {
			t.Skip("process-group mode cannot reach setsid daemons (documented)")
		}
		m, root := newManager(t, mode, Options{})
		tok, marker := token(), filepath.Join(root, "marker")
		t.Cleanup(func() { killAll(procsWith(tok)) })
		res := run(t, m, Command{Script: daemonScript(tok, marker)})
		if res.ExitCode != 0 || res.TimedOut {
			t.Fatalf("result = %+v, stderr %q", res, res.Stderr.Data)
		}
		if left := procsWith(tok); len(left) != 0 {
			t.Errorf("processes survived the command's exit: %v", left)
		}
		assertMarkerStill(t, marker)
	})
}

func TestProcessGroupKillsOrdinaryChildren(t *testing.T) {
	m, _ := newManager(t, ModeProcessGroup, Options{})
	tok := token()
	id, err := m.Start(context.Background(), Command{Script: fmt.Sprintf("sleep %s & sleep %s & sleep 30", tok, tok)})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(procsWith(tok)) < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(procsWith(tok)); n != 2 {
		t.Fatalf("%d children started, want 2", n)
	}
	if st, err := m.Kill(id); err != nil || !st.Result.Canceled {
		t.Fatalf("Kill = %+v, %v", st, err)
	}
	if left := procsWith(tok); len(left) != 0 {
		killAll(left)
		t.Errorf("same-group children survived: %v", left)
	}
}

func TestContextCancel(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode Mode) {
		m, root := newManager(t, mode, Options{})
		ctx, cancel := context.WithCancel(context.Background())
		started := filepath.Join(root, "started")
		go func() {
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if _, err := os.Stat(started); err == nil {
					break
				}
			}
			cancel()
		}()
		start := time.Now()
		res, err := m.Run(ctx, Command{Script: "echo begun; touch started; sleep 30"})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error = %v, want context.Canceled", err)
		}
		if time.Since(start) > 10*time.Second {
			t.Errorf("cancel took %v", time.Since(start))
		}
		if !res.Canceled || res.TimedOut || res.Signal != "SIGKILL" || string(res.Stdout.Data) != "begun\n" {
			t.Errorf("result = %+v", res)
		}
		// An already canceled context does not start anything.
		if _, err := m.Run(ctx, Command{Script: "true"}); !errors.Is(err, context.Canceled) {
			t.Errorf("Run with a canceled ctx = %v", err)
		}
	})
}

func TestBackgroundTasks(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode Mode) {
		m, _ := newManager(t, mode, Options{MaxRunning: 2})
		ctx := context.Background()
		long, err := m.Start(ctx, Command{Script: "echo started; sleep 30"})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			st, err := m.Poll(long)
			if err != nil {
				t.Fatal(err)
			}
			if !st.Running {
				t.Fatalf("task ended early: %+v", st)
			}
			if string(st.Result.Stdout.Data) == "started\n" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no output: %+v", st)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := m.Remove(long); err == nil {
			t.Error("Remove of a running task succeeded")
		}

		short, err := m.Start(ctx, Command{Script: "echo done; exit 5"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Start(ctx, Command{Script: "sleep 30"}); !errors.Is(err, ErrTooManyTasks) && err != nil {
			t.Errorf("third task: %v", err)
		}
		st, err := m.Wait(ctx, short)
		if err != nil {
			t.Fatal(err)
		}
		if st.Running || st.Result.ExitCode != 5 || string(st.Result.Stdout.Data) != "done\n" {
			t.Errorf("short task: %+v", st)
		}

		st, err = m.Kill(long)
		if err != nil {
			t.Fatal(err)
		}
		if st.Running || !st.Result.Canceled || st.Result.Signal != "SIGKILL" || string(st.Result.Stdout.Data) != "started\n" {
			t.Errorf("killed task: %+v", st)
		}
		if again, _ := m.Poll(long); again.Running || !again.Result.Canceled {
			t.Errorf("poll after kill: %+v", again)
		}
		if _, err := m.Kill(long); err != nil {
			t.Errorf("second Kill: %v", err)
		}
		if err := m.Remove(long); err != nil {
			t.Errorf("Remove: %v", err)
		}
		if _, err := m.Poll(long); !errors.Is(err, ErrUnknownTask) {
			t.Errorf("Poll after Remove = %v", err)
		}
		if _, err := m.Poll("task-999"); !errors.Is(err, ErrUnknownTask) {
			t.Errorf("Poll(unknown) = %v", err)
		}
	})
}

func TestTooManyTasks(t *testing.T) {
	m, _ := newManager(t, Isolation(), Options{MaxRunning: 1})
	ctx := context.Background()
	if _, err := m.Start(ctx, Command{Script: "sleep 30"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(ctx, Command{Script: "sleep 30"}); !errors.Is(err, ErrTooManyTasks) {
		t.Errorf("second Start = %v, want ErrTooManyTasks", err)
	}
}

func TestFinishedTasksAreBounded(t *testing.T) {
	m, _ := newManager(t, Isolation(), Options{MaxFinished: 2})
	ctx := context.Background()
	var ids []string
	for i := 0; i < 4; i++ {
		id, err := m.Start(ctx, Command{Script: "true"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Wait(ctx, id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for i, id := range ids {
		_, err := m.Poll(id)
		if forgotten := i < 2; forgotten != errors.Is(err, ErrUnknownTask) {
			t.Errorf("Poll(%s) = %v (forgotten expected: %v)", id, err, forgotten)
		}
	}
}

func TestCloseKillsEverything(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode Mode) {
		m, _ := newManager(t, mode, Options{})
		tok := token()
		ctx := context.Background()
		id, err := m.Start(ctx, Command{Script: "sleep " + tok})
		if err != nil {
			t.Fatal(err)
		}
		runDone := make(chan Result)
		go func() {
			res, _ := m.Run(ctx, Command{Script: "sleep " + tok})
			runDone <- res
		}()
		deadline := time.Now().Add(10 * time.Second)
		for len(procsWith(tok)) < 2 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if res := <-runDone; !res.Canceled {
			t.Errorf("Run during Close: %+v", res)
		}
		if st, err := m.Poll(id); err != nil || st.Running || !st.Result.Canceled {
			t.Errorf("task after Close: %+v, %v", st, err)
		}
		if left := procsWith(tok); len(left) != 0 {
			killAll(left)
			t.Errorf("processes survived Close: %v", left)
		}
		if _, err := m.Start(ctx, Command{Script: "true"}); !errors.Is(err, ErrClosed) {
			t.Errorf("Start after Close = %v", err)
		}
		if _, err := m.Run(ctx, Command{Script: "true"}); !errors.Is(err, ErrClosed) {
			t.Errorf("Run after Close = %v", err)
		}
	})
}

func TestOutputCaps(t *testing.T) {
	m, _ := newManager(t, Isolation(), Options{OutputBytes: 100})
	res := run(t, m, Command{Script: `head -c 1000 /dev/zero | tr '\0' a; printf TAIL; printf short >&2`})
	out := res.Stdout
	if !out.Truncated || len(out.Data) != 100 || out.Total != 1004 || out.Omitted != 904 || out.OmittedAt != 50 {
		t.Errorf("stdout = truncated %v len %d total %d omitted %d at %d", out.Truncated, len(out.Data), out.Total, out.Omitted, out.OmittedAt)
	}
	if !bytes.HasPrefix(out.Data, bytes.Repeat([]byte("a"), 50)) || !bytes.HasSuffix(out.Data, []byte("aaTAIL")) {
		t.Errorf("stdout data = %q", out.Data)
	}
	if res.Stderr.Truncated || string(res.Stderr.Data) != "short" {
		t.Errorf("stderr = %+v", res.Stderr)
	}
	// A command producing far more than the cap still finishes promptly.
	res = run(t, m, Command{Script: `head -c 50000000 /dev/zero; echo end`})
	if res.ExitCode != 0 || res.Stdout.Total != 50000004 || !bytes.HasSuffix(res.Stdout.Data, []byte("end\n")) {
		t.Errorf("big output: exit %d total %d", res.ExitCode, res.Stdout.Total)
	}
}

func TestWorkingDirectory(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(root, "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(root, "file"), nil, 0o644)
	must(t, os.Symlink(outside, filepath.Join(root, "escape")))
	must(t, os.Symlink(filepath.Join(root, "sub"), filepath.Join(root, "inner")))
	must(t, os.Symlink(root, filepath.Join(base, "rootlink")))
	m, _ := newManager(t, Isolation(), Options{Roots: []Root{{Path: filepath.Join(base, "rootlink"), Writable: true}}})

	ok := []struct{ dir, want string }{
		{"", root},
		{root, root},
		{filepath.Join(root, "sub"), filepath.Join(root, "sub")},
		{filepath.Join(root, "inner"), filepath.Join(root, "sub")},
		{filepath.Join(root, "sub", ".."), root},
		{filepath.Join(base, "rootlink", "sub"), filepath.Join(root, "sub")},
	}
	for _, c := range ok {
		res := run(t, m, Command{Argv: []string{"pwd", "-P"}, Dir: c.dir})
		if got := strings.TrimSpace(string(res.Stdout.Data)); got != c.want {
			t.Errorf("Dir %q: pwd = %q, want %q", c.dir, got, c.want)
		}
	}
	bad := []struct {
		dir  string
		want error
	}{
		{outside, ErrCwdOutsideRoots},
		{"/", ErrCwdOutsideRoots},
		{base, ErrCwdOutsideRoots},
		{filepath.Join(root, "escape"), ErrCwdOutsideRoots},
		{filepath.Join(root, "sub", "..", ".."), ErrCwdOutsideRoots},
		{root + "-sibling", ErrInvalidCwd},
		{filepath.Join(root, "missing"), ErrInvalidCwd},
		{filepath.Join(root, "file"), ErrInvalidCwd},
		{"sub", ErrInvalidCwd},
	}
	for _, c := range bad {
		if _, err := m.Run(context.Background(), Command{Script: "true", Dir: c.dir}); !errors.Is(err, c.want) {
			t.Errorf("Dir %q: error = %v, want %v", c.dir, err, c.want)
		}
	}
}

func TestSiblingPrefixIsOutside(t *testing.T) {
	base := t.TempDir()
	root, sibling := filepath.Join(base, "ws"), filepath.Join(base, "ws-other")
	must(t, os.Mkdir(root, 0o755))
	must(t, os.Mkdir(sibling, 0o755))
	m, _ := newManager(t, Isolation(), Options{Roots: []Root{{Path: root}}})
	if _, err := m.Run(context.Background(), Command{Script: "true", Dir: sibling}); !errors.Is(err, ErrCwdOutsideRoots) {
		t.Errorf("sibling with a common prefix: %v", err)
	}
}

func TestEnvironmentIsExact(t *testing.T) {
	t.Setenv("EXECJAIL_TEST_SECRET", "hunter2")
	forEachMode(t, func(t *testing.T, mode Mode) {
		m, _ := newManager(t, mode, Options{Env: []string{testPath, "FOO=bar", "KEEP=1"}})
		res := run(t, m, Command{Argv: []string{"env"}, Env: []string{"FOO=baz", "EXTRA=x"}})
		got := strings.Split(strings.TrimSpace(string(res.Stdout.Data)), "\n")
		slices.Sort(got)
		want := []string{"EXTRA=x", "FOO=baz", "KEEP=1", testPath}
		if !slices.Equal(got, want) {
			t.Errorf("env = %q, want %q", got, want)
		}
		res = run(t, m, Command{Script: "env"})
		if strings.Contains(string(res.Stdout.Data), "hunter2") {
			t.Errorf("host environment leaked: %s", res.Stdout.Data)
		}
	})
	m, _ := newManager(t, Isolation(), Options{Env: []string{}})
	res := run(t, m, Command{Argv: []string{"/usr/bin/env"}})
	if len(res.Stdout.Data) != 0 {
		t.Errorf("empty environment is not empty: %q", res.Stdout.Data)
	}
}

func TestInvalidCommands(t *testing.T) {
	m, _ := newManager(t, Isolation(), Options{})
	cases := []Command{
		{},
		{Script: "true", Argv: []string{"true"}},
		{Argv: []string{""}},
		{Argv: []string{"definitely-not-a-command-xyz"}},
		{Script: "true", Timeout: -1},
		{Argv: []string{"true"}, Env: []string{"BAD"}},
		{Script: "a\x00b"},
	}
	for _, c := range cases {
		if _, err := m.Run(context.Background(), c); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("Run(%+v) = %v, want ErrInvalidCommand", c, err)
		}
	}
}

func TestPIDNamespaceHasOwnProc(t *testing.T) {
	m, _ := newManager(t, ModePIDNamespace, Options{})
	res := run(t, m, Command{Script: "echo $$; ls /proc | grep -c '^[0-9]'"})
	fields := strings.Fields(string(res.Stdout.Data))
	if len(fields) != 2 || fields[0] != "1" {
		t.Fatalf("output %q, stderr %q", res.Stdout.Data, res.Stderr.Data)
	}
	var n int
	fmt.Sscan(fields[1], &n)
	if n > 5 {
		t.Errorf("the namespace sees %d processes in /proc", n)
	}
}

func TestCgroupKillWithoutKillFile(t *testing.T) {
	if err := probe(ModeCgroup); err != nil {
		prereq.Missing(t, "cgroup v2 unavailable: %v", err)
	}
	tok := token()
	sh, _ := exec.LookPath("sh")
	cmd := exec.Command(sh, "-c", fmt.Sprintf("setsid sleep %s & sleep %s", tok, tok))
	cmd.Env = []string{testPath}
	tr := &cgroupTree{parent: systemProbes().cgroupParent}
	must(t, tr.prepare(cmd))
	defer tr.cleanup()
	must(t, cmd.Start())
	tr.started(cmd.Process.Pid)
	deadline := time.Now().Add(5 * time.Second)
	for len(procsWith(tok)) < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	killCgroupMembers(tr.dir)
	cmd.Wait()
	time.Sleep(20 * time.Millisecond)
	if left := procsWith(tok); len(left) != 0 {
		killAll(left)
		t.Errorf("survivors: %v", left)
	}
}

func TestConcurrentRuns(t *testing.T) {
	m, _ := newManager(t, Isolation(), Options{})
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func(i int) {
			res, err := m.Run(context.Background(), Command{Script: fmt.Sprintf("echo %d", i)})
			if err == nil && strings.TrimSpace(string(res.Stdout.Data)) != fmt.Sprint(i) {
				err = fmt.Errorf("run %d printed %q", i, res.Stdout.Data)
			}
			errs <- err
		}(i)
	}
	for i := 0; i < 8; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
