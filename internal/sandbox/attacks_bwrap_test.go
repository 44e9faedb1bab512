package sandbox

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
)

const sandboxGrant = "exec: {allowed: true, timeout: 2s, max_timeout: 5s, output_bytes: 4096, sandbox: true}"

// sandboxed runs a script inside bubblewrap through the attacker.
func (e *env) sandboxed(script string, timeoutMs int64) hostfns.ExecResult {
	e.t.Helper()
	var res hostfns.ExecResult
	e.execOK(e.main, "exec", attackArgs{Exec: &hostfns.ExecRequest{Command: script, TimeoutMs: timeoutMs}}, &res)
	return res
}

// These attacks run commands with sandbox: true. Unsandboxed commands
// have the agent's own rights by design (see docs/SECURITY.md), so these
// are the exec attacks that test a filesystem and network boundary.
func bwrapAttacks() []hostileAttack {
	return []hostileAttack{
		{name: "bwrap-write-outside-workspace", bwrap: true, run: func(e *env) string {
			e.attacker(nil, sandboxGrant)
			etc := "/etc/hostile-" + randomToken(e.t)[:12]
			res := e.sandboxed(fmt.Sprintf("echo pwned > %s/secret.txt; echo pwned > %s/ro.txt; echo pwned > %s; echo inside > %s/inside.txt; echo done",
				e.outside, e.ro, etc, e.ws), 0)
			// A host directory outside the roots is not even there; a
			// read-only root and the sandbox's own /etc are read-only.
			refused := strings.Count(res.Stderr.Data, "Read-only file system") + strings.Count(res.Stderr.Data, "No such file or directory")
			if res.Stdout.Data != "done\n" || refused < 3 || !strings.Contains(res.Stderr.Data, e.ro+"/ro.txt: Read-only file system") {
				e.t.Errorf("sandboxed writes: stdout %q, stderr %q", res.Stdout.Data, res.Stderr.Data)
			}
			if _, err := os.Stat(etc); err == nil {
				os.Remove(etc)
				e.t.Errorf("the sandboxed command wrote %s", etc)
			}
			if b, err := os.ReadFile(e.ws + "/inside.txt"); err != nil || string(b) != "inside\n" {
				e.t.Errorf("the workspace is not writable in the sandbox: %q, %v", b, err)
			}
			return "refused (outside the roots: absent; ro roots and /etc: read-only file system; the workspace stays writable)"
		}},
		{name: "bwrap-network-off", bwrap: true, run: func(e *env) string {
			s := e.servers()
			e.attacker(nil, sandboxGrant)
			host, port, err := net.SplitHostPort(hostPort(s.canary))
			must(e.t, err)
			// Control: the server does listen, for the host.
			if conn, err := net.Dial("tcp", hostPort(s.allowed)); err != nil {
				e.t.Fatalf("control: %v", err)
			} else {
				conn.Close()
			}
			res := e.sandboxed("exec 3<>/dev/tcp/"+host+"/"+port+" && echo connected", 0)
			if res.ExitCode == 0 || strings.Contains(res.Stdout.Data, "connected") ||
				!(strings.Contains(res.Stderr.Data, "Connection refused") || strings.Contains(res.Stderr.Data, "Network is unreachable")) {
				e.t.Errorf("the sandboxed command and the network: %+v", res)
			}
			s.wantNoCanaryHit(e)
			return "refused (no network without a net grant: the host's listening port is unreachable)"
		}},
		{name: "bwrap-private-tmp", bwrap: true, run: func(e *env) string {
			dir, err := os.MkdirTemp("/tmp", "hostile-tmp-")
			must(e.t, err)
			e.t.Cleanup(func() { os.RemoveAll(dir) })
			must(e.t, os.WriteFile(dir+"/secret.txt", []byte(e.canary), 0o644))
			dropped := filepath.Join("/tmp", "hostile-dropped-"+randomToken(e.t)[:12])
			e.attacker(nil, sandboxGrant)
			res := e.sandboxed(fmt.Sprintf("cat %s/secret.txt; echo x > %s; ls /tmp", dir, dropped), 0)
			if !strings.Contains(res.Stderr.Data, "No such file or directory") {
				e.t.Errorf("reading the host's /tmp: %+v", res)
			}
			if _, err := os.Stat(dropped); err == nil {
				os.Remove(dropped)
				e.t.Errorf("a file written to the sandbox's /tmp appeared in the host's")
			}
			return "the sandbox's /tmp is private both ways"
		}},
		{name: "bwrap-setsid-daemon", bwrap: true, run: func(e *env) string {
			requireStrongIsolation(e)
			e.attacker(nil, sandboxGrant)
			marker := e.ws + "/daemon-marker"
			res := e.sandboxed(daemonScript(marker)+" sleep 10", 200)
			if !res.TimedOut {
				e.t.Errorf("result %+v, want timed out", res)
			}
			e.wantNoMarker(marker)
			return "killed at its timeout with its setsid daemon, inside bubblewrap"
		}},
	}
}
