package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/fsjail"
)

func fsAttacks() []hostileAttack {
	return []hostileAttack{
		{name: "fs-dotdot-chain", run: func(e *env) string {
			e.attacker(nil)
			r := e.attack(e.main, e.fsArgs("fs-dotdot"))
			wantControl(e, r, "control: read hello.txt through the descriptor", helloText)
			e.wantErrno(r, "OK", "symlink up -> ..", "symlink sub/upup -> ../..")
			// A lexical ".." is refused by wazero; the symlinks reach
			// the jail.
			e.wantErrno(r, "EPERM", "openat ../", "openat deep ../ chain", "openat sub/../../", "stat ../", "opendir ..",
				"openat up/NAME/secret.txt", "openat sub/upup/NAME/secret.txt", "openat sub/../up/NAME/sub/deep.txt",
				"stat up/NAME/secret.txt", "openat up/ws/hello.txt (out and back in)")
			// Go's os package cleans ws/../x lexically to a path under no
			// pre-open, so the call never reaches a mount.
			e.wantErrno(r, "EBADF", "os.ReadFile ws/../")
			return "refused (EPERM in wazero or at the jail, through symlinks to ..; EBADF for a path under no pre-open)"
		}},
		{name: "fs-absolute-path", run: func(e *env) string {
			e.attacker(nil)
			r := e.attack(e.main, e.fsArgs("fs-absolute"))
			wantControl(e, r, "control: read hello.txt through the descriptor", helloText)
			wantControl(e, r, "control: os.ReadFile ws/hello.txt", helloText)
			e.wantErrno(r, "EPERM", "openat absolute", "stat absolute")
			e.wantErrno(r, "EBADF", "os.ReadFile absolute", "os.ReadDir /")
			return "refused (EPERM relative to a mount; EBADF outside every mount)"
		}},
		{name: "fs-symlink-relative-out", run: func(e *env) string {
			e.attacker(nil)
			r := e.attack(e.main, e.fsArgs("fs-symlink-relative"))
			// wazero #2321: creating the link is allowed (its target is
			// only text), following it out is not.
			e.wantErrno(r, "OK", "symlink ../NAME/secret.txt", "readlink", "symlink deep ../", "control: symlink sub/in-link -> ../hello.txt")
			wantControl(e, r, "control: read through sub/in-link", helloText)
			e.wantErrno(r, "EPERM", "read through the link", "read through the deep link", "write through the link")
			if got, err := os.Readlink(e.ws + "/rel-link"); err != nil || got != e.rel+"/secret.txt" {
				e.t.Errorf("the guest's link on the host: %q, %v", got, err)
			}
			return "refused (EPERM when following the guest's ../ symlink)"
		}},
		{name: "fs-symlink-absolute", run: func(e *env) string {
			e.attacker(nil)
			r := e.attack(e.main, e.fsArgs("fs-symlink-absolute"))
			e.wantErrno(r, "OK", "control: symlink relative target")
			wantControl(e, r, "control: read the relative link", helloText)
			e.wantErrno(r, "EPERM", "symlink absolute target", "read the host's absolute link")
			e.wantErrno(r, "ENOENT", "read the guest's absolute link")
			return "refused (EPERM creating or following an absolute symlink)"
		}},
		{name: "fs-symlinked-dir", run: func(e *env) string {
			e.attacker(nil)
			r := e.attack(e.main, e.fsArgs("fs-symlinked-dir"))
			e.wantErrno(r, "OK", "symlink ../NAME", "control: symlink sub-link -> sub", "control: create sub-link/made.txt")
			wantControl(e, r, "control: read sub/made.txt", "made")
			e.wantErrno(r, "EPERM", "read dir-link/secret.txt", "list dir-link", "stat dir-link/secret.txt",
				"create dir-link/planted.txt", "read host-dir-link/secret.txt")
			return "refused (EPERM through a directory symlink, the guest's or the host's)"
		}},
		{name: "fs-hardlink-out", run: func(e *env) string {
			e.attacker(nil)
			r := e.attack(e.main, e.fsArgs("fs-hardlink"))
			wantControl(e, r, "control: read hello.txt through the descriptor", helloText)
			e.wantErrno(r, "OK", "control: link hello.txt", "symlink outdir -> ../NAME")
			wantControl(e, r, "read hello-link", helloText)
			e.wantErrno(r, "EPERM", "link ../NAME/secret.txt", "link absolute", "link outdir/secret.txt", "link in, to outdir/stolen")
			// The jail links a symlink itself, never its target: the
			// new name is a second symlink out, refused when read.
			e.wantErrno(r, "OK", "link following a symlink")
			e.wantErrno(r, "EPERM", "read stolen-via")
			e.wantErrno(r, "EBADF", "os.Link lexical ..")
			e.wantErrno(r, "ENOENT", "read stolen-rel", "read stolen-abs", "read stolen-os", "read stolen-dir")
			return "refused (EPERM; the secret's link count is unchanged)"
		}},
		{name: "fs-rename-over-race", run: func(e *env) string {
			// Two agents share the workspace, so their instances run in
			// parallel: one renames a symlink out of the root over a
			// file again and again while the other reads the file.
			e.attacker(nil, limits("20s", "5s", "64MiB"))
			must(e.t, os.WriteFile(e.ws+"/race", []byte("inside"), 0o644))
			var wg sync.WaitGroup
			var swapper report
			wg.Add(1)
			go func() {
				defer wg.Done()
				a := e.fsArgs("fs-swap")
				a.Path, a.N = "race", 400
				res, err := e.call(e.agent("swapper"), "attack", a)
				if err != nil || res.IsError {
					e.t.Errorf("swapper: %+v %v", res, err)
					return
				}
				swapper = decodeReport(e, res.Text)
			}()
			a := e.fsArgs("fs-read-loop")
			a.Path, a.N = "race", 1000
			reader := e.attack(e.agent("reader"), a)
			wg.Wait()
			// ELOOP: os.Root gives up on a final component that keeps
			// changing between "is a symlink" and "read the link".
			return raceVerdict(e, reader, swapper, 1000, "OK", "EPERM", "ELOOP")
		}},
		{name: "fs-dir-swap-race", run: func(e *env) string {
			// A directory component is swapped for a symlink out of the
			// root (by another process in the workspace) while the guest
			// opens a file beneath it.
			e.attacker(nil, limits("20s", "5s", "64MiB"))
			dir, link := e.ws+"/swapdir", e.ws+"/swapdir.link"
			must(e.t, os.MkdirAll(dir, 0o755))
			must(e.t, os.WriteFile(dir+"/secret.txt", []byte("inside"), 0o644))
			must(e.t, os.Symlink(e.rel, link))
			stop := make(chan struct{})
			var swaps int
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					// dir -> dir.real, link -> dir, dir -> link, dir.real -> dir
					if os.Rename(dir, dir+".real") == nil && os.Rename(link, dir) == nil {
						swaps++
						os.Rename(dir, link)
						os.Rename(dir+".real", dir)
					}
				}
			}()
			a := e.fsArgs("fs-read-loop")
			a.Path, a.N = "swapdir/secret.txt", 1500
			r := e.attack(e.main, a)
			close(stop)
			wg.Wait()
			// Between renames the name is missing (ENOENT) or briefly
			// not a directory (ENOTDIR); all are honest, none is a read.
			return raceVerdict(e, r, report{}, 1500, "OK", "EPERM", "ENOENT", "ENOTDIR", "ELOOP") + fmt.Sprintf(", %d swaps", swaps)
		}},
		{name: "fs-write-readonly-grant", run: func(e *env) string {
			e.attacker(nil)
			r := e.attack(e.main, e.fsArgs("fs-write-ro"))
			e.wantErrno(r, "EROFS", "write existing", "create new", "open append", "truncate", "mkdir", "remove",
				"rename", "symlink", "hard link", "set mtime")
			if s := r.step(e.t, "read"); s.Errno != "OK" || s.Data != roText {
				e.t.Errorf("reading under ro: %+v", s)
			}
			return "refused (EROFS for every mutation; reads work)"
		}},
		{name: "fs-proc-self", run: func(e *env) string {
			e.attacker(nil)
			r := e.attack(e.main, e.fsArgs("fs-proc-self"))
			wantControl(e, r, "control: read hello.txt through the descriptor", helloText)
			e.wantErrno(r, "EBADF", "os.ReadFile /proc/self/environ", "os.ReadFile /proc/self/root"+e.outside+"/secret.txt",
				"os.ReadFile /proc/self/cwd/secret.txt", "os.ReadFile /proc/self/fd/0")
			e.wantErrno(r, "EPERM", "openat /proc/self/root", "read proc-link", "read env-link")
			return "refused (no /proc in the guest's view; EPERM through symlinks to it)"
		}},
		{name: "fs-mutate-outside", run: func(e *env) string {
			e.attacker(nil)
			r := e.attack(e.main, e.fsArgs("fs-mutate-outside"))
			wantControl(e, r, "control: read hello.txt through the descriptor", helloText)
			e.wantErrno(r, "EPERM", "unlink ../", "rename over ../", "rename out of ../", "mkdir ../", "set mtime ../", "truncate ../", "create ../")
			e.wantErrno(r, "OK", "symlink outdir -> ../NAME", "control: unlink", "control: rename", "control: mkdir", "control: rmdir",
				"control: set mtime", "control: truncate", "control: create")
			e.wantErrno(r, "EPERM", "unlink outdir/", "rename over outdir/", "rename out of outdir/", "mkdir outdir/", "rmdir outdir/sub",
				"set mtime outdir/", "symlink in outdir/", "truncate outdir/", "create outdir/")
			return "refused (EPERM: no unlink, rename, mkdir, utimes, truncate or create outside)"
		}},
		{name: "fs-symlink-loop", run: func(e *env) string {
			e.attacker(nil)
			r := e.attack(e.main, e.fsArgs("fs-symlink-loop"))
			e.wantErrno(r, "OK", "symlink a -> b", "symlink b -> a", "symlink self", "control: symlink chain c1 -> c2 -> hello.txt")
			wantControl(e, r, "control: read c1", helloText)
			e.wantErrno(r, "ELOOP", "read loop-a", "read loop-self", "stat loop-a/x")
			return "refused (ELOOP)"
		}},
		{name: "fs-fd-exhaustion", run: func(e *env) string {
			// The guest opens one file again and again and keeps every
			// descriptor. Each guest open holds a host descriptor; the
			// host process must still be able to open files.
			e.attacker(nil, limits("30s", "5s", "64MiB"))
			a := e.fsArgs("fs-fd-exhaustion")
			a.Path, a.N = "hello.txt", 1<<17
			r := e.attack(e.main, a)
			s := r.step(e.t, "open until refused")
			f, hostErr := os.Open(e.ws + "/hello.txt")
			if f != nil {
				f.Close()
			}
			// Release the hoard before the common checks.
			e.host.EndAgent(e.ctx, e.main.ID)
			if hostErr != nil {
				e.t.Errorf("after the guest opened %d files (its last open: %s), the host cannot open a file: %v", s.N, s.Errno, hostErr)
			}
			// fsjail caps one jail's open files; wazero's errno set has no
			// EMFILE, so the guest sees EAGAIN.
			if s.Errno != "EAGAIN" || s.N > fsjail.MaxOpenFiles {
				e.t.Errorf("the guest opened %d files, then %s; want EAGAIN within %d", s.N, s.Errno, fsjail.MaxOpenFiles)
			}
			return fmt.Sprintf("refused (EAGAIN) after %d open files; the host still opens files", s.N)
		}},
		{name: "fs-other-agent-workspace", run: func(e *env) string {
			e.attacker(nil)
			must(e.t, os.WriteFile(e.ws+"/private.txt", []byte(e.canary), 0o600))
			other := e.agent("other")
			other.Cwd = filepath.Join(e.base, "other-ws")
			must(e.t, os.MkdirAll(other.Cwd, 0o755))
			r := e.attack(other, attackArgs{Attack: "fs-read", Path: e.ws + "/private.txt"})
			e.wantErrno(r, "EBADF", "read "+e.ws+"/private.txt")
			return "refused (EBADF: another agent's workspace is not mounted)"
		}},
	}
}

func decodeReport(e *env, text string) report {
	var r report
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		e.t.Errorf("bad report %q: %v", text, err)
	}
	return r
}

// raceVerdict checks a read loop's tally: n reads, every outcome one of
// allowed, and no content but the legitimate one.
func raceVerdict(e *env, reader, swapper report, n int, allowed ...string) string {
	e.t.Helper()
	total := 0
	var parts []string
	for _, s := range reader.Steps {
		if s.Op == "read other content" {
			e.t.Errorf("the reader read something else than the file inside: %.100q", s.Data)
			continue
		}
		total += int(s.N)
		parts = append(parts, fmt.Sprintf("%s×%d", s.Errno, s.N))
		if !slices.Contains(allowed, s.Errno) {
			e.t.Errorf("read outcome %s ×%d, want only %v", s.Errno, s.N, allowed)
		}
	}
	if total != n {
		e.t.Errorf("tallied %d reads, want %d", total, n)
	}
	for _, s := range swapper.Steps {
		if s.Op != "rename link OK" && s.Op != "rename file OK" {
			e.t.Errorf("swapper: %s ×%d", s.Op, s.N)
		}
	}
	return "never read outside (" + strings.Join(slices.Sorted(slices.Values(parts)), ", ") + ")"
}

// wantControl asserts that a legitimate step succeeded and read want.
func wantControl(e *env, r report, op, want string) {
	e.t.Helper()
	if s := r.step(e.t, op); s.Errno != "OK" || s.Data != want {
		e.t.Errorf("%s: errno %s, data %q; want OK and %q", op, s.Errno, s.Data, want)
	}
}
