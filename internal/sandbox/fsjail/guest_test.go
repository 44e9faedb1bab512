//go:build unix

package fsjail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// sharedTestDir holds artifacts built once per test run.
var sharedTestDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fsjail-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fsjail tests:", err)
		os.Exit(1)
	}
	sharedTestDir = dir
	code := m.Run()
	guest.close()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// guestProgram is the wasip1 test program, built and compiled once per
// test run.
type guestProgram struct {
	once     sync.Once
	err      error
	runtime  wazero.Runtime
	compiled wazero.CompiledModule
}

var guest guestProgram

func (g *guestProgram) close() {
	if g.runtime != nil {
		_ = g.runtime.Close(context.Background())
	}
}

// guestModule builds testdata/guest with GOOS=wasip1 and compiles it with
// wazero.
func guestModule(t *testing.T) (wazero.Runtime, wazero.CompiledModule) {
	t.Helper()
	guest.once.Do(func() {
		// Prefer the toolchain running this test.
		goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goBin); err != nil {
			if goBin, err = exec.LookPath("go"); err != nil {
				guest.err = fmt.Errorf("no go command to build the guest: %w", err)
				return
			}
		}
		wasmPath := filepath.Join(sharedTestDir, "guest.wasm")
		cmd := exec.Command(goBin, "build", "-trimpath", "-o", wasmPath, "./testdata/guest")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			guest.err = fmt.Errorf("building guest: %w\n%s", err, out)
			return
		}
		wasm, err := os.ReadFile(wasmPath)
		if err != nil {
			guest.err = err
			return
		}

		ctx := context.Background()
		// The interpreter: the jail lives in Go host functions, which are
		// the same for every engine, and loading the 3 MB guest into it
		// takes about a second, where compiling it natively takes ~15 s
		// under -race with a cold compilation cache.
		rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
		if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
			_ = rt.Close(ctx)
			guest.err = fmt.Errorf("instantiating WASI: %w", err)
			return
		}
		compiled, err := rt.CompileModule(ctx, wasm)
		if err != nil {
			_ = rt.Close(ctx)
			guest.err = fmt.Errorf("compiling guest: %w", err)
			return
		}
		guest.runtime, guest.compiled = rt, compiled
	})
	if guest.err != nil {
		t.Fatal(guest.err)
	}
	return guest.runtime, guest.compiled
}

// runGuest runs the guest with fsCfg and returns one result line per
// command, plus its raw output.
func runGuest(t *testing.T, fsCfg wazero.FSConfig, cmds []string) ([]string, string) {
	t.Helper()
	rt, compiled := guestModule(t)
	var stdout, stderr bytes.Buffer
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithArgs(append([]string{"guest"}, cmds...)...).
		WithStdout(&stdout).
		WithStderr(&stderr).
		WithFSConfig(fsCfg)
	mod, err := rt.InstantiateModule(context.Background(), compiled, cfg)
	if mod != nil {
		_ = mod.Close(context.Background())
	}
	var exit *sys.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 0) {
		t.Fatalf("guest failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	raw := stdout.String() + stderr.String()
	results := make([]string, len(cmds))
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var i int
		if _, err := fmt.Sscanf(line, "%d ", &i); err != nil || i < 0 || i >= len(cmds) {
			t.Fatalf("unexpected guest output line %q", line)
		}
		_, results[i], _ = strings.Cut(line, " ")
	}
	for i, r := range results {
		if r == "" {
			t.Fatalf("no result for command %d (%s); output:\n%s", i, cmds[i], raw)
		}
	}
	return results, raw
}

// Errno texts of Go's wasip1 port, as the guest prints them.
const (
	guestEPERM  = "Operation not permitted"
	guestEROFS  = "Read-only file system"
	guestEBADF  = "Bad file number" // a path under no mount has no pre-open
	guestENOSYS = "Not implemented on wasip1"
	guestENOENT = "No such file or directory"
)

func TestGuestEndToEnd(t *testing.T) {
	fx := newFixture(t)

	steps := []struct {
		cmd  string
		want string // "OK <exact result>", or "ERR <substring of the error>"
	}{
		// Plain access inside the jail works, including inside symlinks.
		{"read|/work/hello.txt", fmt.Sprintf("OK %q", helloContent)},
		{"read|/work/link-in", fmt.Sprintf("OK %q", helloContent)},
		{"read|/work/dirlink-in/inner.txt", fmt.Sprintf("OK %q", innerContent)},
		{"write|/work/out.txt|written by guest", "OK"},
		{"append|/work/out.txt|, appended", "OK"},
		{"read|/work/out.txt", `OK "written by guest, appended"`},
		{"symlink|out.txt|/work/mylink", "OK"},
		{"read|/work/mylink", `OK "written by guest, appended"`},
		{"mkdir|/work/newdir", "OK"},
		{"rename|/work/out.txt|/work/newdir/out.txt", "OK"},
		{"readdir|/work/newdir", "OK out.txt"},
		{"readdir|/ro", "OK data-link@,data.txt,rosub/"},
		{"read|/ro/data.txt", fmt.Sprintf("OK %q", roContent)},
		{"read|/other/o.txt", fmt.Sprintf("OK %q", otherContent)},

		// The classic escape: a guest-made relative symlink out.
		{"symlink|../../../../etc/passwd|/work/evil", "OK"},
		{"readlink|/work/evil", "OK ../../../../etc/passwd"},
		{"read|/work/evil", "ERR " + guestEPERM},
		{"stat|/work/evil", "ERR " + guestEPERM},
		{"lstat|/work/evil", "OK L--------- 22"},
		{"symlink|../../outside/canary.txt|/work/sub/evil2", "OK"},
		{"read|/work/sub/evil2", "ERR " + guestEPERM},
		{"write|/work/sub/evil2|pwned", "ERR " + guestEPERM},
		{"symlink|/etc/passwd|/work/abs-evil", "ERR " + guestEPERM},

		// Host paths and /proc are not mounted at all.
		{"read|/etc/passwd", "ERR " + guestEBADF},
		{"read|/work/../../etc/passwd", "ERR " + guestEBADF},
		{"read|/work/../outside/canary.txt", "ERR " + guestEBADF},
		{"read|/proc/self/status", "ERR " + guestEBADF},
		{"readdir|/", "ERR " + guestEBADF},

		// Host-made symlinks and directories pointing out.
		{"read|/work/rel-out", "ERR " + guestEPERM},
		{"read|/work/abs-out", "ERR " + guestEPERM},
		{"read|/work/deep-out", "ERR " + guestEPERM},
		{"read|/work/dir-out/canary.txt", "ERR " + guestEPERM},
		{"read|/work/abs-dir-out/canary.txt", "ERR " + guestEPERM},
		{"read|/work/proc-self/status", "ERR " + guestEPERM},
		{"read|/work/abs-proc", "ERR " + guestEPERM},
		{"readdir|/work/dir-out", "ERR " + guestEPERM},
		{"write|/work/dir-out/planted.txt|pwned", "ERR " + guestEPERM},
		{"remove|/work/dir-out/victim.txt", "ERR " + guestEPERM},
		{"rename|/work/dir-out/canary.txt|/work/stolen.txt", "ERR " + guestEPERM},
		{"rename|/work/hello.txt|/work/dir-out/moved.txt", "ERR " + guestEPERM},
		{"chtimes|/work/rel-out", "ERR " + guestEPERM},
		{"truncate|/work/rel-out", "ERR " + guestEPERM},

		// Hard links and renames cannot leave a mount.
		{"link|/work/rel-out|/work/hard", "OK"},
		{"read|/work/hard", "ERR " + guestEPERM},
		{"link|/work/dir-out/canary.txt|/work/hard2", "ERR " + guestEPERM},
		{"rename|/work/hello.txt|/other/hello.txt", "ERR " + guestENOSYS},
		{"rename|/other/o.txt|/work/o.txt", "ERR " + guestENOSYS},
		{"link|/work/hello.txt|/other/hard", "ERR " + guestENOSYS},
		{"rename|/work/hello.txt|/ro/hello.txt", "ERR " + guestENOSYS},

		// The read-only mount refuses every change.
		{"write|/ro/new.txt|x", "ERR " + guestEROFS},
		{"write|/ro/data.txt|x", "ERR " + guestEROFS},
		{"append|/ro/data.txt|x", "ERR " + guestEROFS},
		{"truncate|/ro/data.txt", "ERR " + guestEROFS},
		{"mkdir|/ro/newdir", "ERR " + guestEROFS},
		{"remove|/ro/data.txt", "ERR " + guestEROFS},
		{"remove|/ro/rosub", "ERR " + guestEROFS},
		{"rename|/ro/data.txt|/ro/moved.txt", "ERR " + guestEROFS},
		{"symlink|data.txt|/ro/sl", "ERR " + guestEROFS},
		{"link|/ro/data.txt|/ro/hard", "ERR " + guestEROFS},
		{"chtimes|/ro/data.txt", "ERR " + guestEROFS},

		// Loops and missing files report honestly.
		{"read|/work/loop1", "ERR " + "Too many symbolic links"},
		{"read|/work/missing", "ERR " + guestENOENT},

		// Everything listed in the root is the root's own: what the host
		// made, what the guest made, and no refused creation.
		{"readdir|/work", "OK abs-dir-out@,abs-out@,abs-proc@,chain1@,chain2@,deep-out@,dir-out@," +
			"dirlink-in@,emptysub/,evil@,hard@,hello.txt,link-in@,loop1@,loop2@,mylink@,newdir/,proc-self@,rel-out@,sub/"},
	}
	cmds := make([]string, len(steps))
	for i, s := range steps {
		cmds[i] = s.cmd
	}
	results, raw := runGuest(t, fx.jail.FSConfig(), cmds)

	for i, s := range steps {
		got := results[i]
		switch {
		case strings.HasPrefix(s.want, "ERR "):
			if !strings.HasPrefix(got, "ERR ") || !strings.Contains(got, strings.TrimPrefix(s.want, "ERR ")) {
				t.Errorf("%s: got %q, want error containing %q", s.cmd, got, strings.TrimPrefix(s.want, "ERR "))
			}
		case s.want == "OK":
			if got != "OK " && got != "OK" {
				t.Errorf("%s: got %q, want OK", s.cmd, got)
			}
		default:
			if got != s.want {
				t.Errorf("%s: got %q, want %q", s.cmd, got, s.want)
			}
		}
	}
	if strings.Contains(raw, "CANARY") {
		t.Errorf("canary content reached the guest:\n%s", raw)
	}

	// The host tree reflects exactly what the guest was allowed to do.
	if b, err := os.ReadFile(filepath.Join(fx.rootDir, "newdir", "out.txt")); err != nil || string(b) != "written by guest, appended" {
		t.Errorf("host newdir/out.txt = %q, %v", b, err)
	}
	if target, err := os.Readlink(filepath.Join(fx.rootDir, "evil")); err != nil || target != "../../../../etc/passwd" {
		t.Errorf("host evil link = %q, %v", target, err)
	}
	if _, err := os.Stat(filepath.Join(fx.rootDir, "hello.txt")); err != nil {
		t.Errorf("hello.txt moved away: %v", err)
	}
	for _, p := range []string{filepath.Join(fx.otherDir, "hello.txt"), filepath.Join(fx.rootDir, "o.txt"), filepath.Join(fx.otherDir, "hard")} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists after refused cross-mount operation (%v)", p, err)
		}
	}
}

// TestGuestNestedMounts mounts a directory at "/" and another below it: the
// guest resolves each path against the longest matching mount, and "/"
// still holds only its own directory, not the host's root.
func TestGuestNestedMounts(t *testing.T) {
	fx := newFixture(t)
	j, err := New([]Mount{
		{HostPath: fx.rootDir, GuestPath: "/", ReadOnly: true},
		{HostPath: fx.otherDir, GuestPath: "/sub"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	steps := []struct{ cmd, want string }{
		{"read|/hello.txt", fmt.Sprintf("OK %q", helloContent)},
		{"read|/sub/o.txt", fmt.Sprintf("OK %q", otherContent)},
		{"write|/sub/new.txt|x", "OK "},
		{"write|/new.txt|x", "ERR open /new.txt: " + guestEROFS},
		{"read|/etc/passwd", "ERR open /etc/passwd: " + guestENOENT},
		{"read|/proc/self/status", "ERR open /proc/self/status: " + guestENOENT},
		{"read|/../../../etc/passwd", "ERR open /../../../etc/passwd: " + guestENOENT},
		{"read|/rel-out", "ERR open /rel-out: " + guestEPERM},
		{"read|/dir-out/canary.txt", "ERR open /dir-out/canary.txt: " + guestEPERM},
	}
	cmds := make([]string, len(steps))
	for i, s := range steps {
		cmds[i] = s.cmd
	}
	results, raw := runGuest(t, j.FSConfig(), cmds)
	for i, s := range steps {
		if results[i] != s.want {
			t.Errorf("%s: got %q, want %q", s.cmd, results[i], s.want)
		}
	}
	if strings.Contains(raw, "CANARY") {
		t.Errorf("canary content reached the guest:\n%s", raw)
	}
	if b, err := os.ReadFile(filepath.Join(fx.otherDir, "new.txt")); err != nil || string(b) != "x" {
		t.Errorf("host other/new.txt = %q, %v", b, err)
	}
}
