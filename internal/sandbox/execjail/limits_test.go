//go:build linux

package execjail

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// requireLimit skips (fails under CI=true) when the system cannot
// enforce the process or memory limit.
func requireLimit(t *testing.T, b Bound) {
	t.Helper()
	if b.By == "" {
		mustBeCI(t, "limit not enforced here: %s", b.Unenforced)
	}
}

// limitModes runs f in every kill mode and in the sandbox.
func limitModes(t *testing.T, opts Options, f func(t *testing.T, m *Manager)) {
	forEachMode(t, func(t *testing.T, mode Mode) {
		m, _ := newManager(t, mode, opts)
		f(t, m)
	})
	t.Run("sandbox", func(t *testing.T) {
		m, _ := sandboxManager(t, opts)
		f(t, m)
	})
}

// TestProcessLimit: a fork bomb of 1,500 sleeps holds at most the
// Manager's process limit, in every mode; another Manager (another plugin
// or session) is not starved by it.
func TestProcessLimit(t *testing.T) {
	requireLimit(t, Enforced().Processes)
	const limit = 64
	limitModes(t, Options{Limits: Limits{Processes: limit}}, func(t *testing.T, m *Manager) {
		if e := m.Enforced(); e.Processes.Limit != limit || e.Processes.By == "" {
			t.Fatalf("Enforced().Processes = %+v", e.Processes)
		}
		tok := token()
		id, err := m.Start(context.Background(), Command{Script: "for i in $(seq 1500); do sleep " + tok + " & done 2>/dev/null; wait"})
		if err != nil {
			t.Fatal(err)
		}
		// Watch until the bomb has been at its limit for a while (on a
		// loaded machine forking is slow: give it up to 20 s to get there).
		peak, start, atLimit := 0, time.Now(), time.Time{}
		for time.Since(start) < 20*time.Second {
			peak = max(peak, len(procsWith(tok)))
			if atLimit.IsZero() && peak >= limit-8 {
				atLimit = time.Now()
			}
			if !atLimit.IsZero() && time.Since(atLimit) > 500*time.Millisecond {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		// Another Manager still runs commands while the bomb holds its
		// limit.
		other, _ := newManager(t, m.Isolation(), Options{Sandbox: m.opts.Sandbox})
		if res := run(t, other, Command{Script: "sleep 0 & wait; echo OTHER-OK"}); !strings.Contains(string(res.Stdout.Data), "OTHER-OK") {
			t.Errorf("another Manager could not fork during the bomb: %+v", res)
		}
		if _, err := m.Kill(id); err != nil {
			t.Fatal(err)
		}
		if peak > limit {
			t.Errorf("the fork bomb held %d processes, limit %d", peak, limit)
		}
		if peak < limit/2 {
			t.Errorf("the fork bomb held only %d processes: the attack did not run", peak)
		}
		if left := procsWith(tok); len(left) != 0 {
			killAll(left)
			t.Errorf("%d bomb processes survived Kill", len(left))
		}
	})
}

// TestMemoryLimit: allocating 2 GiB under a 64 MiB limit gets the
// command OOM-killed and reported as such; the Manager keeps working.
func TestMemoryLimit(t *testing.T) {
	requireLimit(t, Enforced().Memory)
	limitModes(t, Options{Limits: Limits{Memory: 64 << 20}}, func(t *testing.T, m *Manager) {
		if e := m.Enforced(); e.Memory.Limit != 64<<20 || e.Memory.By == "" {
			t.Fatalf("Enforced().Memory = %+v", e.Memory)
		}
		alloc := func(mib int) []string {
			return []string{"perl", "-e", `my $x = "a" x ($ARGV[0] * 1024 * 1024); print "ALLOCATED\n"`, strconv.Itoa(mib)}
		}
		res := run(t, m, Command{Argv: alloc(2048)})
		if strings.Contains(string(res.Stdout.Data), "ALLOCATED") || res.ExitCode == 0 {
			t.Errorf("2 GiB allocated under a 64 MiB limit: %+v", res)
		}
		if !res.OutOfMemory {
			t.Errorf("OutOfMemory not reported: %+v", res)
		}
		// Control, and the Manager still works: a small allocation passes.
		res = run(t, m, Command{Argv: alloc(8)})
		if !strings.Contains(string(res.Stdout.Data), "ALLOCATED") || res.OutOfMemory {
			t.Errorf("8 MiB under a 64 MiB limit: %+v", res)
		}
	})
}

// TestFileSizeLimit: a command cannot create a 1 TiB sparse file or write
// past the per-file limit: it gets EFBIG (File too large) and lives on.
func TestFileSizeLimit(t *testing.T) {
	limitModes(t, Options{Limits: Limits{FileBytes: 1 << 20}}, func(t *testing.T, m *Manager) {
		dir := m.roots[0].Path
		res := run(t, m, Command{Script: "ulimit -f unlimited 2>/dev/null && echo RAISED; truncate -s 1T sparse; echo rc=$?; head -c 2097152 /dev/zero > big; echo rc=$?; truncate -s 1M ok && echo CONTROL-OK"})
		out, errOut := string(res.Stdout.Data), string(res.Stderr.Data)
		if strings.Contains(out, "RAISED") {
			t.Errorf("the command raised its file size limit: %q", out)
		}
		if !strings.Contains(out, "CONTROL-OK") {
			t.Fatalf("control failed: %+v", res)
		}
		if strings.Contains(out, "rc=0") || !strings.Contains(errOut, "File too large") {
			t.Errorf("writes past the limit did not fail with EFBIG: stdout %q stderr %q", out, errOut)
		}
		for name, most := range map[string]int64{"sparse": 1 << 20, "big": 1 << 20} {
			if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Size() > most {
				t.Errorf("%s is %d bytes, limit %d", name, fi.Size(), most)
			}
		}
	})
	t.Run("default", func(t *testing.T) {
		m, dir := newManager(t, Isolation(), Options{})
		if e := m.Enforced(); e.FileBytes.Limit != DefaultFileBytes || e.FileBytes.By != "RLIMIT_FSIZE" {
			t.Errorf("Enforced().FileBytes = %+v", e.FileBytes)
		}
		run(t, m, Command{Script: "truncate -s 1T sparse"})
		if fi, err := os.Stat(filepath.Join(dir, "sparse")); err == nil && fi.Size() > DefaultFileBytes {
			t.Errorf("a %d-byte sparse file under the default limit", fi.Size())
		}
	})
}

func TestLimitsValidated(t *testing.T) {
	for _, l := range []Limits{{Processes: -1}, {Memory: -1}, {FileBytes: -1}} {
		if _, err := NewManager(Options{Roots: []Root{{Path: t.TempDir()}}, Limits: l}); err == nil {
			t.Errorf("NewManager accepted %+v", l)
		}
	}
	m, _ := newManager(t, Isolation(), Options{})
	e := m.Enforced()
	if e.Processes.Limit != DefaultMaxProcesses || e.Memory.Limit != DefaultMemory || e.FileBytes.Limit != DefaultFileBytes {
		t.Errorf("defaults not applied: %+v", e)
	}
	if e.Capabilities == "" || e.AgentProc == "" || e.Scope == "" || e.Mode != m.Isolation() {
		t.Errorf("incomplete report: %+v", e)
	}
}

// TestLimitGroupsRemoved: Close removes the Manager's cgroups.
func TestLimitGroupsRemoved(t *testing.T) {
	m, _ := newManager(t, Isolation(), Options{})
	run(t, m, Command{Script: "true"})
	m.mu.Lock()
	g := m.limits
	m.mu.Unlock()
	dirs := append([]string(nil), g.v1...)
	if g.v2 != "" {
		dirs = append(dirs, g.v2)
	}
	if len(dirs) == 0 {
		requireLimit(t, Enforced().Processes)
		t.Fatal("no limit group was created")
	}
	m.Close()
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("cgroup %s left behind", d)
		}
	}
}

// TestSandboxTmpCountsAsMemory: the sandbox's private /tmp is a tmpfs
// whose pages are charged to the commands' memory limit, so a command
// cannot fill the host's memory through it.
func TestSandboxTmpCountsAsMemory(t *testing.T) {
	requireLimit(t, Enforced().Memory)
	m, _ := sandboxManager(t, Options{Limits: Limits{Memory: 64 << 20}})
	res := run(t, m, Command{Script: "head -c 209715200 /dev/zero > /tmp/fill; echo rc=$?; stat -c %s /tmp/fill"})
	out := string(res.Stdout.Data)
	if strings.Contains(out, "rc=0") || strings.Contains(out, "209715200") {
		t.Errorf("wrote 200 MiB to the sandbox's /tmp under a 64 MiB limit: %+v", res)
	}
	// The kernel either OOM-kills the writer or refuses the page.
	if !res.OutOfMemory && !strings.Contains(string(res.Stderr.Data), "No space left") && !strings.Contains(string(res.Stderr.Data), "Cannot allocate memory") {
		t.Errorf("neither OOM nor a refused write: %+v", res)
	}
}

// TestCloseKillsEscapedDaemons: in the process-group mode a setsid daemon
// escapes a command's kill, but not its Manager's cgroups: Close kills it.
func TestCloseKillsEscapedDaemons(t *testing.T) {
	requireLimit(t, Enforced().Processes)
	m, _ := newManager(t, ModeProcessGroup, Options{})
	tok := token()
	// The command returns once the daemon has its own session, so the
	// command's process-group kill cannot reach it.
	res := run(t, m, Command{Script: "setsid sh -c 'echo $$ > daemon.pid; exec sleep " + tok + "' </dev/null >/dev/null 2>&1 & " +
		"while [ ! -s daemon.pid ]; do sleep 0.01; done; echo started"})
	if string(res.Stdout.Data) != "started\n" {
		t.Fatalf("%+v", res)
	}
	for deadline := time.Now().Add(10 * time.Second); len(procsWith(tok)) == 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if len(procsWith(tok)) != 1 {
		t.Fatalf("control: the daemon is not running on its own (%d processes)", len(procsWith(tok)))
	}
	m.Close()
	if left := procsWith(tok); len(left) != 0 {
		killAll(left)
		t.Errorf("the escaped daemon survived Close: %v", left)
	}
}

// TestStaleGroupsRemoved: groups left by an agent that died (a pid that
// no longer runs) are removed, with what still ran in them, while another
// live agent's groups are left alone.
func TestStaleGroupsRemoved(t *testing.T) {
	requireLimit(t, Enforced().Processes)
	parent := limitProbes().pids.v1
	if parent == "" {
		parent = limitProbes().v2Parent
	}
	// A pid that is not running: a child that has been reaped.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(parent, fmt.Sprintf("execjail-%d-m1", cmd.Process.Pid))
	live := filepath.Join(parent, "execjail-1-m1") // pid 1 always runs
	for _, d := range []string{dead, live} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.Remove(dead); os.Remove(live) })
	removeStale(parent)
	if _, err := os.Stat(dead); err == nil {
		t.Errorf("stale group %s left", dead)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a live agent's group %s was removed: %v", live, err)
	}
}

// TestSandboxCannotLeaveItsCgroup: the cgroup filesystems are not in the
// sandbox, so a sandboxed root command cannot move itself out of its
// limits.
func TestSandboxCannotLeaveItsCgroup(t *testing.T) {
	requireLimit(t, Enforced().Processes)
	m, _ := sandboxManager(t, Options{})
	var files []string
	for _, c := range []*controller{&limitProbes().pids, &limitProbes().memory} {
		if c.v1 != "" {
			files = append(files, filepath.Join(filepath.Dir(c.v1), "cgroup.procs"), filepath.Join(c.v1, "cgroup.procs"))
		}
	}
	if p := limitProbes().v2Parent; p != "" {
		files = append(files, filepath.Join(p, "cgroup.procs"))
	}
	for _, f := range files {
		res := run(t, m, Command{Script: "echo $$ > " + f + " && echo MOVED"})
		if strings.Contains(string(res.Stdout.Data), "MOVED") {
			t.Errorf("the sandboxed command moved itself to %s", f)
		}
	}
}

// TestLimitGroupV2Layout checks, on a directory standing in for a cgroup
// v2 hierarchy, what a Manager's group is made of when v2 carries pids
// and memory (this machine may only have v1 for them): the limits, no
// swap, OOM counting from memory.events, and the commands' kill groups
// below it.
func TestLimitGroupV2Layout(t *testing.T) {
	parent := t.TempDir()
	p := &limitProbe{v2Parent: parent, pids: controller{name: "pids", v2: true}, memory: controller{name: "memory", v2: true}}
	g, err := newLimitGroupIn(p, Limits{Processes: 64, Memory: 64 << 20, FileBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(g.v2) != parent || len(g.v1) != 0 || len(g.procsFiles()) != 0 {
		t.Fatalf("group %+v", g)
	}
	for file, want := range map[string]string{"pids.max": "64", "memory.max": "67108864", "memory.swap.max": "0"} {
		if b, err := os.ReadFile(filepath.Join(g.v2, file)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", file, b, err, want)
		}
	}
	must(t, os.WriteFile(filepath.Join(g.v2, "memory.events"), []byte("low 0\nhigh 0\nmax 9\noom 2\noom_kill 2\n"), 0o644))
	if n := g.oomKills(); n != 2 {
		t.Errorf("oomKills = %d, want 2", n)
	}
	tr, err := newTree(ModePIDNamespace, g)
	if err != nil || tr.(*pidnsTree).joinV2 != g.v2 {
		t.Errorf("pid-namespace commands do not start in the group: %+v, %v", tr, err)
	}
	if tr, _ := newTree(ModeProcessGroup, g); tr.(*pgroupTree).joinV2 != g.v2 {
		t.Errorf("process-group commands do not start in the group")
	}
	if probe(ModeCgroup) == nil {
		if tr, _ := newTree(ModeCgroup, g); tr.(*cgroupTree).parent != g.v2 {
			t.Errorf("cgroup-mode kill groups are not below the limit group")
		}
	}
}

// TestLimitGroupV1Layout: the same with v1 pids and memory hierarchies.
func TestLimitGroupV1Layout(t *testing.T) {
	pids, mem := t.TempDir(), t.TempDir()
	p := &limitProbe{pids: controller{name: "pids", v1: pids}, memory: controller{name: "memory", v1: mem}}
	g, err := newLimitGroupIn(p, Limits{Processes: 64, Memory: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	files := g.procsFiles()
	if g.v2 != "" || len(files) != 2 || filepath.Dir(filepath.Dir(files[0])) != pids || filepath.Dir(filepath.Dir(files[1])) != mem {
		t.Fatalf("group %+v, joins %v", g, files)
	}
	for file, want := range map[string]string{
		filepath.Join(g.v1[0], "pids.max"):                    "64",
		filepath.Join(g.v1[1], "memory.limit_in_bytes"):       "67108864",
		filepath.Join(g.v1[1], "memory.memsw.limit_in_bytes"): "67108864",
	} {
		if b, err := os.ReadFile(file); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", file, b, err, want)
		}
	}
	must(t, os.WriteFile(g.oomV1, []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 5\n"), 0o644))
	if n := g.oomKills(); n != 5 {
		t.Errorf("oomKills = %d, want 5", n)
	}
}

// TestPickV2Parent: the limit groups go in the agent's own v2 group when
// it can delegate the controllers, else in its parent (an agent running
// in a leaf of a delegated group), never above the hierarchy.
func TestPickV2Parent(t *testing.T) {
	mk := func(dir, controllers, subtree string) {
		must(t, os.MkdirAll(dir, 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte(controllers), 0o644))
		must(t, os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(subtree), 0o644))
	}
	root := t.TempDir()
	delegated := filepath.Join(root, "service")
	leaf := filepath.Join(delegated, "agent")
	mk(delegated, "cpu pids memory", "pids memory")
	mk(leaf, "", "") // the leaf holding the agent gets no controllers
	got, errs := pickV2Parent(leaf, "pids", "memory")
	if got != delegated || len(errs) != 0 {
		t.Errorf("pickV2Parent(leaf) = %s, %v; want the delegated parent", got, errs)
	}
	mk(leaf, "pids memory", "")
	if got, errs := pickV2Parent(leaf, "pids", "memory"); got != leaf || len(errs) != 0 {
		t.Errorf("pickV2Parent with controllers at the leaf = %s, %v", got, errs)
	}
	// Nothing available anywhere: the reason names the controller.
	lone := filepath.Join(t.TempDir(), "lone")
	mk(lone, "hugetlb", "")
	if _, errs := pickV2Parent(lone, "pids", "memory"); errs["pids"] == nil || !strings.Contains(errs["pids"].Error(), "controller pids not available") {
		t.Errorf("errors %v", errs)
	}
}

// TestHelperFailureIsAnError: when the launch helper cannot confine the
// command (here: its cgroup is gone), the command does not run and Run
// says why.
func TestHelperFailureIsAnError(t *testing.T) {
	m, dir := newManager(t, Isolation(), Options{})
	m.mu.Lock()
	m.limits = &limitGroup{v1: []string{filepath.Join(dir, "no-such-cgroup")}}
	m.mu.Unlock()
	_, err := m.Run(context.Background(), Command{Script: "touch ran"})
	if !errors.Is(err, ErrStart) || !strings.Contains(err.Error(), "join cgroup") {
		t.Errorf("Run = %v, want ErrStart naming the cgroup join", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("the command ran unconfined")
	}
}
