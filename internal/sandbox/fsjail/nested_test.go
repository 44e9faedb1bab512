//go:build unix

package fsjail

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

const protectedContent = "protected: only the ro grant's view\n"

// nestedFixture is a read-write workspace with a read-only grant inside it,
// and a read-write grant inside that:
//
//	ws/             rw at /ws: hello.txt, victim.txt, emptydir/,
//	                plink -> protected, flink -> protected/config
//	ws/protected/   ro at /ws/protected: config, sub/, emptysub/
//	ws/protected/scratch/  rw at /ws/protected/scratch
type nestedFixture struct {
	ws, protected, config string
	jail                  *Jail
	work, prot, scratch   experimentalsys.FS
	mtime                 time.Time
}

func newNestedFixture(t *testing.T) *nestedFixture {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	fx := &nestedFixture{ws: ws, protected: filepath.Join(ws, "protected")}
	fx.config = filepath.Join(fx.protected, "config")
	mkdir(t, ws, "emptydir")
	mkdir(t, fx.protected, "sub")
	mkdir(t, fx.protected, "emptysub")
	mkdir(t, fx.protected, "scratch")
	writeFile(t, ws, "hello.txt", helloContent, 0o644)
	writeFile(t, ws, "victim.txt", helloContent, 0o644)
	writeFile(t, fx.protected, "config", protectedContent, 0o644)
	writeFile(t, fx.protected, "sub/inner", protectedContent, 0o644)
	symlink(t, "protected", ws, "plink")
	symlink(t, "protected/config", ws, "flink")
	fx.mtime = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := os.Chtimes(fx.config, fx.mtime, fx.mtime); err != nil {
		t.Fatal(err)
	}
	j, err := New([]Mount{
		{HostPath: ws, GuestPath: "/ws"},
		{HostPath: fx.protected, GuestPath: "/ws/protected", ReadOnly: true},
		{HostPath: filepath.Join(fx.protected, "scratch"), GuestPath: "/ws/protected/scratch"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	fx.jail = j
	fx.work, _ = j.FS("/ws")
	fx.prot, _ = j.FS("/ws/protected")
	fx.scratch, _ = j.FS("/ws/protected/scratch")
	t.Cleanup(func() { fx.checkUntouched(t) })
	return fx
}

// checkUntouched asserts that the read-only area is as the fixture made it.
func (fx *nestedFixture) checkUntouched(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(fx.config)
	if err != nil || string(b) != protectedContent {
		t.Errorf("protected/config now %q, %v", b, err)
	}
	if fi, err := os.Stat(fx.config); err != nil {
		t.Errorf("protected/config: %v", err)
	} else if !fi.ModTime().Equal(fx.mtime) || fi.Mode().Perm() != 0o644 {
		t.Errorf("protected/config's metadata changed: %v %v", fi.ModTime(), fi.Mode())
	}
	entries, err := os.ReadDir(fx.protected)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if err != nil || fmt.Sprint(names) != "[config emptysub scratch sub]" {
		t.Errorf("protected/ now holds %v, %v", names, err)
	}
	if b, err := os.ReadFile(filepath.Join(fx.protected, "sub/inner")); err != nil || string(b) != protectedContent {
		t.Errorf("protected/sub/inner now %q, %v", b, err)
	}
}

// TestNestedReadOnlyWins: with the workspace read-write and a directory in
// it read-only, no mutation reaches the read-only directory through the
// workspace's mount, by its name, through symlinks or "..". Each refusal
// has a control: the same call on a path of the workspace succeeds.
func TestNestedReadOnlyWins(t *testing.T) {
	erofs := experimentalsys.EROFS
	ok := experimentalsys.Errno(0)
	open := func(name string, flag experimentalsys.Oflag) func(*nestedFixture) experimentalsys.Errno {
		return func(fx *nestedFixture) experimentalsys.Errno { return openErrno(fx.work, name, flag) }
	}
	onFile := func(name string, do func(experimentalsys.File) experimentalsys.Errno) func(*nestedFixture) experimentalsys.Errno {
		return func(fx *nestedFixture) experimentalsys.Errno {
			f, errno := fx.work.OpenFile(name, oRDONLY, 0)
			if errno != 0 {
				return errno
			}
			defer f.Close()
			return do(f)
		}
	}
	type step struct {
		what string
		do   func(fx *nestedFixture) experimentalsys.Errno
		want experimentalsys.Errno
	}
	cases := []struct {
		name    string
		refused []step
		control step
	}{
		{"open for write", []step{
			{"O_WRONLY protected/config", open("protected/config", oWRONLY), erofs},
			{"O_RDWR /protected/config", open("/protected/config", oRDWR), erofs},
			{"O_APPEND protected/config", open("protected/config", oWRONLY|experimentalsys.O_APPEND), erofs},
			{"through a dir symlink", open("plink/config", oWRONLY), erofs},
			{"through a file symlink", open("flink", oRDWR), erofs},
			{"through ..", open("emptydir/../protected/config", oWRONLY), erofs},
			{"through ../plink", open("emptydir/../plink/sub/inner", oWRONLY), erofs},
		}, step{"O_WRONLY hello.txt", open("hello.txt", oWRONLY), ok}},
		{"create", []step{
			{"protected/new", open("protected/new", oWRONLY|oCREAT), erofs},
			{"plink/new", open("plink/new", oWRONLY|oCREAT), erofs},
			{"protected/sub/new", open("protected/sub/new", oWRONLY|oCREAT|experimentalsys.O_EXCL), erofs},
		}, step{"new", open("new", oWRONLY|oCREAT), ok}},
		{"truncate", []step{
			{"O_TRUNC protected/config", open("protected/config", oWRONLY|oTRUNC), erofs},
			{"O_TRUNC flink", open("flink", oWRONLY|oTRUNC), erofs},
			{"ftruncate a read-only open", onFile("protected/config", func(f experimentalsys.File) experimentalsys.Errno { return f.Truncate(0) }), erofs},
		}, step{"O_TRUNC victim.txt", open("victim.txt", oWRONLY|oTRUNC), ok}},
		{"set times", []step{
			{"path protected/config", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Utimens("protected/config", 0, 0) }, erofs},
			{"path flink", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Utimens("flink", 0, 0) }, erofs},
			{"path protected (the root)", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Utimens("protected", 0, 0) }, erofs},
			{"descriptor", onFile("plink/config", func(f experimentalsys.File) experimentalsys.Errno { return f.Utimens(0, 0) }), erofs},
		}, step{"hello.txt", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Utimens("hello.txt", 0, 0) }, ok}},
		{"chmod", []step{
			{"protected/config", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Chmod("protected/config", 0o777) }, erofs},
			{"flink", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Chmod("flink", 0o777) }, erofs},
		}, step{"hello.txt", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Chmod("hello.txt", 0o600) }, ok}},
		{"unlink", []step{
			{"protected/config", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Unlink("protected/config") }, erofs},
			{"plink/sub/inner", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Unlink("plink/sub/inner") }, erofs},
		}, step{"victim.txt", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Unlink("victim.txt") }, ok}},
		{"rename", []step{
			{"out of protected", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Rename("protected/config", "stolen") }, erofs},
			{"into protected", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Rename("hello.txt", "protected/hello") }, erofs},
			{"over protected/config", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Rename("victim.txt", "plink/config") }, erofs},
			{"the read-only root away", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Rename("protected", "moved") }, erofs},
			{"over the read-only root", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Rename("emptydir", "protected") }, erofs},
			{"inside protected", func(fx *nestedFixture) experimentalsys.Errno {
				return fx.work.Rename("protected/sub", "protected/sub2")
			}, erofs},
		}, step{"victim.txt to moved.txt", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Rename("victim.txt", "moved.txt") }, ok}},
		{"mkdir", []step{
			{"protected/d", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Mkdir("protected/d", 0o755) }, erofs},
			{"plink/sub/d", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Mkdir("plink/sub/d", 0o755) }, erofs},
		}, step{"d", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Mkdir("d", 0o755) }, ok}},
		{"rmdir", []step{
			{"protected/emptysub", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Rmdir("protected/emptysub") }, erofs},
			{"plink/emptysub", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Rmdir("plink/emptysub") }, erofs},
		}, step{"emptydir", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Rmdir("emptydir") }, ok}},
		{"symlink", []step{
			{"protected/sl", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Symlink("config", "protected/sl") }, erofs},
			{"plink/sl", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Symlink("config", "plink/sl") }, erofs},
		}, step{"sl", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Symlink("hello.txt", "sl") }, ok}},
		{"link", []step{
			{"out of protected", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Link("protected/config", "stolen") }, erofs},
			{"out through plink", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Link("plink/config", "stolen") }, erofs},
			{"into protected", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Link("hello.txt", "protected/h") }, erofs},
		}, step{"hello.txt to h", func(fx *nestedFixture) experimentalsys.Errno { return fx.work.Link("hello.txt", "h") }, ok}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fx := newNestedFixture(t)
			for _, s := range tc.refused {
				wantErrno(t, s.what, s.do(fx), s.want)
			}
			wantErrno(t, "control: "+tc.control.what, tc.control.do(fx), tc.control.want)
		})
	}
}

// TestNestedInnermostWins: a read-write grant inside the read-only one is
// writable again, through any mount above it; reads of the read-only area
// work through the workspace.
func TestNestedInnermostWins(t *testing.T) {
	fx := newNestedFixture(t)
	wantErrno(t, "create protected/scratch/a via the workspace", openErrno(fx.work, "protected/scratch/a", oWRONLY|oCREAT), 0)
	wantErrno(t, "create plink/scratch/b via the workspace", openErrno(fx.work, "plink/scratch/b", oWRONLY|oCREAT), 0)
	wantErrno(t, "mkdir protected/scratch/d", fx.work.Mkdir("protected/scratch/d", 0o755), 0)
	wantErrno(t, "create c in the scratch mount", openErrno(fx.scratch, "c", oWRONLY|oCREAT), 0)
	wantErrno(t, "create through the read-only mount", openErrno(fx.prot, "scratch/e", oWRONLY|oCREAT), experimentalsys.EROFS)
	wantErrno(t, "read protected/config via the workspace", readIs(fx.work, "protected/config", protectedContent), 0)
	wantErrno(t, "read flink", readIs(fx.work, "flink", protectedContent), 0)
	for _, name := range []string{"a", "b", "c", "d"} {
		if _, err := os.Lstat(filepath.Join(fx.protected, "scratch", name)); err != nil {
			t.Errorf("scratch/%s: %v", name, err)
		}
	}
}

// TestNestedThroughWASI: a WASI guest writes the read-only directory
// through the workspace's pre-open, by a symlink (a path under the
// read-only pre-open would go to that one), and is refused; the same guest
// writes the workspace.
func TestNestedThroughWASI(t *testing.T) {
	fx := newNestedFixture(t)
	results, raw := runGuest(t, fx.jail.FSConfig(), []string{
		"write|/ws/plink/config|pwned",
		"write|/ws/flink|pwned",
		"write|/ws/protected/config|pwned",
		"truncate|/ws/plink/config",
		"remove|/ws/plink/config",
		"rename|/ws/plink/config|/ws/stolen",
		"mkdir|/ws/plink/d",
		"chtimes|/ws/plink/config",
		"write|/ws/ok.txt|fine",
		"write|/ws/plink/scratch/ok.txt|fine",
	})
	for i, want := range []string{
		"ERR " + guestEROFS, "ERR " + guestEROFS, "ERR " + guestEROFS, "ERR " + guestEROFS, "ERR " + guestEROFS,
		"ERR " + guestEROFS, "ERR " + guestEROFS, "ERR " + guestEROFS, "OK", "OK",
	} {
		if !strings.HasPrefix(results[i], want[:2]) || (want[:2] == "ER" && !strings.Contains(results[i], want[4:])) {
			t.Errorf("guest command %d: %q, want %q\n%s", i, results[i], want, raw)
		}
	}
}

// TestNestedOnlyWhenBelow: only a mount with another mount's root below it
// takes the checked path; side-by-side mounts keep the plain one.
func TestNestedOnlyWhenBelow(t *testing.T) {
	fx := newNestedFixture(t)
	if !fx.work.(*rootFS).hasNested() || fx.prot.(*rootFS).hasNested() || fx.scratch.(*rootFS).hasNested() {
		t.Errorf("hasNested: ws %v, protected %v, scratch %v; want true, false, false",
			fx.work.(*rootFS).hasNested(), fx.prot.(*rootFS).hasNested(), fx.scratch.(*rootFS).hasNested())
	}
	side := newFixture(t) // /work, /ro and /other side by side
	for _, fs := range []experimentalsys.FS{side.work, side.ro, side.other} {
		if fs.(*rootFS).hasNested() {
			t.Errorf("%v has nested mounts; want none", fs)
		}
	}
}
