package sandbox

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/execjail"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// Grants of the resource attacks: a small process and memory limit and a
// 1 MiB file limit, sandboxed or not.
func limitGrant(sandbox bool) string {
	return fmt.Sprintf("exec: {allowed: true, timeout: 4s, max_timeout: 5s, output_bytes: 4096, sandbox: %v, max_processes: 64, memory: 64MiB, file_bytes: 1MiB}", sandbox)
}

// requireEnforced skips an attack whose limit this system cannot
// enforce, except under CI=true, where that is a failure.
func requireEnforced(e *env, b execjail.Bound) {
	e.t.Helper()
	if b.By != "" {
		return
	}
	if os.Getenv("CI") == "true" {
		e.t.Fatalf("CI=true requires this limit to be enforced: %s", b.Unenforced)
	}
	e.t.Skipf("limit not enforced here: %s", b.Unenforced)
}

// procsWithArg counts host processes with arg in their command line.
func procsWithArg(arg string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, ent := range entries {
		var pid int
		if _, err := fmt.Sscanf(ent.Name(), "%d", &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err == nil && slices.Contains(strings.Split(string(cmdline), "\x00"), arg) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// sleepToken is a unique sleep duration that marks an attack's processes.
func sleepToken(e *env) string {
	n, err := strconv.ParseUint(randomToken(e.t)[:5], 16, 32)
	must(e.t, err)
	return fmt.Sprintf("%d.5", 800000+n%100000)
}

func forkBomb(sandbox bool) func(e *env) string {
	return func(e *env) string {
		requireEnforced(e, execjail.Enforced().Processes)
		e.attacker(nil, limitGrant(sandbox))
		tok := sleepToken(e)
		var st hostfns.ExecStatus
		e.execOK(e.main, "exec-start", attackArgs{Exec: &hostfns.ExecRequest{
			Command: "for i in $(seq 1500); do sleep " + tok + " & done 2>/dev/null; wait"}}, &st)
		// Until the bomb has been at its limit for a while (forking is
		// slow on a loaded machine: up to 20 s to get there).
		peak, start, atLimit := 0, time.Now(), time.Time{}
		for time.Since(start) < 20*time.Second {
			peak = max(peak, len(procsWithArg(tok)))
			if atLimit.IsZero() && peak >= 56 {
				atLimit = time.Now()
			}
			if !atLimit.IsZero() && time.Since(atLimit) > 500*time.Millisecond {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		var killed hostfns.ExecStatus
		e.execOK(e.main, "exec-kill", attackArgs{ID: st.ID}, &killed)
		if left := procsWithArg(tok); len(left) > 0 {
			e.t.Errorf("%d bomb processes survived exec_kill", len(left))
		}
		if peak > 64 || peak < 32 {
			e.t.Errorf("the fork bomb held %d processes at its peak; want at most the grant's 64 (and at least 32, or the attack did not run)", peak)
		}
		return fmt.Sprintf("held to %d processes (grants.exec.max_processes 64; %s)", peak, execjail.Enforced().Processes.By)
	}
}

func memoryBomb(sandbox bool) func(e *env) string {
	return func(e *env) string {
		requireEnforced(e, execjail.Enforced().Memory)
		e.attacker(nil, limitGrant(sandbox))
		alloc := func(mib int) hostfns.ExecResult {
			var res hostfns.ExecResult
			e.execOK(e.main, "exec", attackArgs{Exec: &hostfns.ExecRequest{
				Argv: []string{"perl", "-e", `my $x = "a" x ($ARGV[0] * 1024 * 1024); print "ALLOCATED\n"`, fmt.Sprint(mib)}}}, &res)
			return res
		}
		res := alloc(2048)
		if res.ExitCode == 0 || strings.Contains(res.Stdout.Data, "ALLOCATED") || !res.OutOfMemory {
			e.t.Errorf("2 GiB under grants.exec.memory 64MiB: %+v", res)
		}
		if ok := alloc(8); !strings.Contains(ok.Stdout.Data, "ALLOCATED") || ok.OutOfMemory {
			e.t.Errorf("control: 8 MiB under 64 MiB: %+v", ok)
		}
		return fmt.Sprintf("OOM-killed (out_of_memory, signal %q) at grants.exec.memory 64MiB", res.Signal)
	}
}

func sparseFile(sandbox bool) func(e *env) string {
	return func(e *env) string {
		e.attacker(nil, limitGrant(sandbox))
		var res hostfns.ExecResult
		e.execOK(e.main, "exec", attackArgs{Exec: &hostfns.ExecRequest{
			Command: "truncate -s 1T sparse; head -c 2097152 /dev/zero > big; truncate -s 1M ok && echo CONTROL-OK"}}, &res)
		if !strings.Contains(res.Stdout.Data, "CONTROL-OK") {
			e.t.Fatalf("control: a 1 MiB file failed: %+v", res)
		}
		if strings.Count(res.Stderr.Data, "File too large") < 2 {
			e.t.Errorf("writes past grants.exec.file_bytes did not fail with EFBIG: %q", res.Stderr.Data)
		}
		for _, name := range []string{"sparse", "big"} {
			if fi, err := os.Stat(filepath.Join(e.ws, name)); err == nil && fi.Size() > 1<<20 {
				e.t.Errorf("%s is %d bytes, grants.exec.file_bytes 1MiB", name, fi.Size())
			}
		}
		return "refused (File too large: RLIMIT_FSIZE from grants.exec.file_bytes)"
	}
}

// agentProc reads the agent's /proc entries from a command, after trying
// to unmount the command's private /proc where it has one.
func agentProc(sandbox bool) func(e *env) string {
	return func(e *env) string {
		e.attacker(nil, limitGrant(sandbox))
		pid := os.Getpid()
		script := fmt.Sprintf(`grep -E '^(CapPrm|CapEff|CapBnd):' /proc/self/status
if cat /proc/%[1]d/environ >/dev/null 2>&1; then echo READ-ENVIRON; fi
if (exec 3</proc/%[1]d/mem) 2>/dev/null; then echo OPENED-MEM; fi
if kill -0 %[1]d 2>/dev/null; then echo SIGNALLED-AGENT; fi
echo CONTROL-OK`, pid)
		// Only where the command has a mount namespace of its own: in the
		// other modes, a command able to unmount /proc would unmount the
		// machine's.
		if sandbox || execjail.Isolation() == execjail.ModePIDNamespace {
			script = "umount /proc 2>/dev/null && echo UNMOUNTED\n" + script
		}
		var res hostfns.ExecResult
		e.execOK(e.main, "exec", attackArgs{Exec: &hostfns.ExecRequest{Command: script}}, &res)
		out := res.Stdout.Data
		if !strings.Contains(out, "CONTROL-OK") || strings.Count(out, "Cap") != 3 {
			e.t.Fatalf("control: %+v", res)
		}
		for _, line := range strings.Split(out, "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.HasPrefix(k, "Cap") && strings.TrimSpace(v) != "0000000000000000" {
				e.t.Errorf("the command holds capabilities: %s", line)
			}
		}
		for _, bad := range []string{"UNMOUNTED", "READ-ENVIRON", "OPENED-MEM", "SIGNALLED-AGENT"} {
			if bad == "SIGNALLED-AGENT" && !strings.Contains(execjail.Enforced().Scope, "Landlock") {
				continue // no signal scope without Landlock ABI 6 (SECURITY.md)
			}
			if strings.Contains(out, bad) {
				e.t.Errorf("%s: the command reached the agent (pid %d): %q", bad, pid, out)
			}
		}
		return fmt.Sprintf("refused (no capabilities; agent non-dumpable; %s)", execjail.Isolation())
	}
}

// kernelFiles tries, as the command's uid 0, to write a sysctl (the value
// it already has, so a success changes nothing), and to open the sysrq
// trigger and a cgroup.procs for writing (an open alone does nothing).
func kernelFiles(sandbox bool) func(e *env) string {
	return func(e *env) string {
		if os.Geteuid() != 0 {
			e.t.Skip("only uid 0 may write these files at all")
		}
		if !sandbox && execjail.Isolation() != execjail.ModePIDNamespace {
			e.t.Skipf("%s: commands share the agent's /proc and /sys (SECURITY.md)", execjail.Isolation())
		}
		e.attacker(nil, fmt.Sprintf("exec: {allowed: true, timeout: 4s, max_timeout: 5s, sandbox: %v}", sandbox))
		var res hostfns.ExecResult
		e.execOK(e.main, "exec", attackArgs{Exec: &hostfns.ExecRequest{Command: `v=$(cat /proc/sys/kernel/core_pattern) && echo CONTROL-OK
if printf '%s\n' "$v" > /proc/sys/kernel/core_pattern; then echo WROTE-SYSCTL; fi
if (exec 3>>/proc/sysrq-trigger); then echo OPENED-SYSRQ; fi
for f in /sys/fs/cgroup/pids/cgroup.procs /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/unified/cgroup.procs; do
  if [ -e "$f" ] && (exec 3>>"$f"); then echo "OPENED-CGROUP $f"; fi
done`}}, &res)
		if !strings.Contains(res.Stdout.Data, "CONTROL-OK") {
			e.t.Fatalf("control: %+v", res)
		}
		for _, bad := range []string{"WROTE-SYSCTL", "OPENED-SYSRQ", "OPENED-CGROUP"} {
			if strings.Contains(res.Stdout.Data, bad) {
				e.t.Errorf("%s: %q", bad, res.Stdout.Data)
			}
		}
		return "refused (read-only file system: /proc/sys, /proc/sysrq-trigger, /sys)"
	}
}

// hostSocket listens on a Unix socket in a host directory outside every
// root and checks that a sandboxed command cannot connect to it.
func hostSocket(base string, network bool) func(e *env) string {
	return func(e *env) string {
		dir, err := os.MkdirTemp(base, "hostile-sock-")
		if err != nil {
			if os.Getenv("CI") == "true" {
				e.t.Fatalf("cannot make a socket directory under %s: %v", base, err)
			}
			e.t.Skipf("cannot make a socket directory under %s: %v", base, err)
		}
		e.t.Cleanup(func() { os.RemoveAll(dir) })
		sock := filepath.Join(dir, "service.sock")
		accepted := listenCount(e, sock)
		grant := sandboxGrant
		grants := []string{grant}
		if network {
			grants = append(grants, "net: {allowed_hosts: [example.com]}")
		}
		e.attacker(nil, grants...)
		res := e.sandboxed(perlConnect(sock), 0)
		time.Sleep(50 * time.Millisecond)
		if strings.Contains(res.Stdout.Data, "CONNECTED") || accepted() != 0 {
			e.t.Errorf("the sandboxed command connected to %s: %+v", sock, res)
		}
		if !strings.Contains(res.Stderr.Data, "connect:") {
			e.t.Errorf("the client did not get as far as connect(): %+v", res)
		}
		return "refused (the socket's directory is not in the sandbox)"
	}
}

// perlConnect is a shell command connecting to a Unix socket (a leading @
// is an abstract name) and printing CONNECTED.
func perlConnect(addr string) string {
	return `perl -MSocket -e 'my $p = $ARGV[0]; $p =~ s/^@/\0/; socket(S, PF_UNIX, SOCK_STREAM, 0) or die "socket: $!\n"; connect(S, pack_sockaddr_un($p)) or die "connect: $!\n"; print "CONNECTED\n"' ` + addr
}

// listenCount listens on addr and returns a counter of connections.
func listenCount(e *env, addr string) func() int {
	l, err := net.Listen("unix", addr)
	must(e.t, err)
	e.t.Cleanup(func() { l.Close() })
	ch := make(chan struct{}, 100)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
			ch <- struct{}{}
		}
	}()
	return func() int { return len(ch) }
}

func abstractSocket(sandbox bool) func(e *env) string {
	return func(e *env) string {
		if !strings.Contains(execjail.Enforced().Scope, "Landlock") {
			if os.Getenv("CI") == "true" {
				e.t.Fatalf("CI=true requires Landlock scopes: %s", execjail.Enforced().Scope)
			}
			e.t.Skip(execjail.Enforced().Scope)
		}
		name := "@hostile-" + randomToken(e.t)[:16]
		accepted := listenCount(e, name)
		if c, err := net.Dial("unix", name); err != nil {
			e.t.Fatalf("control: %v", err)
		} else {
			c.Close()
		}
		time.Sleep(50 * time.Millisecond)
		base := accepted()
		e.attacker(nil, fmt.Sprintf("exec: {allowed: true, timeout: 2s, max_timeout: 5s, sandbox: %v}", sandbox), "net: {allowed_hosts: [example.com]}")
		var res hostfns.ExecResult
		e.execOK(e.main, "exec", attackArgs{Exec: &hostfns.ExecRequest{Command: perlConnect(name)}}, &res)
		time.Sleep(50 * time.Millisecond)
		if strings.Contains(res.Stdout.Data, "CONNECTED") || accepted() != base || !strings.Contains(res.Stderr.Data, "connect:") {
			e.t.Errorf("abstract socket %s: %+v (connections %d)", name, res, accepted()-base)
		}
		return "refused (Landlock abstract-socket scope)"
	}
}

// execIsoAttacks: commands against the machine's resources and the agent
// process, and sandboxed commands against host sockets and nested grants.
func execIsoAttacks() []hostileAttack {
	return []hostileAttack{
		{name: "exec-fork-bomb", run: forkBomb(false)},
		{name: "bwrap-fork-bomb", bwrap: true, run: forkBomb(true)},
		{name: "exec-memory-bomb", run: memoryBomb(false)},
		{name: "bwrap-memory-bomb", bwrap: true, run: memoryBomb(true)},
		{name: "exec-sparse-file", run: sparseFile(false)},
		{name: "bwrap-sparse-file", bwrap: true, run: sparseFile(true)},
		{name: "exec-agent-proc", run: agentProc(false)},
		{name: "bwrap-agent-proc", bwrap: true, run: agentProc(true)},
		{name: "exec-kernel-files", run: kernelFiles(false)},
		{name: "bwrap-kernel-files", bwrap: true, run: kernelFiles(true)},
		{name: "bwrap-host-socket-run", bwrap: true, run: hostSocket("/run", false)},
		{name: "bwrap-host-socket-var-tmp", bwrap: true, run: hostSocket("/var/tmp", false)},
		{name: "bwrap-net-host-socket-run", bwrap: true, run: hostSocket("/run", true)},
		{name: "exec-abstract-socket", run: abstractSocket(false)},
		{name: "bwrap-net-abstract-socket", bwrap: true, run: abstractSocket(true)},
		{name: "bwrap-nested-ro", bwrap: true, run: func(e *env) string {
			// The agent's workspace under /tmp (the suite's) and outside it.
			other, err := os.MkdirTemp("/var/tmp", "hostile-ws-")
			if err != nil {
				e.t.Fatalf("a workspace outside /tmp: %v", err)
			}
			e.t.Cleanup(func() { os.RemoveAll(other) })
			for i, ws := range []string{e.ws, other} {
				protected := filepath.Join(ws, "protected")
				must(e.t, os.Mkdir(protected, 0o755))
				must(e.t, os.WriteFile(protected+"/config", []byte("original\n"), 0o644))
				name := fmt.Sprintf("nested%d", i)
				e.mustLoad(name, "attacker", map[string]any{"self": name, "prefix": name + "_"},
					`fs: [{path: workspace, mode: rw}, {path: "`+protected+`", mode: ro}]`, defaultLimits, sandboxGrant)
				facts := &prompt.AgentFacts{ID: name, Session: "session-" + name, Model: "m", Cwd: ws}
				var res hostfns.ExecResult
				s := e.attackWith(facts, name+"_attack", attackArgs{Attack: "exec", Exec: &hostfns.ExecRequest{
					Command: "echo ok > ok.txt && echo CONTROL-OK; echo pwned > protected/config; echo pwned > protected/new; rm -f protected/config"}}).Steps[0]
				if s.Status != "ok" {
					e.t.Fatalf("%s: exec: %s %s", ws, s.Status, s.Msg)
				}
				must(e.t, json.Unmarshal([]byte(s.Data), &res))
				if !strings.Contains(res.Stdout.Data, "CONTROL-OK") {
					e.t.Fatalf("%s: control: %+v", ws, res)
				}
				if b, err := os.ReadFile(protected + "/config"); err != nil || string(b) != "original\n" {
					e.t.Errorf("%s: protected/config = %q, %v", ws, b, err)
				}
				if _, err := os.Stat(protected + "/new"); err == nil {
					e.t.Errorf("%s: the sandboxed command created protected/new", ws)
				}
			}
			return "refused (the ro grant inside the rw workspace is bound read-only over it, under /tmp and /var/tmp)"
		}},
	}
}
