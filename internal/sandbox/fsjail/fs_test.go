//go:build unix

package fsjail

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
	"golang.org/x/sys/unix"
)

func TestNewValidation(t *testing.T) {
	base := t.TempDir()
	dirA := filepath.Join(base, "a")
	mkdir(t, base, "a")
	writeFile(t, base, "file.txt", "x", 0o644)

	tests := []struct {
		name   string
		mounts []Mount
		want   error
	}{
		{"empty guest path", []Mount{{HostPath: dirA, GuestPath: ""}}, ErrInvalidGuestPath},
		{"relative guest path", []Mount{{HostPath: dirA, GuestPath: "work"}}, ErrInvalidGuestPath},
		{"unclean guest path", []Mount{{HostPath: dirA, GuestPath: "/work/../etc"}}, ErrInvalidGuestPath},
		{"trailing slash", []Mount{{HostPath: dirA, GuestPath: "/work/"}}, ErrInvalidGuestPath},
		{"NUL in guest path", []Mount{{HostPath: dirA, GuestPath: "/wo\x00rk"}}, ErrInvalidGuestPath},
		{"duplicate guest path", []Mount{{HostPath: dirA, GuestPath: "/work"}, {HostPath: dirA, GuestPath: "/work", ReadOnly: true}}, ErrDuplicateGuestPath},
		{"missing host path", []Mount{{HostPath: filepath.Join(base, "missing"), GuestPath: "/work"}}, fs.ErrNotExist},
		{"empty host path", []Mount{{HostPath: "", GuestPath: "/work"}}, fs.ErrNotExist},
		{"host path is a file", []Mount{{HostPath: filepath.Join(base, "file.txt"), GuestPath: "/work"}}, ErrNotDirectory},
		{"second mount bad", []Mount{{HostPath: dirA, GuestPath: "/a"}, {HostPath: filepath.Join(base, "file.txt"), GuestPath: "/b"}}, ErrNotDirectory},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j, err := New(tc.mounts)
			if err == nil {
				j.Close()
				t.Fatal("New succeeded")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("New: %v, want errors.Is %v", err, tc.want)
			}
		})
	}

	t.Run("valid", func(t *testing.T) {
		mounts := []Mount{
			{HostPath: dirA, GuestPath: "/"},
			{HostPath: dirA, GuestPath: "/work", ReadOnly: true},
		}
		j, err := New(mounts)
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		if got := j.Mounts(); !slices.Equal(got, mounts) {
			t.Errorf("Mounts() = %v", got)
		}
		if _, ok := j.FS("/work"); !ok {
			t.Error("FS(/work) missing")
		}
		if _, ok := j.FS("/other"); ok {
			t.Error("FS(/other) found")
		}
		if j.FSConfig() == nil {
			t.Error("FSConfig is nil")
		}
		if _, err := j.AddTo(foreignFSConfig{wazero.NewFSConfig()}); !errors.Is(err, ErrUnsupportedFSConfig) {
			t.Errorf("AddTo(foreign): %v", err)
		}
		if cfg, err := j.AddTo(wazero.NewFSConfig().WithDirMount(dirA, "/extra")); err != nil || cfg == nil {
			t.Errorf("AddTo: %v", err)
		}
	})

	t.Run("no mounts", func(t *testing.T) {
		j, err := New(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// foreignFSConfig implements wazero.FSConfig but not sysfs.FSConfig.
type foreignFSConfig struct{ wazero.FSConfig }

func TestClose(t *testing.T) {
	fx := newFixture(t)
	f, errno := fx.work.OpenFile("hello.txt", oRDONLY, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer f.Close()
	if err := fx.jail.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fx.jail.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// Already open files keep working.
	if got := readAll(t, f); got != helloContent {
		t.Errorf("read after Close: %q", got)
	}
	wantErrno(t, "open after Close", openErrno(fx.work, "hello.txt", oRDONLY), experimentalsys.ENOENT)
	wantErrno(t, "open . after Close", openErrno(fx.work, ".", oRDONLY), experimentalsys.ENOENT)
	wantErrno(t, "stat after Close", statErrno(fx.work, "hello.txt"), experimentalsys.EBADF)
	wantErrno(t, "mkdir after Close", fx.work.Mkdir("d", 0o755), experimentalsys.EBADF)
	wantErrno(t, "unlink after Close", fx.work.Unlink("hello.txt"), experimentalsys.EBADF)
}

func TestErrnos(t *testing.T) {
	fx := newFixture(t)
	w := fx.work
	writeFile(t, fx.rootDir, "full/x", "x", 0o644)
	mkdir(t, fx.rootDir, "empty2")
	mkdir(t, fx.rootDir, "empty3")

	ok := experimentalsys.Errno(0)
	tests := []struct {
		what string
		got  experimentalsys.Errno
		want experimentalsys.Errno
	}{
		{"open missing", openErrno(w, "missing", oRDONLY), experimentalsys.ENOENT},
		{"open empty path", openErrno(w, "", oRDONLY), experimentalsys.ENOENT},
		{"open missing dir component", openErrno(w, "nodir/x", oWRONLY|oCREAT), experimentalsys.ENOENT},
		{"stat missing", statErrno(w, "missing"), experimentalsys.ENOENT},
		{"readlink missing", func() experimentalsys.Errno { _, e := w.Readlink("missing"); return e }(), experimentalsys.ENOENT},
		{"readlink regular file", func() experimentalsys.Errno { _, e := w.Readlink("hello.txt"); return e }(), experimentalsys.EINVAL},
		{"unlink missing", w.Unlink("missing"), experimentalsys.ENOENT},
		{"rmdir missing", w.Rmdir("missing"), experimentalsys.ENOENT},
		{"rename missing", w.Rename("missing", "x"), experimentalsys.ENOENT},
		{"link missing", w.Link("missing", "x"), experimentalsys.ENOENT},

		{"open through a file", openErrno(w, "hello.txt/x", oRDONLY), experimentalsys.ENOTDIR},
		{"open file as directory", openErrno(w, "hello.txt", oRDONLY|oDIRECTORY), experimentalsys.ENOTDIR},
		{"mkdir under a file", w.Mkdir("hello.txt/x", 0o755), experimentalsys.ENOTDIR},
		{"rmdir a file", w.Rmdir("hello.txt"), experimentalsys.ENOTDIR},
		{"unlink file/", w.Unlink("hello.txt/"), experimentalsys.ENOTDIR},
		{"rename file/", w.Rename("hello.txt/", "x"), experimentalsys.ENOTDIR},
		{"rename dir onto file", w.Rename("empty2", "hello.txt"), experimentalsys.ENOTDIR},

		{"open dir for write", openErrno(w, "sub", oWRONLY), experimentalsys.EISDIR},
		{"open dir read-write", openErrno(w, "sub", oRDWR), experimentalsys.EISDIR},
		{"unlink dir", w.Unlink("sub"), experimentalsys.EISDIR},
		{"unlink dir/", w.Unlink("sub/"), experimentalsys.EISDIR},
		{"rename file onto dir", w.Rename("hello.txt", "empty2"), experimentalsys.EISDIR},

		{"mkdir existing", w.Mkdir("sub", 0o755), experimentalsys.EEXIST},
		{"mkdir over a file", w.Mkdir("hello.txt", 0o755), experimentalsys.EEXIST},
		{"exclusive create existing", openErrno(w, "hello.txt", oWRONLY|oCREAT|experimentalsys.O_EXCL), experimentalsys.EEXIST},
		{"symlink over existing", w.Symlink("x", "hello.txt"), experimentalsys.EEXIST},
		{"link over existing", w.Link("hello.txt", "sub/inner.txt"), experimentalsys.EEXIST},

		{"rmdir non-empty", w.Rmdir("full"), experimentalsys.ENOTEMPTY},
		{"rename dir onto non-empty dir", w.Rename("empty2", "full"), experimentalsys.ENOTEMPTY},

		{"open with O_RDWR|O_WRONLY", openErrno(w, "hello.txt", oRDWR|oWRONLY), experimentalsys.EINVAL},
		{"rmdir .", w.Rmdir("."), experimentalsys.EINVAL},
		{"rename dir into itself", w.Rename("sub", "sub/deeper"), experimentalsys.EINVAL},
		{"symlink with NUL", w.Symlink("a\x00b", "nul"), experimentalsys.EINVAL},

		{"link a directory", w.Link("sub", "sublink"), experimentalsys.EPERM},
		{"symlink empty target", w.Symlink("", "empty-target"), experimentalsys.ENOENT},

		{"rename dir over empty dir", w.Rename("empty3", "empty2"), ok},
		{"rename dir/ to new/", w.Rename("empty2/", "empty4/"), ok},
		{"rename to itself", w.Rename("hello.txt", "hello.txt"), ok},
		{"rmdir dir/", w.Rmdir("empty4/"), ok},
	}
	for _, tc := range tests {
		wantErrno(t, tc.what, tc.got, tc.want)
	}

	t.Run("EACCES", func(t *testing.T) {
		// Root ignores permission bits; the open runs on a thread
		// without the capabilities that allow it, so this runs in CI.
		writeFile(t, fx.rootDir, "secret", "s", 0o000)
		var got, control experimentalsys.Errno
		asUnprivileged(t, func() {
			got = openErrno(w, "secret", oRDONLY)
			control = openErrno(w, "hello.txt", oRDONLY)
		})
		wantErrno(t, "open mode 000 file", got, experimentalsys.EACCES)
		wantErrno(t, "open a readable file (control)", control, 0)
	})
}

func TestReadOnlyMount(t *testing.T) {
	fx := newFixture(t)
	r := fx.ro
	erofs := experimentalsys.EROFS
	tests := []struct {
		what string
		got  experimentalsys.Errno
	}{
		{"open write-only", openErrno(r, "data.txt", oWRONLY)},
		{"open read-write", openErrno(r, "data.txt", oRDWR)},
		{"open create", openErrno(r, "new.txt", oRDONLY|oCREAT)},
		{"open truncate", openErrno(r, "data.txt", oRDONLY|oTRUNC)},
		{"open append", openErrno(r, "data.txt", oRDONLY|experimentalsys.O_APPEND)},
		{"open dir for write", openErrno(r, "rosub", oWRONLY|oDIRECTORY)},
		{"mkdir", r.Mkdir("newdir", 0o755)},
		{"rmdir", r.Rmdir("rosub")},
		{"unlink", r.Unlink("data.txt")},
		{"unlink missing", r.Unlink("missing")},
		{"rename", r.Rename("data.txt", "moved.txt")},
		{"link", r.Link("data.txt", "hard.txt")},
		{"symlink", r.Symlink("data.txt", "sl")},
		{"chmod", r.Chmod("data.txt", 0o777)},
		{"utimes", r.Utimens("data.txt", 0, 0)},
	}
	for _, tc := range tests {
		wantErrno(t, tc.what, tc.got, erofs)
	}

	// Reading works, including inside symlinks.
	if got, errno := readPath(r, "data-link"); errno != 0 || got != roContent {
		t.Errorf("read data-link = %q, %v", got, errno)
	}
	f, errno := r.OpenFile("data.txt", oRDONLY, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer f.Close()
	if _, errno := f.Write([]byte("x")); errno != experimentalsys.EBADF {
		t.Errorf("Write on read-only mount: %v, want EBADF", errno)
	}
	if _, errno := f.Pwrite([]byte("x"), 0); errno != experimentalsys.EBADF {
		t.Errorf("Pwrite on read-only mount: %v, want EBADF", errno)
	}
	wantErrno(t, "file Truncate", f.Truncate(0), erofs)
	wantErrno(t, "file Utimens", f.Utimens(0, 0), erofs)
	if got := readAll(t, f); got != roContent {
		t.Errorf("content = %q", got)
	}
}

func TestStat(t *testing.T) {
	fx := newFixture(t)
	if err := os.Link(filepath.Join(fx.rootDir, "hello.txt"), filepath.Join(fx.rootDir, "hello-hard")); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2020, 5, 6, 7, 8, 9, 123456789, time.UTC)
	if err := os.Chtimes(filepath.Join(fx.rootDir, "hello.txt"), mtime, mtime); err != nil {
		t.Fatal(err)
	}

	hostStat := func(name string, follow bool) unix.Stat_t {
		t.Helper()
		var st unix.Stat_t
		p := filepath.Join(fx.rootDir, name)
		stat := unix.Lstat
		if follow {
			stat = unix.Stat
		}
		if err := stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	check := func(what string, got sys.Stat_t, want unix.Stat_t, mode fs.FileMode) {
		t.Helper()
		if got.Mode != mode {
			t.Errorf("%s: mode %v, want %v", what, got.Mode, mode)
		}
		if got.Size != want.Size {
			t.Errorf("%s: size %d, want %d", what, got.Size, want.Size)
		}
		if got.Ino != uint64(want.Ino) || got.Dev != uint64(want.Dev) {
			t.Errorf("%s: dev/ino %d/%d, want %d/%d", what, got.Dev, got.Ino, want.Dev, want.Ino)
		}
		if got.Nlink != uint64(want.Nlink) {
			t.Errorf("%s: nlink %d, want %d", what, got.Nlink, want.Nlink)
		}
		if got.Mtim != unix.TimespecToNsec(want.Mtim) || got.Ctim != unix.TimespecToNsec(want.Ctim) {
			t.Errorf("%s: mtim/ctim %d/%d, want %d/%d", what, got.Mtim, got.Ctim, unix.TimespecToNsec(want.Mtim), unix.TimespecToNsec(want.Ctim))
		}
	}

	st, errno := fx.work.Stat("hello.txt")
	if errno != 0 {
		t.Fatal(errno)
	}
	check("Stat hello.txt", st, hostStat("hello.txt", true), 0o644)
	if st.Nlink != 2 || st.Mtim != mtime.UnixNano() || st.Size != int64(len(helloContent)) {
		t.Errorf("Stat hello.txt: nlink %d mtim %d size %d", st.Nlink, st.Mtim, st.Size)
	}

	st, errno = fx.work.Stat("link-in")
	if errno != 0 {
		t.Fatal(errno)
	}
	check("Stat link-in", st, hostStat("hello.txt", true), 0o644)

	st, errno = fx.work.Lstat("link-in")
	if errno != 0 {
		t.Fatal(errno)
	}
	check("Lstat link-in", st, hostStat("link-in", false), fs.ModeSymlink|0o777)
	if st.Size != int64(len("hello.txt")) {
		t.Errorf("Lstat link-in size %d", st.Size)
	}

	st, errno = fx.work.Stat("dirlink-in")
	if errno != 0 {
		t.Fatal(errno)
	}
	check("Stat dirlink-in", st, hostStat("sub", true), fs.ModeDir|0o755)

	st, errno = fx.work.Stat(".")
	if errno != 0 {
		t.Fatal(errno)
	}
	check("Stat .", st, hostStat(".", true), fs.ModeDir|0o755)

	// File.Stat, Dev, Ino and IsDir agree with FS.Stat.
	f, errno := fx.work.OpenFile("hello-hard", oRDONLY, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer f.Close()
	fst, errno := f.Stat()
	if errno != 0 {
		t.Fatal(errno)
	}
	check("File.Stat", fst, hostStat("hello.txt", true), 0o644)
	if ino, errno := f.Ino(); errno != 0 || ino != fst.Ino {
		t.Errorf("Ino = %d, %v", ino, errno)
	}
	if dev, errno := f.Dev(); errno != 0 || dev != fst.Dev {
		t.Errorf("Dev = %d, %v", dev, errno)
	}
	if isDir, errno := f.IsDir(); errno != 0 || isDir {
		t.Errorf("IsDir = %v, %v", isDir, errno)
	}
}

func TestReaddir(t *testing.T) {
	fx := newFixture(t)
	want := map[string]fs.FileMode{}
	for i := range 40 {
		name := "f" + strconv.Itoa(i)
		writeFile(t, fx.rootDir, "many/"+name, name, 0o644)
		want[name] = 0
	}
	mkdir(t, fx.rootDir, "many/subdir")
	want["subdir"] = fs.ModeDir
	symlink(t, "f0", fx.rootDir, "many/link")
	want["link"] = fs.ModeSymlink
	symlink(t, "../../outside", fx.rootDir, "many/out")
	want["out"] = fs.ModeSymlink

	d, errno := fx.work.OpenFile("many", oRDONLY|oDIRECTORY, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer d.Close()
	if isDir, errno := d.IsDir(); errno != 0 || !isDir {
		t.Fatalf("IsDir = %v, %v", isDir, errno)
	}

	// wazero reads in batches and treats a short batch as the end.
	readBatches := func() map[string]experimentalsys.Dirent {
		t.Helper()
		got := map[string]experimentalsys.Dirent{}
		for {
			batch, errno := d.Readdir(7)
			if errno != 0 {
				t.Fatalf("Readdir: %v", errno)
			}
			for _, e := range batch {
				if _, dup := got[e.Name]; dup {
					t.Fatalf("%q listed twice", e.Name)
				}
				got[e.Name] = e
			}
			if len(batch) < 7 {
				return got
			}
		}
	}
	check := func(got map[string]experimentalsys.Dirent, want map[string]fs.FileMode) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("listed %d entries, want %d", len(got), len(want))
		}
		for name, typ := range want {
			e, ok := got[name]
			if !ok {
				t.Errorf("%q not listed", name)
				continue
			}
			if e.Type != typ {
				t.Errorf("%q: type %v, want %v", name, e.Type, typ)
			}
			var st unix.Stat_t
			if err := unix.Lstat(filepath.Join(fx.rootDir, "many", name), &st); err != nil {
				t.Fatal(err)
			}
			if e.Ino != uint64(st.Ino) {
				t.Errorf("%q: ino %d, want %d", name, e.Ino, st.Ino)
			}
		}
	}
	check(readBatches(), want)
	if batch, errno := d.Readdir(7); errno != 0 || len(batch) != 0 {
		t.Errorf("Readdir at end = %v, %v", batch, errno)
	}

	// Rewinding shows entries created after the directory was opened and
	// hides removed ones.
	writeFile(t, fx.rootDir, "many/late", "late", 0o644)
	want["late"] = 0
	if err := os.Remove(filepath.Join(fx.rootDir, "many/f3")); err != nil {
		t.Fatal(err)
	}
	delete(want, "f3")
	if _, errno := d.Seek(0, io.SeekStart); errno != 0 {
		t.Fatalf("Seek: %v", errno)
	}
	check(readBatches(), want)

	if _, errno := d.Seek(0, io.SeekStart); errno != 0 {
		t.Fatalf("Seek: %v", errno)
	}
	all, errno := d.Readdir(-1)
	if errno != 0 || len(all) != len(want) {
		t.Errorf("Readdir(-1) = %d entries, %v; want %d", len(all), errno, len(want))
	}

	f, errno := fx.work.OpenFile("hello.txt", oRDONLY, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer f.Close()
	if _, errno := f.Readdir(1); errno != experimentalsys.EBADF {
		t.Errorf("Readdir on file: %v, want EBADF", errno)
	}
	if _, errno := d.Read(make([]byte, 1)); errno != experimentalsys.EISDIR {
		t.Errorf("Read on dir: %v, want EISDIR", errno)
	}
	if _, errno := d.Pwrite([]byte("x"), 0); errno != experimentalsys.EISDIR {
		t.Errorf("Pwrite on dir: %v, want EISDIR", errno)
	}
	wantErrno(t, "Truncate dir", d.Truncate(0), experimentalsys.EISDIR)
	wantErrno(t, "SetAppend dir", d.SetAppend(true), experimentalsys.EISDIR)
	d.Close()
	if _, errno := d.Readdir(1); errno != experimentalsys.EBADF {
		t.Errorf("Readdir after Close: %v, want EBADF", errno)
	}
}

func TestInsideSymlinksWork(t *testing.T) {
	fx := newFixture(t)
	w := fx.work
	for _, tc := range []struct{ name, want string }{
		{"link-in", helloContent},
		{"dirlink-in/inner.txt", innerContent},
		{"sub/up-in", helloContent},
		{"sub/../hello.txt", helloContent},
		{"./sub//inner.txt", innerContent},
		{"dirlink-in/up-in", helloContent},
	} {
		if got, errno := readPath(w, tc.name); errno != 0 || got != tc.want {
			t.Errorf("read %q = %q, %v", tc.name, got, errno)
		}
	}
	if errno := w.Symlink("../sub/inner.txt", "emptysub/guest-link"); errno != 0 {
		t.Fatal(errno)
	}
	if got, errno := readPath(w, "emptysub/guest-link"); errno != 0 || got != innerContent {
		t.Errorf("read guest-made link = %q, %v", got, errno)
	}
	if got, errno := w.Readlink("emptysub/guest-link"); errno != 0 || got != "../sub/inner.txt" {
		t.Errorf("Readlink = %q, %v", got, errno)
	}
	if target, err := os.Readlink(filepath.Join(fx.rootDir, "emptysub/guest-link")); err != nil || target != "../sub/inner.txt" {
		t.Errorf("host sees link %q, %v", target, err)
	}
	// Writing through an inside link writes its target.
	f, errno := w.OpenFile("link-in", oWRONLY|oTRUNC, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	if _, errno := f.Write([]byte("rewritten")); errno != 0 {
		t.Fatal(errno)
	}
	f.Close()
	if b, _ := os.ReadFile(filepath.Join(fx.rootDir, "hello.txt")); string(b) != "rewritten" {
		t.Errorf("hello.txt = %q", b)
	}
	// Hard links inside the root work.
	if errno := w.Link("hello.txt", "sub/hard"); errno != 0 {
		t.Fatal(errno)
	}
	if got, errno := readPath(w, "sub/hard"); errno != 0 || got != "rewritten" {
		t.Errorf("read hard link = %q, %v", got, errno)
	}
	// O_NOFOLLOW opens regular files normally.
	if f, errno := w.OpenFile("sub/inner.txt", oRDONLY|oNOFOLLOW, 0); errno != 0 {
		t.Errorf("nofollow open of regular file: %v", errno)
	} else {
		f.Close()
	}
	wantErrno(t, "nofollow open of inside link", openErrno(w, "link-in", oRDONLY|oNOFOLLOW), experimentalsys.ELOOP)
}

func TestFileIO(t *testing.T) {
	fx := newFixture(t)
	w := fx.work
	hostPath := filepath.Join(fx.rootDir, "io.txt")
	f, errno := w.OpenFile("io.txt", oRDWR|oCREAT|experimentalsys.O_EXCL, 0o640)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer f.Close()
	if n, errno := f.Write([]byte("hello world")); errno != 0 || n != 11 {
		t.Fatalf("Write = %d, %v", n, errno)
	}
	if n, errno := f.Pwrite([]byte("W"), 6); errno != 0 || n != 1 {
		t.Fatalf("Pwrite = %d, %v", n, errno)
	}
	buf := make([]byte, 5)
	if n, errno := f.Pread(buf, 6); errno != 0 || string(buf[:n]) != "World" {
		t.Fatalf("Pread = %q, %v", buf[:n], errno)
	}
	if n, errno := f.Pread(buf, 100); errno != 0 || n != 0 {
		t.Errorf("Pread past end = %d, %v", n, errno)
	}
	if _, errno := f.Pread(buf, -1); errno != experimentalsys.EINVAL {
		t.Errorf("Pread negative offset: %v", errno)
	}
	if _, errno := f.Pwrite(buf, -1); errno != experimentalsys.EINVAL {
		t.Errorf("Pwrite negative offset: %v", errno)
	}
	if off, errno := f.Seek(0, io.SeekStart); errno != 0 || off != 0 {
		t.Fatalf("Seek = %d, %v", off, errno)
	}
	if got := readAll(t, f); got != "hello World" {
		t.Errorf("content = %q", got)
	}
	if _, errno := f.Seek(0, 7); errno != experimentalsys.EINVAL {
		t.Errorf("Seek bad whence: %v", errno)
	}
	if _, errno := f.Seek(-100, io.SeekStart); errno != experimentalsys.EINVAL {
		t.Errorf("Seek negative: %v", errno)
	}

	// Append mode, toggled in place.
	if f.IsAppend() {
		t.Error("IsAppend before SetAppend")
	}
	if errno := f.SetAppend(true); errno != 0 || !f.IsAppend() {
		t.Fatalf("SetAppend(true) = %v", errno)
	}
	if _, errno := f.Seek(0, io.SeekStart); errno != 0 {
		t.Fatal(errno)
	}
	if _, errno := f.Write([]byte("!")); errno != 0 {
		t.Fatal(errno)
	}
	if errno := f.SetAppend(false); errno != 0 || f.IsAppend() {
		t.Fatalf("SetAppend(false) = %v", errno)
	}
	if _, errno := f.Pwrite([]byte("H"), 0); errno != 0 {
		t.Fatal(errno)
	}
	if b, _ := os.ReadFile(hostPath); string(b) != "Hello World!" {
		t.Errorf("host content = %q", b)
	}

	wantErrno(t, "Truncate", f.Truncate(5), 0)
	wantErrno(t, "Truncate negative", f.Truncate(-1), experimentalsys.EINVAL)
	wantErrno(t, "Sync", f.Sync(), 0)
	wantErrno(t, "Datasync", f.Datasync(), 0)

	atime := time.Date(2011, 1, 2, 3, 4, 5, 600000000, time.UTC).UnixNano()
	mtime := time.Date(2012, 1, 2, 3, 4, 5, 700000000, time.UTC).UnixNano()
	wantErrno(t, "file Utimens", f.Utimens(atime, mtime), 0)
	st, errno := f.Stat()
	if errno != 0 {
		t.Fatal(errno)
	}
	if st.Size != 5 || st.Mode != 0o640 || st.Atim != atime || st.Mtim != mtime {
		t.Errorf("after Truncate/Utimens: %+v", st)
	}
	wantErrno(t, "file Utimens omit mtime", f.Utimens(mtime, experimentalsys.UTIME_OMIT), 0)
	if st, _ := f.Stat(); st.Atim != mtime || st.Mtim != mtime {
		t.Errorf("after omitting mtime: atim %d mtim %d", st.Atim, st.Mtim)
	}
	wantErrno(t, "path Utimens", w.Utimens("io.txt", experimentalsys.UTIME_OMIT, atime), 0)
	if st, _ := w.Stat("io.txt"); st.Atim != mtime || st.Mtim != atime {
		t.Errorf("after path Utimens: atim %d mtim %d", st.Atim, st.Mtim)
	}

	wantErrno(t, "Close", f.Close(), 0)
	wantErrno(t, "Close again", f.Close(), 0)
	if _, errno := f.Read(buf); errno != experimentalsys.EBADF {
		t.Errorf("Read after Close: %v", errno)
	}
	if _, errno := f.Write(buf); errno != experimentalsys.EBADF {
		t.Errorf("Write after Close: %v", errno)
	}
	if _, errno := f.Stat(); errno != experimentalsys.EBADF {
		t.Errorf("Stat after Close: %v", errno)
	}

	// Files opened read-only refuse writes.
	r, errno := w.OpenFile("io.txt", oRDONLY, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer r.Close()
	if _, errno := r.Write([]byte("x")); errno != experimentalsys.EBADF {
		t.Errorf("Write on O_RDONLY file: %v", errno)
	}

	// O_APPEND at open: every write lands at the end, Pwrite is not refused.
	a, errno := w.OpenFile("io.txt", oWRONLY|experimentalsys.O_APPEND, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer a.Close()
	if !a.IsAppend() {
		t.Error("IsAppend after O_APPEND open")
	}
	if _, errno := a.Write([]byte("+")); errno != 0 {
		t.Fatal(errno)
	}
	if _, errno := a.Pwrite([]byte("-"), 0); errno != 0 {
		t.Errorf("Pwrite on O_APPEND file: %v", errno)
	}
	if b, _ := os.ReadFile(hostPath); len(b) != 7 || string(b[:6]) != "Hello+" {
		t.Errorf("host content after appends = %q", b)
	}
}

func TestPermissionBitsMasked(t *testing.T) {
	fx := newFixture(t)
	w := fx.work
	f, errno := w.OpenFile("suid", oWRONLY|oCREAT, 0o755|fs.ModeSetuid|fs.ModeSetgid)
	if errno != 0 {
		t.Fatal(errno)
	}
	f.Close()
	wantErrno(t, "chmod setuid", w.Chmod("suid", 0o4777|fs.ModeSetuid|fs.ModeSticky), 0)
	wantErrno(t, "mkdir sticky", w.Mkdir("sticky", 0o777|fs.ModeSticky), 0)
	for _, name := range []string{"suid", "sticky"} {
		fi, err := os.Stat(filepath.Join(fx.rootDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
			t.Errorf("%s: mode %v has special bits", name, fi.Mode())
		}
	}
	if fi, _ := os.Stat(filepath.Join(fx.rootDir, "suid")); fi.Mode().Perm() != 0o777 {
		t.Errorf("chmod applied %v, want 0777", fi.Mode().Perm())
	}
	wantErrno(t, "chmod through inside link", w.Chmod("link-in", 0o600), 0)
	if fi, _ := os.Stat(filepath.Join(fx.rootDir, "hello.txt")); fi.Mode().Perm() != 0o600 {
		t.Errorf("chmod through link applied %v to target", fi.Mode().Perm())
	}
}

// fileJail is a jail of one mount, /w, holding one file, name.
func fileJail(t *testing.T, name string) (*Jail, experimentalsys.FS) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	j, err := New([]Mount{{HostPath: dir, GuestPath: "/w"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	fsys, _ := j.FS("/w")
	return j, fsys
}

func TestOpenFileLimit(t *testing.T) {
	_, fsys := fileJail(t, "f")
	var files []experimentalsys.File
	for range MaxOpenFiles {
		f, errno := fsys.OpenFile("f", experimentalsys.O_RDONLY, 0)
		if errno != 0 {
			t.Fatalf("open %d: %v", len(files), errno)
		}
		files = append(files, f)
	}
	if _, errno := fsys.OpenFile("f", experimentalsys.O_RDONLY, 0); errno != experimentalsys.EAGAIN {
		t.Fatalf("open past the limit: errno %v, want EAGAIN", errno)
	}
	files[0].Close()
	files[0].Close() // a second close must not free a second slot
	f, errno := fsys.OpenFile("f", experimentalsys.O_RDONLY, 0)
	if errno != 0 {
		t.Fatalf("open after a close: %v", errno)
	}
	files[0] = f
	if _, errno := fsys.OpenFile("f", experimentalsys.O_RDONLY, 0); errno != experimentalsys.EAGAIN {
		t.Fatalf("double close freed a slot: errno %v", errno)
	}
	for _, f := range files {
		f.Close()
	}
}
