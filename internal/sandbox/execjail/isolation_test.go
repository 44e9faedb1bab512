//go:build linux

package execjail

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// mustBeCI fails under CI=true and skips elsewhere.
func mustBeCI(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("required when CI=true: "+format, args...)
	}
	t.Skipf(format, args...)
}

// capLines picks the capability lines out of /proc/self/status.
func capLines(status string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(status, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (strings.HasPrefix(k, "Cap") || k == "NoNewPrivs") {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

func TestCommandsHaveNoCapabilities(t *testing.T) {
	check := func(t *testing.T, m *Manager) {
		res := run(t, m, Command{Argv: []string{"cat", "/proc/self/status"}})
		caps := capLines(string(res.Stdout.Data))
		if len(caps) < 5 {
			t.Fatalf("no capability lines in %q (stderr %q)", res.Stdout.Data, res.Stderr.Data)
		}
		for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
			if os.Geteuid() != 0 && k == "CapBnd" {
				continue // only an agent with CAP_SETPCAP can clear it
			}
			if caps[k] != "0000000000000000" {
				t.Errorf("%s = %s, want 0", k, caps[k])
			}
		}
		if caps["NoNewPrivs"] != "1" {
			t.Errorf("NoNewPrivs = %q, want 1", caps["NoNewPrivs"])
		}
	}
	forEachMode(t, func(t *testing.T, mode Mode) {
		m, _ := newManager(t, mode, Options{})
		check(t, m)
	})
	t.Run("sandbox", func(t *testing.T) {
		m, _ := sandboxManager(t, Options{})
		check(t, m)
	})
}

// TestCommandsCannotReadTheAgent: a command, even as root, even after
// unmounting its private /proc, cannot read the agent's environment or
// memory through /proc.
func TestCommandsCannotReadTheAgent(t *testing.T) {
	pid := os.Getpid()
	// The umount attack is only tried where the command has a mount
	// namespace of its own: in the other modes a command that could
	// unmount /proc would unmount the agent's (and the machine's).
	const umount = `umount /proc 2>/dev/null && echo UNMOUNTED
`
	script := fmt.Sprintf(`test -r /proc/self/status && echo CONTROL-OK
if cat /proc/%[1]d/environ >/dev/null 2>&1; then echo READ-ENVIRON; fi
if (exec 3</proc/%[1]d/mem) 2>/dev/null; then echo OPENED-MEM; fi
if head -c 1 /proc/%[1]d/cmdline >/dev/null 2>&1; then echo SEES-AGENT; fi
if kill -0 %[1]d 2>/dev/null; then echo SIGNALLED-AGENT; fi`, pid)
	check := func(t *testing.T, m *Manager, wantVisible bool, script string) {
		res := run(t, m, Command{Script: script})
		out := string(res.Stdout.Data)
		if !strings.Contains(out, "CONTROL-OK") {
			t.Fatalf("control failed: stdout %q stderr %q", out, res.Stderr.Data)
		}
		if strings.Contains(out, "READ-ENVIRON") {
			t.Errorf("the command read the agent's /proc/%d/environ", pid)
		}
		if strings.Contains(out, "UNMOUNTED") {
			t.Errorf("the command unmounted its /proc")
		}
		if strings.Contains(out, "OPENED-MEM") {
			t.Errorf("the command opened the agent's /proc/%d/mem", pid)
		}
		if strings.Contains(out, "SIGNALLED-AGENT") && commandScope() != 0 {
			t.Errorf("the command could signal the agent (pid %d)", pid)
		}
		// The attack is real in the shared-PID modes: the agent is there.
		if wantVisible && !strings.Contains(out, "SEES-AGENT") {
			t.Errorf("the agent (pid %d) is not visible, so the test proves nothing: %q", pid, out)
		}
	}
	forEachMode(t, func(t *testing.T, mode Mode) {
		m, _ := newManager(t, mode, Options{})
		if mode == ModePIDNamespace {
			check(t, m, false, umount+script)
		} else {
			check(t, m, true, script)
		}
	})
	t.Run("sandbox", func(t *testing.T) {
		m, _ := sandboxManager(t, Options{})
		check(t, m, false, umount+script)
	})
}

// perlConnect is a command that connects to the Unix socket named by its
// argument (a leading @ names an abstract socket) and prints CONNECTED.
func perlConnect(path string) []string {
	return []string{"perl", "-MSocket", "-e",
		`my $p = $ARGV[0]; $p =~ s/^@/\0/; socket(S, PF_UNIX, SOCK_STREAM, 0) or die "socket: $!\n"; connect(S, pack_sockaddr_un($p)) or die "connect: $!\n"; print "CONNECTED\n"`,
		path}
}

// listenUnix listens on addr and counts accepted connections.
func listenUnix(t *testing.T, addr string) *atomic.Int32 {
	t.Helper()
	l, err := net.Listen("unix", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	t.Cleanup(func() { l.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return &n
}

// hostSocketDir makes a directory for a socket under base, or skips.
func hostSocketDir(t *testing.T, base string) string {
	t.Helper()
	dir, err := os.MkdirTemp(base, "execjail-sock-")
	if err != nil {
		mustBeCI(t, "cannot create a socket directory under %s: %v", base, err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestSandboxCannotReachHostSockets: a sandboxed command, network or not,
// cannot connect to a socket the host listens on outside its roots; it
// can connect to one inside a granted root.
func TestSandboxCannotReachHostSockets(t *testing.T) {
	requireBwrap(t)
	for _, base := range []string{"/run", "/var/tmp"} {
		dir := hostSocketDir(t, base)
		sock := filepath.Join(dir, "s")
		accepted := listenUnix(t, sock)
		// Control: without the sandbox the same client connects.
		plain, _ := newManager(t, Isolation(), Options{})
		if res := run(t, plain, Command{Argv: perlConnect(sock)}); !strings.Contains(string(res.Stdout.Data), "CONNECTED") {
			t.Fatalf("control: unsandboxed client did not connect to %s: %+v", sock, res)
		}
		for _, network := range []bool{false, true} {
			m, _ := sandboxManager(t, Options{Network: network})
			before := accepted.Load()
			res := run(t, m, Command{Argv: perlConnect(sock)})
			if strings.Contains(string(res.Stdout.Data), "CONNECTED") || res.ExitCode == 0 {
				t.Errorf("network=%v: sandboxed command connected to host socket %s: %+v", network, sock, res)
			}
			time.Sleep(50 * time.Millisecond)
			if accepted.Load() != before {
				t.Errorf("network=%v: host socket %s accepted a connection from the sandbox", network, sock)
			}
		}
	}
	// A socket inside a granted root is reachable, as SECURITY.md says.
	m, root := sandboxManager(t, Options{})
	inside := filepath.Join(root, "in.sock")
	listenUnix(t, inside)
	if res := run(t, m, Command{Argv: perlConnect(inside)}); !strings.Contains(string(res.Stdout.Data), "CONNECTED") {
		t.Errorf("socket inside a granted root not reachable: %+v", res)
	}
}

// TestAbstractSocketsAreScoped: with the host network (no sandbox, or
// sandbox with network), a command cannot connect to an abstract Unix
// socket the host listens on, where Landlock has scopes.
func TestAbstractSocketsAreScoped(t *testing.T) {
	if v := landlockVersion(); v < landlockScopeABI {
		mustBeCI(t, "Landlock ABI %d < %d: abstract sockets are not scoped on this kernel", v, landlockScopeABI)
	}
	name := "@execjail-test-" + token()
	accepted := listenUnix(t, name)
	if c, err := net.Dial("unix", name); err != nil {
		t.Fatalf("control: the host cannot connect to its own abstract socket: %v", err)
	} else {
		c.Close()
	}
	time.Sleep(50 * time.Millisecond)
	base := accepted.Load()
	check := func(t *testing.T, m *Manager) {
		res := run(t, m, Command{Argv: perlConnect(name)})
		if strings.Contains(string(res.Stdout.Data), "CONNECTED") {
			t.Errorf("command connected to the host's abstract socket: %+v", res)
		}
		if !strings.Contains(string(res.Stderr.Data), "connect:") {
			t.Errorf("the client did not run to connect(): %+v", res)
		}
	}
	forEachMode(t, func(t *testing.T, mode Mode) {
		m, _ := newManager(t, mode, Options{})
		check(t, m)
	})
	t.Run("sandbox-network", func(t *testing.T) {
		m, _ := sandboxManager(t, Options{Network: true})
		check(t, m)
	})
	time.Sleep(50 * time.Millisecond)
	if got := accepted.Load(); got != base {
		t.Errorf("the abstract socket accepted %d connections from commands", got-base)
	}
}

// TestSandboxNestedReadOnly: a read-only root inside a writable one stays
// read-only in the sandbox, wherever the workspace lives.
func TestSandboxNestedReadOnly(t *testing.T) {
	requireBwrap(t)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	outsideTmp, err := os.MkdirTemp(wd, ".nested-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outsideTmp) })
	for _, ws := range []string{t.TempDir(), outsideTmp} {
		protected := filepath.Join(ws, "protected")
		if err := os.Mkdir(protected, 0o755); err != nil {
			t.Fatal(err)
		}
		config := filepath.Join(protected, "config")
		if err := os.WriteFile(config, []byte("original\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		// The narrower grant listed first: order must not matter.
		m, _ := sandboxManager(t, Options{Roots: []Root{{Path: protected}, {Path: ws, Writable: true}}})
		res := run(t, m, Command{Script: "echo ok > ok.txt && echo CONTROL-OK; echo pwned > protected/config; echo pwned > protected/new; rm -f protected/config", Dir: ws})
		if !strings.Contains(string(res.Stdout.Data), "CONTROL-OK") {
			t.Fatalf("%s: control write failed: %+v", ws, res)
		}
		if b, err := os.ReadFile(config); err != nil || string(b) != "original\n" {
			t.Errorf("%s: protected/config = %q, %v; want it untouched", ws, b, err)
		}
		if _, err := os.Stat(filepath.Join(protected, "new")); err == nil {
			t.Errorf("%s: the sandbox created a file in the read-only protected/", ws)
		}
	}
}

// TestExecIsolationAvailable is what .ci/run checks first: the exec
// isolation the other tests rely on. Under CI=true it fails when commands
// would not get a PID namespace, cgroup process and memory limits, or the
// Landlock scopes; elsewhere it reports what is missing and skips.
func TestExecIsolationAvailable(t *testing.T) {
	e := Enforced()
	var missing []string
	if e.Mode != ModePIDNamespace {
		missing = append(missing, fmt.Sprintf("kill mode is %s, not %s: %v", e.Mode, ModePIDNamespace, probe(ModePIDNamespace)))
	}
	if err := probe(ModeCgroup); err != nil {
		missing = append(missing, fmt.Sprintf("cgroup kill mode: %v", err))
	}
	if e.Processes.By == "" {
		missing = append(missing, "process limit: "+e.Processes.Unenforced)
	}
	if e.Memory.By == "" {
		missing = append(missing, "memory limit: "+e.Memory.Unenforced)
	}
	if landlockVersion() < landlockScopeABI {
		missing = append(missing, e.Scope)
	}
	if len(missing) > 0 {
		mustBeCI(t, "exec isolation incomplete:\n%s", strings.Join(missing, "\n"))
	}
	t.Logf("exec isolation: %+v", e)
}

// TestKernelFilesReadOnly: in the PID namespace mode and the sandbox, a
// root command cannot write sysctls, the sysrq trigger or cgroup files,
// all of which uid 0 may write without a capability. Every write here
// would change nothing if it got through (the same value back; an open
// without a write).
func TestKernelFilesReadOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only uid 0 may write these files at all")
	}
	script := `v=$(cat /proc/sys/kernel/core_pattern) && echo CONTROL-OK
if printf '%s\n' "$v" > /proc/sys/kernel/core_pattern; then echo WROTE-SYSCTL; fi
if (exec 3>>/proc/sysrq-trigger); then echo OPENED-SYSRQ; fi
for f in /sys/fs/cgroup/pids/cgroup.procs /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/unified/cgroup.procs; do
  if [ -e "$f" ] && (exec 3>>"$f"); then echo "OPENED-CGROUP $f"; fi
done`
	check := func(t *testing.T, m *Manager) {
		res := run(t, m, Command{Script: script})
		out := string(res.Stdout.Data)
		if !strings.Contains(out, "CONTROL-OK") {
			t.Fatalf("control: %+v", res)
		}
		for _, bad := range []string{"WROTE-SYSCTL", "OPENED-SYSRQ", "OPENED-CGROUP"} {
			if strings.Contains(out, bad) {
				t.Errorf("%s: %q", bad, out)
			}
		}
	}
	t.Run(string(ModePIDNamespace), func(t *testing.T) {
		m, _ := newManager(t, ModePIDNamespace, Options{})
		check(t, m)
	})
	t.Run("sandbox", func(t *testing.T) {
		m, _ := sandboxManager(t, Options{})
		check(t, m)
	})
}
