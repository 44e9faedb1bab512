package sandbox

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// fsBoundsAttacks: special files, the disk quota and nested grants.
func fsBoundsAttacks() []hostileAttack {
	special := func(kind string) func(e *env) string {
		return func(e *env) string {
			// A FIFO or socket in the workspace, as a command the plugin
			// ran could leave. Opening a FIFO used to block the host's
			// thread until a writer came, past every budget, and with it
			// Unload, Load and Close.
			p := filepath.Join(e.ws, kind)
			if kind == "fifo" {
				must(e.t, unix.Mkfifo(p, 0o644))
			} else {
				l, err := net.Listen("unix", p)
				must(e.t, err)
				defer l.Close()
			}
			e.attacker(nil)
			hung, stop := unblockFIFO(p, 15*time.Second)
			a := e.fsArgs("fs-special")
			a.Path = kind
			r := e.attack(e.main, a)
			stop()
			if hung.Load() {
				e.t.Fatalf("opening the %s blocked until its other end opened", kind)
			}
			wantControl(e, r, "control: read hello.txt through the descriptor", helloText)
			for _, op := range []string{"open for reading", "os.ReadFile", "os.WriteFile"} {
				if s := r.step(e.t, op); s.Errno == "OK" {
					e.t.Errorf("%s of the %s: OK, want an error", op, kind)
				}
			}
			start := time.Now()
			must(e.t, e.host.Unload(e.ctx, "attacker"))
			return fmt.Sprintf("refused (%s) at once; Unload took %v", r.step(e.t, "open for reading").Errno, time.Since(start).Round(time.Millisecond))
		}
	}
	return []hostileAttack{
		{name: "fs-fifo-open", run: special("fifo")},
		{name: "fs-socket-open", run: special("sock")},
		{name: "fs-sparse-file", run: func(e *env) string {
			// A 1 TiB sparse file costs its size against the default
			// 1 GiB quota (grants.limits.disk_bytes).
			e.attacker(nil)
			r := e.attack(e.main, e.fsArgs("fs-sparse"))
			e.wantErrno(r, "EIO", "pwrite at 1 TiB", "ftruncate to 1 TiB", "truncate by path to 1 TiB")
			e.wantErrno(r, "OK", "control: pwrite at 4 KiB")
			fi, err := os.Stat(filepath.Join(e.ws, "sparse"))
			if err != nil || fi.Size() != 4096+5 {
				e.t.Errorf("sparse on the host: %v, %v; want %d bytes", fi, err, 4096+5)
			}
			return "refused (EIO: disk quota; 1 TiB counts as 1 TiB)"
		}},
		{name: "fs-many-files", run: func(e *env) string {
			// Thousands of files, against grants.limits.disk_files.
			e.attacker(nil, "limits: {call_timeout: 20s, init_timeout: 5s, memory: 64MiB, disk_files: 300}")
			a := e.fsArgs("fs-many-files")
			a.N = 5000
			r := e.attack(e.main, a)
			s := r.step(e.t, "create until refused")
			entries, err := os.ReadDir(filepath.Join(e.ws, "many"))
			if s.Errno != "EIO" || s.N != 299 || err != nil || len(entries) != 299 {
				e.t.Errorf("created %d files (%d on the host, %v), then %s; want 299 (300 less the directory), then EIO", s.N, len(entries), err, s.Errno)
			}
			e.wantErrno(r, "OK", "control: rewrite f0")
			return fmt.Sprintf("refused (EIO) after %d files", s.N)
		}},
		{name: "fs-nested-ro-grant", run: func(e *env) string {
			// The workspace is rw and <ws>/protected ro: the narrower
			// grant wins through the workspace's descriptor.
			prot := filepath.Join(e.ws, "protected")
			must(e.t, os.MkdirAll(prot, 0o755))
			must(e.t, os.WriteFile(prot+"/ro.txt", []byte(roText), 0o644))
			old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
			must(e.t, os.Chtimes(prot+"/ro.txt", old, old))
			must(e.t, os.Chtimes(prot, old, old))
			e.watched[prot] = snapshot(e.t, prot)
			e.mustLoad("attacker", "attacker", map[string]any{"self": "attacker"},
				fmt.Sprintf("fs: [{path: workspace, mode: rw}, {path: %q, mode: ro}]", prot), defaultLimits)
			a := e.fsArgs("fs-nested-ro")
			a.Path = "protected"
			r := e.attack(e.main, a)
			wantControl(e, r, "control: read hello.txt through the descriptor", helloText)
			wantControl(e, r, "control: read", roText)
			e.wantErrno(r, "OK", "control: create in the workspace", "symlink plink -> protected")
			e.wantErrno(r, "EROFS", "truncate", "create", "unlink", "rename out", "rename in", "mkdir", "symlink",
				"link out", "set mtime", "truncate through plink")
			return "refused (EROFS through the workspace's descriptor, by name and through a symlink)"
		}},
	}
}

// unblockFIFO waits, then, until stop is called, keeps opening the FIFO
// at path for reading and writing and closing it a second later, so that
// whatever a broken jail blocks on (an open, a read, a write) ends and the
// test fails instead of hanging. hung reports whether it had to.
func unblockFIFO(path string, after time.Duration) (hung *atomic.Bool, stop func()) {
	hung = &atomic.Bool{}
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
			return
		case <-time.After(after):
		}
		hung.Store(true)
		for {
			f, err := os.OpenFile(path, os.O_RDWR|unix.O_NONBLOCK, 0)
			select {
			case <-done:
				if err == nil {
					f.Close()
				}
				return
			case <-time.After(time.Second):
			}
			if err == nil {
				f.Close()
			}
		}
	}()
	var once sync.Once
	return hung, func() { once.Do(func() { close(done) }) }
}
