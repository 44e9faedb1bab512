//go:build linux

package execjail

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/prereq"
)

// requireBwrap skips without bubblewrap, except under CI=true where its
// absence is a failure.
func requireBwrap(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		prereq.Missing(t, "bwrap not installed: %v", err)
	}
}

func sandboxManager(t *testing.T, opts Options) (*Manager, string) {
	t.Helper()
	requireBwrap(t)
	opts.Sandbox = true
	return newManager(t, Isolation(), opts)
}

func TestSandboxExitCodes(t *testing.T) {
	m, _ := sandboxManager(t, Options{})
	if res := run(t, m, Command{Script: "echo hi; exit 7"}); res.ExitCode != 7 || string(res.Stdout.Data) != "hi\n" {
		t.Errorf("exit 7: %+v", res)
	}
	// Inside the sandbox the command is not PID 1, so it can signal
	// itself; bwrap reports the signal shell-style.
	if res := run(t, m, Command{Script: "kill -TERM $$; sleep 5"}); res.ExitCode != 128+15 {
		t.Errorf("self SIGTERM: %+v", res)
	}
	// bwrap sets PWD to the working directory; nothing else is added.
	res := run(t, m, Command{Argv: []string{"env"}})
	if got, want := string(res.Stdout.Data), testPath+"\nPWD="+m.roots[0].Path+"\n"; got != want {
		t.Errorf("sandbox env = %q, want %q", got, want)
	}
}

func TestSandboxCannotWriteOutsideWorkspace(t *testing.T) {
	requireBwrap(t)
	// Outside /tmp; the sandbox binds only system directories and its
	// roots, so the host directory next to the workspace is not there.
	base, err := os.MkdirTemp("/var/tmp", "execjail-test-")
	if err != nil {
		prereq.Missing(t, "need a writable directory outside /tmp: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	must(t, os.Mkdir(ws, 0o755))
	must(t, os.Mkdir(outside, 0o755))
	must(t, os.WriteFile(filepath.Join(outside, "seen"), nil, 0o644))
	m, _ := newManager(t, Isolation(), Options{Sandbox: true, Roots: []Root{{Path: ws, Writable: true}}})
	script := fmt.Sprintf(`
touch %[1]s/inside || exit 10
test -e %[2]s/seen && exit 11
test -e /etc/shadow && exit 14
test -e /etc/passwd || exit 15
touch %[2]s/escaped 2>/dev/null && exit 12
mount -o remount,rw / 2>/dev/null; mount -o remount,rw %[2]s 2>/dev/null
touch %[2]s/escaped 2>/dev/null && exit 13
exit 0`, ws, outside)
	res := run(t, m, Command{Script: script})
	if res.ExitCode != 0 {
		t.Errorf("exit %d (10: workspace not writable, 11: outside visible, 12: wrote outside, 13: wrote outside after remount, 14: /etc/shadow visible, 15: curated /etc missing); stderr %q",
			res.ExitCode, res.Stderr.Data)
	}
	if _, err := os.Stat(filepath.Join(ws, "inside")); err != nil {
		t.Errorf("workspace write missing on the host: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "escaped")); err == nil {
		t.Error("the sandbox wrote outside the workspace")
	}
}

func TestSandboxReadOnlyRoot(t *testing.T) {
	requireBwrap(t)
	ro, rw := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ro, "data"), []byte("visible"), 0o644)
	m, _ := newManager(t, Isolation(), Options{Sandbox: true, Roots: []Root{{Path: rw, Writable: true}, {Path: ro}}})
	res := run(t, m, Command{Dir: ro, Script: "cat data; touch new 2>/dev/null && echo WROTE; pwd"})
	if got := string(res.Stdout.Data); got != "visible"+ro+"\n" {
		t.Errorf("output %q, stderr %q", got, res.Stderr.Data)
	}
}

func TestSandboxPrivateTmp(t *testing.T) {
	hostFile, err := os.CreateTemp("/tmp", "execjail-host-*")
	if err != nil {
		prereq.Missing(t, "no writable /tmp: %v", err)
	}
	hostFile.Close()
	defer os.Remove(hostFile.Name())
	m, _ := sandboxManager(t, Options{})
	inner := fmt.Sprintf("/tmp/execjail-inner-%d", time.Now().UnixNano())
	res := run(t, m, Command{Script: fmt.Sprintf("test -e %s && echo HOSTVISIBLE; echo x > %s && cat %s", hostFile.Name(), inner, inner)})
	if got := string(res.Stdout.Data); got != "x\n" {
		t.Errorf("output %q, stderr %q", got, res.Stderr.Data)
	}
	if _, err := os.Stat(inner); err == nil {
		os.Remove(inner)
		t.Error("a /tmp write inside the sandbox reached the host")
	}
}

func TestSandboxNetwork(t *testing.T) {
	requireBwrap(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	script := fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%s && echo CONNECTED", port)

	isolated, _ := sandboxManager(t, Options{})
	if res := run(t, isolated, Command{Script: script}); strings.Contains(string(res.Stdout.Data), "CONNECTED") || res.ExitCode == 0 {
		t.Errorf("sandbox without net reached the host: %+v", res)
	}
	if res := run(t, isolated, Command{Script: "cat /proc/net/dev"}); strings.Contains(string(res.Stdout.Data), "eth") {
		t.Errorf("sandbox without net sees host interfaces:\n%s", res.Stdout.Data)
	}
	open, _ := sandboxManager(t, Options{Network: true})
	if res := run(t, open, Command{Script: script}); !strings.Contains(string(res.Stdout.Data), "CONNECTED") {
		t.Errorf("sandbox with net could not connect: %+v", res)
	}
}

func TestSandboxTimeoutKillsDaemons(t *testing.T) {
	m, root := sandboxManager(t, Options{})
	tok, marker := token(), filepath.Join(root, "marker")
	t.Cleanup(func() { killAll(procsWith(tok)) })
	res := run(t, m, Command{Script: daemonScript(tok, marker) + "sleep 30", Timeout: 2 * time.Second})
	if !res.TimedOut || !strings.Contains(string(res.Stdout.Data), "ready") {
		t.Fatalf("result = %+v, stderr %q", res, res.Stderr.Data)
	}
	if left := procsWith(tok); len(left) != 0 {
		killAll(left)
		t.Errorf("processes survived: %v", left)
	}
	assertMarkerStill(t, marker)
}

func TestSandboxBwrapMissing(t *testing.T) {
	m, _ := newManager(t, Isolation(), Options{Sandbox: true, BwrapPath: "/nonexistent/bwrap"})
	if _, err := m.Run(context.Background(), Command{Script: "true"}); !errors.Is(err, ErrBwrapMissing) {
		t.Errorf("explicit missing path: %v", err)
	}
	m2, _ := newManager(t, Isolation(), Options{Sandbox: true})
	t.Setenv("PATH", t.TempDir())
	if _, err := m2.Run(context.Background(), Command{Script: "true"}); !errors.Is(err, ErrBwrapMissing) {
		t.Errorf("bwrap not in PATH: %v", err)
	}
	if _, err := m2.Start(context.Background(), Command{Script: "true"}); !errors.Is(err, ErrBwrapMissing) {
		t.Errorf("Start without bwrap: %v", err)
	}
}

func TestSandboxSetupFailureIsAnError(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "bwrap")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'bwrap: Can not mount tmpfs' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	m, _ := newManager(t, Isolation(), Options{Sandbox: true, BwrapPath: fake})
	_, err := m.Run(context.Background(), Command{Script: "true"})
	if !errors.Is(err, ErrSandboxFailed) || !strings.Contains(err.Error(), "Can not mount tmpfs") {
		t.Errorf("error = %v, want ErrSandboxFailed with bwrap's message", err)
	}
}

func TestBwrapArgs(t *testing.T) {
	m := &Manager{
		opts:  Options{},
		roots: []Root{{Path: "/tmp/ws/sub", Writable: true}, {Path: "/tmp/ws", Writable: true}, {Path: "/srv/ro"}, {Path: "/tmp/ro"}},
	}
	args := strings.Join(m.bwrapArgs("/usr/bin/bwrap", "/tmp/ws", []string{"bash", "-c", "x"}, bindFDBase), " ")
	for _, want := range []string{
		"--unshare-net", "--cap-drop ALL", "--die-with-parent", "--new-session", "--unshare-pid",
		"--ro-bind /usr /usr", "--ro-bind-try /etc/passwd /etc/passwd",
		"--dev /dev --proc /proc --ro-bind /proc/sys /proc/sys --ro-bind-try /proc/sysrq-trigger /proc/sysrq-trigger",
		"--tmpfs /tmp --tmpfs /var/tmp --tmpfs /run --symlink ../run /var/run ",
		"--ro-bind /tmp/ro /tmp/ro", "--ro-bind /srv/ro /srv/ro", "--bind /tmp/ws /tmp/ws", "--bind /tmp/ws/sub /tmp/ws/sub",
		"--chdir /tmp/ws -- bash -c x",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("bwrap args lack %q:\n%s", want, args)
		}
	}
	order := []string{"--tmpfs /tmp", "--bind /tmp/ws /tmp/ws", "--bind /tmp/ws/sub /tmp/ws/sub", "--chdir"}
	for i := 1; i < len(order); i++ {
		if strings.Index(args, order[i-1]) > strings.Index(args, order[i]) {
			t.Errorf("%q must come before %q:\n%s", order[i-1], order[i], args)
		}
	}
	if strings.Index(args, "--tmpfs /tmp") > strings.Index(args, "--ro-bind /tmp/ro") {
		t.Errorf("a read-only root under /tmp must be bound after the tmpfs:\n%s", args)
	}
	for _, never := range []string{"--ro-bind / /", "--bind / /", "/etc/shadow", " /var ", " /home "} {
		if strings.Contains(args, never) {
			t.Errorf("bwrap args bind %q: %s", never, args)
		}
	}
	m.opts.Network = true
	if args := strings.Join(m.bwrapArgs("/usr/bin/bwrap", "/", []string{"true"}, bindFDBase), " "); strings.Contains(args, "--unshare-net") {
		t.Errorf("Network: true still unshares the network: %s", args)
	}
}
