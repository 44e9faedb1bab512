//go:build unix

package fsjail

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

const (
	oRDONLY    = experimentalsys.O_RDONLY
	oWRONLY    = experimentalsys.O_WRONLY
	oRDWR      = experimentalsys.O_RDWR
	oCREAT     = experimentalsys.O_CREAT
	oTRUNC     = experimentalsys.O_TRUNC
	oDIRECTORY = experimentalsys.O_DIRECTORY
	oNOFOLLOW  = experimentalsys.O_NOFOLLOW
)

// openErrno opens name, closing the file if that unexpectedly succeeds.
func openErrno(fsys experimentalsys.FS, name string, flag experimentalsys.Oflag) experimentalsys.Errno {
	f, errno := fsys.OpenFile(name, flag, 0o644)
	if errno == 0 {
		f.Close()
	}
	return errno
}

func statErrno(fsys experimentalsys.FS, name string) experimentalsys.Errno {
	_, errno := fsys.Stat(name)
	return errno
}

// TestEscapes tries every known way out of a root through the sys.FS API.
// Each case runs on a fresh fixture, whose cleanup asserts that the canary
// and the rest of the outside tree are unchanged.
func TestEscapes(t *testing.T) {
	type step struct {
		what string
		do   func(fx *fixture) experimentalsys.Errno
		want experimentalsys.Errno
	}
	open := func(name string, flag experimentalsys.Oflag) func(*fixture) experimentalsys.Errno {
		return func(fx *fixture) experimentalsys.Errno { return openErrno(fx.work, name, flag) }
	}
	stat := func(name string) func(*fixture) experimentalsys.Errno {
		return func(fx *fixture) experimentalsys.Errno { return statErrno(fx.work, name) }
	}
	ok := experimentalsys.Errno(0)
	eperm := experimentalsys.EPERM
	enoent := experimentalsys.ENOENT

	tests := []struct {
		name  string
		steps []step
	}{
		{"dotdot", []step{
			{"open ../outside/canary.txt", open("../outside/canary.txt", oRDONLY), eperm},
			{"stat ../outside", stat("../outside"), eperm},
			{"open ../ chain", open("../../../../../../../../../etc/passwd", oRDONLY), eperm},
			{"open sub/../../outside/canary.txt", open("sub/../../outside/canary.txt", oRDONLY), eperm},
			{"open ../root/hello.txt (re-entering)", open("../root/hello.txt", oRDONLY), eperm},
			{"list ..", open("..", oRDONLY|oDIRECTORY), eperm},
			{"lstat ../outside/outlink", func(fx *fixture) experimentalsys.Errno { _, e := fx.work.Lstat("../outside/outlink"); return e }, eperm},
			{"readlink ../outside/outlink", func(fx *fixture) experimentalsys.Errno { _, e := fx.work.Readlink("../outside/outlink"); return e }, eperm},
		}},
		// wazero's sys.FS names are relative to the mount: a leading "/"
		// is the mount's root (wazero passes "/name" for names relative
		// to a directory the guest opened as "."). So host paths resolve
		// inside the root, where none of them exist; the fixture's cleanup
		// checks that nothing outside changed.
		{"absolute paths stay in the root", []step{
			{"open /etc/passwd", open("/etc/passwd", oRDONLY), enoent},
			{"open canary by host path", func(fx *fixture) experimentalsys.Errno { return openErrno(fx.work, fx.canaryPath, oRDONLY) }, enoent},
			{"open root by host path", func(fx *fixture) experimentalsys.Errno {
				return openErrno(fx.work, filepath.Join(fx.rootDir, "hello.txt"), oRDONLY)
			}, enoent},
			{"stat /proc/self", stat("/proc/self"), enoent},
			{"open /proc/self/status", open("/proc/self/status", oRDONLY), enoent},
			{"stat proc/self (relative)", stat("proc/self"), enoent},
			{"/hello.txt is the root's hello.txt", func(fx *fixture) experimentalsys.Errno {
				return readIs(fx.work, "/hello.txt", helloContent)
			}, ok},
			{"/sub/../hello.txt too", func(fx *fixture) experimentalsys.Errno {
				return readIs(fx.work, "/sub/../hello.txt", helloContent)
			}, ok},
			{"/.. still escapes", open("/..", oRDONLY|oDIRECTORY), eperm},
			{"//../outside/canary.txt still escapes", open("//../outside/canary.txt", oRDONLY), eperm},
			{"/rel-out still refused", open("/rel-out", oRDONLY), eperm},
			{"unlink /../outside/victim.txt", func(fx *fixture) experimentalsys.Errno { return fx.work.Unlink("/../outside/victim.txt") }, eperm},
			{"rename /../outside/canary.txt in", func(fx *fixture) experimentalsys.Errno { return fx.work.Rename("/../outside/canary.txt", "/stolen") }, eperm},
			{"link /../outside/canary.txt in", func(fx *fixture) experimentalsys.Errno { return fx.work.Link("/../outside/canary.txt", "/hard") }, eperm},
			{"list /", open("/", oRDONLY|oDIRECTORY), ok},
			{"unlink canary by host path", func(fx *fixture) experimentalsys.Errno { return fx.work.Unlink(fx.canaryPath) }, enoent},
			{"rmdir by host path", func(fx *fixture) experimentalsys.Errno {
				return fx.work.Rmdir(filepath.Join(fx.outsideDir, "emptydir"))
			}, enoent},
			{"rename canary by host path", func(fx *fixture) experimentalsys.Errno { return fx.work.Rename(fx.canaryPath, "stolen") }, enoent},
			{"rename to host path", func(fx *fixture) experimentalsys.Errno {
				return fx.work.Rename("hello.txt", filepath.Join(fx.outsideDir, "moved"))
			}, enoent},
		}},
		{"host-made symlinks out", []step{
			{"open relative link out", open("rel-out", oRDONLY), eperm},
			{"open absolute link out", open("abs-out", oRDONLY), eperm},
			{"open link via sub/..", open("deep-out", oRDONLY), eperm},
			{"open link chain out", open("chain1", oRDONLY), eperm},
			{"open relative /proc/self link", open("proc-self/status", oRDONLY), eperm},
			{"open absolute /proc link", open("abs-proc", oRDONLY), eperm},
			{"stat relative link out", stat("rel-out"), eperm},
			{"lstat relative link out (the link itself)", func(fx *fixture) experimentalsys.Errno {
				st, e := fx.work.Lstat("rel-out")
				if e == 0 && st.Mode.Type() != os.ModeSymlink {
					return experimentalsys.EIO
				}
				return e
			}, ok},
			{"truncate through link out", open("rel-out", oWRONLY|oTRUNC), eperm},
			{"write through link out", open("rel-out", oRDWR), eperm},
			{"chmod through link out", func(fx *fixture) experimentalsys.Errno { return fx.work.Chmod("rel-out", 0o777) }, eperm},
			{"utimes through link out", func(fx *fixture) experimentalsys.Errno { return fx.work.Utimens("rel-out", 0, 0) }, eperm},
			{"nofollow open of link out", open("rel-out", oRDONLY|oNOFOLLOW), experimentalsys.ELOOP},
		}},
		{"symlinked dir out", []step{
			{"open dir-out/canary.txt", open("dir-out/canary.txt", oRDONLY), eperm},
			{"open abs-dir-out/canary.txt", open("abs-dir-out/canary.txt", oRDONLY), eperm},
			{"nofollow open dir-out/canary.txt", open("dir-out/canary.txt", oRDONLY|oNOFOLLOW), eperm},
			{"list dir-out", open("dir-out", oRDONLY|oDIRECTORY), eperm},
			{"stat dir-out/canary.txt", stat("dir-out/canary.txt"), eperm},
			{"create in dir-out", open("dir-out/new.txt", oWRONLY|oCREAT), eperm},
			{"mkdir in dir-out", func(fx *fixture) experimentalsys.Errno { return fx.work.Mkdir("dir-out/newdir", 0o755) }, eperm},
			{"unlink in dir-out", func(fx *fixture) experimentalsys.Errno { return fx.work.Unlink("dir-out/victim.txt") }, eperm},
			{"rmdir in dir-out", func(fx *fixture) experimentalsys.Errno { return fx.work.Rmdir("dir-out/emptydir") }, eperm},
			{"rmdir dir-out itself (a symlink)", func(fx *fixture) experimentalsys.Errno { return fx.work.Rmdir("dir-out") }, experimentalsys.ENOTDIR},
			{"rmdir dir-out/ (trailing slash)", func(fx *fixture) experimentalsys.Errno { return fx.work.Rmdir("dir-out/") }, experimentalsys.ENOTDIR},
			{"unlink dir-out/ (trailing slash)", func(fx *fixture) experimentalsys.Errno { return fx.work.Unlink("dir-out/") }, experimentalsys.ENOTDIR},
			{"rename into dir-out", func(fx *fixture) experimentalsys.Errno { return fx.work.Rename("hello.txt", "dir-out/moved.txt") }, eperm},
			{"rename out of dir-out", func(fx *fixture) experimentalsys.Errno { return fx.work.Rename("dir-out/canary.txt", "stolen.txt") }, eperm},
			{"link out of dir-out", func(fx *fixture) experimentalsys.Errno { return fx.work.Link("dir-out/canary.txt", "hard") }, eperm},
			{"link into dir-out", func(fx *fixture) experimentalsys.Errno { return fx.work.Link("hello.txt", "dir-out/hard") }, eperm},
			{"symlink into dir-out", func(fx *fixture) experimentalsys.Errno { return fx.work.Symlink("x", "dir-out/sl") }, eperm},
			{"readlink in dir-out", func(fx *fixture) experimentalsys.Errno { _, e := fx.work.Readlink("dir-out/outlink"); return e }, eperm},
			{"chmod in dir-out", func(fx *fixture) experimentalsys.Errno { return fx.work.Chmod("dir-out/canary.txt", 0o777) }, eperm},
			{"utimes in dir-out", func(fx *fixture) experimentalsys.Errno { return fx.work.Utimens("dir-out/canary.txt", 0, 0) }, eperm},
		}},
		{"guest-made symlinks out", []step{
			{"symlink ../outside/canary.txt", func(fx *fixture) experimentalsys.Errno { return fx.work.Symlink("../outside/canary.txt", "g-out") }, ok},
			{"readlink returns the text", func(fx *fixture) experimentalsys.Errno {
				if s, e := fx.work.Readlink("g-out"); e != 0 || s != "../outside/canary.txt" {
					return experimentalsys.EIO
				}
				return 0
			}, ok},
			{"open it", open("g-out", oRDONLY), eperm},
			{"write through it", open("g-out", oWRONLY|oTRUNC), eperm},
			{"symlink ../../../../etc/passwd", func(fx *fixture) experimentalsys.Errno { return fx.work.Symlink("../../../../etc/passwd", "sub/evil") }, ok},
			{"open it", open("sub/evil", oRDONLY), eperm},
			{"symlink to absolute path refused", func(fx *fixture) experimentalsys.Errno { return fx.work.Symlink("/etc/passwd", "g-abs") }, eperm},
			{"absolute symlink not created", func(fx *fixture) experimentalsys.Errno { _, e := fx.work.Lstat("g-abs"); return e }, experimentalsys.ENOENT},
			{"dangling link out", func(fx *fixture) experimentalsys.Errno { return fx.work.Symlink("../outside/created.txt", "dangle") }, ok},
			{"create through dangling link out", open("dangle", oWRONLY|oCREAT), eperm},
			{"exclusive create through dangling link", open("dangle", oWRONLY|oCREAT|experimentalsys.O_EXCL), experimentalsys.EEXIST},
			{"dir link out", func(fx *fixture) experimentalsys.Errno { return fx.work.Symlink("../outside", "g-dir") }, ok},
			{"create in it", open("g-dir/new.txt", oWRONLY|oCREAT), eperm},
			{"mkdir in it", func(fx *fixture) experimentalsys.Errno { return fx.work.Mkdir("g-dir/d", 0o755) }, eperm},
			{"unlink in it", func(fx *fixture) experimentalsys.Errno { return fx.work.Unlink("g-dir/victim.txt") }, eperm},
			{"rename out through it", func(fx *fixture) experimentalsys.Errno { return fx.work.Rename("g-dir/victim.txt", "v") }, eperm},
			{"list it", open("g-dir", oRDONLY|oDIRECTORY), eperm},
			{"link to a link out", func(fx *fixture) experimentalsys.Errno { return fx.work.Symlink("g-out", "sub/hop") }, ok},
			{"open two hops", open("sub/hop", oRDONLY), experimentalsys.ENOENT}, // sub/g-out does not exist
			{"relative hop", func(fx *fixture) experimentalsys.Errno { return fx.work.Symlink("../g-out", "sub/hop2") }, ok},
			{"open relative hop", open("sub/hop2", oRDONLY), eperm},
		}},
		{"hard links", []step{
			{"link to outside file", func(fx *fixture) experimentalsys.Errno { return fx.work.Link("../outside/canary.txt", "hard") }, eperm},
			{"link to outside by host path", func(fx *fixture) experimentalsys.Errno { return fx.work.Link(fx.canaryPath, "hard") }, enoent},
			{"link to link out links the symlink", func(fx *fixture) experimentalsys.Errno { return fx.work.Link("rel-out", "hard") }, ok},
			{"which is still refused", open("hard", oRDONLY), eperm},
			{"and is a symlink", func(fx *fixture) experimentalsys.Errno {
				st, e := fx.work.Lstat("hard")
				if e == 0 && st.Mode.Type() != os.ModeSymlink {
					return experimentalsys.EIO
				}
				return e
			}, ok},
			{"link out from inside", func(fx *fixture) experimentalsys.Errno { return fx.work.Link("hello.txt", "../outside/hard") }, eperm},
		}},
		{"rename", []step{
			{"rename out of root", func(fx *fixture) experimentalsys.Errno { return fx.work.Rename("hello.txt", "../outside/moved.txt") }, eperm},
			{"rename into root", func(fx *fixture) experimentalsys.Errno { return fx.work.Rename("../outside/canary.txt", "stolen.txt") }, eperm},
			{"rename to another mount's host dir", func(fx *fixture) experimentalsys.Errno { return fx.work.Rename("hello.txt", "../other/moved.txt") }, eperm},
			{"rename from another mount's host dir", func(fx *fixture) experimentalsys.Errno { return fx.work.Rename("../other/o.txt", "o.txt") }, eperm},
			{"rename the root away", func(fx *fixture) experimentalsys.Errno { return fx.work.Rename(".", "moved") }, experimentalsys.EINVAL},
			{"rename over the parent", func(fx *fixture) experimentalsys.Errno { return fx.work.Rename("sub", "..") }, experimentalsys.EINVAL},
			{"rename a link out (moves the link)", func(fx *fixture) experimentalsys.Errno { return fx.work.Rename("rel-out", "moved-link") }, ok},
			{"moved link still refused", open("moved-link", oRDONLY), eperm},
			{"moved down, it resolves elsewhere inside", func(fx *fixture) experimentalsys.Errno { return fx.work.Rename("moved-link", "sub/moved-link") }, ok},
			{"and finds nothing there", open("sub/moved-link", oRDONLY), experimentalsys.ENOENT},
		}},
		{"removal", []step{
			{"unlink outside file", func(fx *fixture) experimentalsys.Errno { return fx.work.Unlink("../outside/victim.txt") }, eperm},
			{"rmdir outside dir", func(fx *fixture) experimentalsys.Errno { return fx.work.Rmdir("../outside/emptydir") }, eperm},
			{"rmdir the root", func(fx *fixture) experimentalsys.Errno { return fx.work.Rmdir(".") }, experimentalsys.EINVAL},
			{"rmdir ..", func(fx *fixture) experimentalsys.Errno { return fx.work.Rmdir("emptysub/..") }, experimentalsys.ENOTEMPTY},
			{"unlink ..", func(fx *fixture) experimentalsys.Errno { return fx.work.Unlink("sub/..") }, experimentalsys.EISDIR},
			{"unlink link out removes only the link", func(fx *fixture) experimentalsys.Errno { return fx.work.Unlink("rel-out") }, ok},
			{"unlink dir link out removes only the link", func(fx *fixture) experimentalsys.Errno { return fx.work.Unlink("dir-out") }, ok},
		}},
		{"mkdir and symlink outside", []step{
			{"mkdir ../escape", func(fx *fixture) experimentalsys.Errno { return fx.work.Mkdir("../escape", 0o755) }, eperm},
			{"symlink at ../escape", func(fx *fixture) experimentalsys.Errno { return fx.work.Symlink("hello.txt", "../escape") }, eperm},
			{"create ../escape", open("../escape", oWRONLY|oCREAT), eperm},
		}},
		{"loops", []step{
			{"open loop", open("loop1", oRDONLY), experimentalsys.ELOOP},
			{"stat loop", stat("loop2"), experimentalsys.ELOOP},
			{"guest-made self loop", func(fx *fixture) experimentalsys.Errno { return fx.work.Symlink("self", "self") }, ok},
			{"open self loop", open("self", oRDONLY), experimentalsys.ELOOP},
			{"create through self loop", open("self", oWRONLY|oCREAT), experimentalsys.ELOOP},
		}},
		{"other mounts stay apart", []step{
			{"ro mount cannot reach work", func(fx *fixture) experimentalsys.Errno { return openErrno(fx.ro, "../root/hello.txt", oRDONLY) }, eperm},
			{"other mount cannot reach outside", func(fx *fixture) experimentalsys.Errno { return openErrno(fx.other, "../outside/canary.txt", oRDONLY) }, eperm},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t)
			for _, s := range tc.steps {
				wantErrno(t, s.what, s.do(fx), s.want)
			}
		})
	}
}

// readIs reads name whole and reports EIO unless it holds want.
func readIs(fsys experimentalsys.FS, name, want string) experimentalsys.Errno {
	f, errno := fsys.OpenFile(name, oRDONLY, 0)
	if errno != 0 {
		return errno
	}
	defer f.Close()
	buf := make([]byte, len(want)+16)
	n, errno := f.Read(buf)
	if errno != 0 {
		return errno
	}
	if string(buf[:n]) != want {
		return experimentalsys.EIO
	}
	return 0
}

// TestEscapeReadsNeverSeeCanary reads every readable name in the root,
// including every symlink, and checks no content is the canary's.
func TestEscapeReadsNeverSeeCanary(t *testing.T) {
	fx := newFixture(t)
	d, errno := fx.work.OpenFile(".", oRDONLY|oDIRECTORY, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer d.Close()
	entries, errno := d.Readdir(-1)
	if errno != 0 {
		t.Fatal(errno)
	}
	if len(entries) < 10 {
		t.Fatalf("listed only %d entries", len(entries))
	}
	for _, e := range entries {
		for _, name := range []string{e.Name, e.Name + "/canary.txt", e.Name + "/status", e.Name + "/secretdir/secret.txt"} {
			content, errno := readPath(fx.work, name)
			if errno == 0 && strings.Contains(content, "CANARY") {
				t.Errorf("read canary content through %q", name)
			}
		}
	}
}

// TestSymlinkSwapRace flips symlinks between an inside and an outside target
// while another goroutine resolves paths through them. os.Root resolves every
// component itself, so no interleaving may reach the outside tree.
func TestSymlinkSwapRace(t *testing.T) {
	fx := newFixture(t)
	writeFile(t, fx.rootDir, "inside.txt", helloContent, 0o644)
	if errno := fx.work.Symlink("inside.txt", "flip"); errno != 0 {
		t.Fatal(errno)
	}
	if errno := fx.work.Symlink("sub", "flipdir"); errno != 0 {
		t.Fatal(errno)
	}

	// The flipper is the attacking guest: it swaps the links atomically
	// through the jail's own API (symlink + rename over).
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var flips atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		files := [2]string{"inside.txt", "../outside/canary.txt"}
		dirs := [2]string{"sub", "../outside"}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = fx.work.Unlink("flip.tmp")
			_ = fx.work.Unlink("flipdir.tmp")
			if e := fx.work.Symlink(files[i%2], "flip.tmp"); e != 0 {
				t.Errorf("flipper symlink: %v", e)
				return
			}
			if e := fx.work.Symlink(dirs[i%2], "flipdir.tmp"); e != 0 {
				t.Errorf("flipper symlink: %v", e)
				return
			}
			if e := fx.work.Rename("flip.tmp", "flip"); e != 0 {
				t.Errorf("flipper rename: %v", e)
				return
			}
			if e := fx.work.Rename("flipdir.tmp", "flipdir"); e != 0 {
				t.Errorf("flipper rename: %v", e)
				return
			}
			flips.Add(1)
		}
	}()

	refused := func(e experimentalsys.Errno) bool {
		return e == experimentalsys.EPERM || e == experimentalsys.ENOENT || e == experimentalsys.ELOOP
	}
	var insideReads, refusals int
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < 20000 && (i < 1500 || insideReads == 0 || refusals == 0) && time.Now().Before(deadline); i++ {
		f, errno := fx.work.OpenFile("flip", oRDONLY, 0)
		switch {
		case errno == 0:
			content := readAll(t, f)
			f.Close()
			if content != helloContent {
				t.Fatalf("iteration %d: read %q through flip", i, content)
			}
			insideReads++
		case refused(errno):
			refusals++
		default:
			t.Fatalf("iteration %d: open flip: unexpected errno %v", i, errno)
		}

		if st, errno := fx.work.Stat("flipdir/canary.txt"); errno == 0 {
			t.Fatalf("iteration %d: stat flipdir/canary.txt succeeded: %+v", i, st)
		} else if !refused(errno) {
			t.Fatalf("iteration %d: stat: unexpected errno %v", i, errno)
		}
		if _, errno := readPath(fx.work, "flipdir/secretdir/secret.txt"); errno == 0 || !refused(errno) {
			t.Fatalf("iteration %d: read flipdir/secretdir/secret.txt: errno %v", i, errno)
		}
		// Mutations through the flipping directory: whenever they succeed
		// they must have landed in sub/, which the cleanup's outside-tree
		// comparison and the checks below confirm.
		if f, errno := fx.work.OpenFile("flipdir/created.txt", oWRONLY|oCREAT, 0o644); errno == 0 {
			f.Close()
		} else if !refused(errno) {
			t.Fatalf("iteration %d: create: unexpected errno %v", i, errno)
		}
		if errno := fx.work.Unlink("flipdir/victim.txt"); errno != 0 && !refused(errno) {
			t.Fatalf("iteration %d: unlink: unexpected errno %v", i, errno)
		}
		if errno := fx.work.Utimens("flip", 0, 0); errno != 0 && !refused(errno) {
			t.Fatalf("iteration %d: utimens: unexpected errno %v", i, errno)
		}
		if errno := fx.work.Chmod("flipdir/canary.txt", 0o777); errno == 0 {
			t.Fatalf("iteration %d: chmod flipdir/canary.txt succeeded", i)
		}
		if errno := openErrno(fx.work, "flip", oRDONLY|oNOFOLLOW); errno != experimentalsys.ELOOP {
			t.Fatalf("iteration %d: nofollow open of flip: errno %v, want ELOOP", i, errno)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d inside reads, %d refusals, %d flips", insideReads, refusals, flips.Load())
	if insideReads == 0 || refusals == 0 {
		t.Errorf("race never hit both states (%d inside reads, %d refusals)", insideReads, refusals)
	}
	if _, err := os.Stat(filepath.Join(fx.outsideDir, "created.txt")); !os.IsNotExist(err) {
		t.Errorf("created.txt appeared outside: %v", err)
	}
}
