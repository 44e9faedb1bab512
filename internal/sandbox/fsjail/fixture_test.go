//go:build unix

package fsjail

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"golang.org/x/sys/unix"
)

const (
	canaryContent = "CANARY-7f3a9e: this text lives outside every jail\n"
	helloContent  = "hello from inside the jail\n"
	innerContent  = "inner file\n"
	roContent     = "read-only data\n"
	otherContent  = "other mount\n"
)

// fixture is a fresh tree of host directories and a Jail over three of them:
//
//	base/outside/  canary.txt, victim.txt, emptydir/, secretdir/secret.txt,
//	               outlink -> canary.txt             (never granted)
//	base/root/     mounted rw at /work
//	base/ro/       mounted ro at /ro
//	base/other/    mounted rw at /other
//
// root holds regular files, inside symlinks and host-made symlinks that
// point outside. Cleanup asserts that nothing outside the granted roots
// changed: the canary's content and metadata, and the outside tree.
type fixture struct {
	base, rootDir, roDir, otherDir, outsideDir, canaryPath string

	jail            *Jail
	work, ro, other experimentalsys.FS
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	base := t.TempDir()
	fx := &fixture{
		base:       base,
		rootDir:    filepath.Join(base, "root"),
		roDir:      filepath.Join(base, "ro"),
		otherDir:   filepath.Join(base, "other"),
		outsideDir: filepath.Join(base, "outside"),
	}
	fx.canaryPath = filepath.Join(fx.outsideDir, "canary.txt")

	mkdir(t, fx.outsideDir, "emptydir")
	mkdir(t, fx.outsideDir, "secretdir")
	writeFile(t, fx.outsideDir, "canary.txt", canaryContent, 0o640)
	writeFile(t, fx.outsideDir, "victim.txt", canaryContent, 0o644)
	writeFile(t, fx.outsideDir, "secretdir/secret.txt", canaryContent, 0o600)
	symlink(t, "canary.txt", fx.outsideDir, "outlink")
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := os.Chtimes(fx.canaryPath, old, old); err != nil {
		t.Fatal(err)
	}

	mkdir(t, fx.rootDir, "sub")
	mkdir(t, fx.rootDir, "emptysub")
	writeFile(t, fx.rootDir, "hello.txt", helloContent, 0o644)
	writeFile(t, fx.rootDir, "sub/inner.txt", innerContent, 0o644)
	writeFile(t, fx.rootDir, "sub/victim.txt", innerContent, 0o644)
	symlink(t, "hello.txt", fx.rootDir, "link-in")
	symlink(t, "sub", fx.rootDir, "dirlink-in")
	symlink(t, "../hello.txt", fx.rootDir, "sub/up-in")
	symlink(t, "../outside/canary.txt", fx.rootDir, "rel-out")
	symlink(t, "sub/../../outside/canary.txt", fx.rootDir, "deep-out")
	symlink(t, fx.canaryPath, fx.rootDir, "abs-out")
	symlink(t, "../outside", fx.rootDir, "dir-out")
	symlink(t, fx.outsideDir, fx.rootDir, "abs-dir-out")
	symlink(t, "chain2", fx.rootDir, "chain1")
	symlink(t, "sub/../rel-out", fx.rootDir, "chain2")
	symlink(t, "loop2", fx.rootDir, "loop1")
	symlink(t, "loop1", fx.rootDir, "loop2")
	symlink(t, "../../../../../../../../../../../../proc/self", fx.rootDir, "proc-self")
	symlink(t, "/proc/self/root/etc/passwd", fx.rootDir, "abs-proc")

	mkdir(t, fx.roDir, "rosub")
	writeFile(t, fx.roDir, "data.txt", roContent, 0o644)
	symlink(t, "data.txt", fx.roDir, "data-link")
	writeFile(t, fx.otherDir, "o.txt", otherContent, 0o644)

	canary := snapshotFile(t, fx.canaryPath)
	outside := snapshotTree(t, fx.outsideDir)
	ro := snapshotTree(t, fx.roDir)
	t.Cleanup(func() {
		if got := snapshotFile(t, fx.canaryPath); !reflect.DeepEqual(got, canary) {
			t.Errorf("canary changed:\n got %+v\nwant %+v", got, canary)
		}
		if got := snapshotTree(t, fx.outsideDir); !reflect.DeepEqual(got, outside) {
			t.Errorf("outside tree changed:\n got %v\nwant %v", got, outside)
		}
		if got := snapshotTree(t, fx.roDir); !reflect.DeepEqual(got, ro) {
			t.Errorf("read-only tree changed:\n got %v\nwant %v", got, ro)
		}
	})

	j, err := New([]Mount{
		{HostPath: fx.rootDir, GuestPath: "/work"},
		{HostPath: fx.roDir, GuestPath: "/ro", ReadOnly: true},
		{HostPath: fx.otherDir, GuestPath: "/other"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := j.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	fx.jail = j
	fx.work, _ = j.FS("/work")
	fx.ro, _ = j.FS("/ro")
	fx.other, _ = j.FS("/other")
	return fx
}

func mkdir(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, dir, name, content string, perm fs.FileMode) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil { // not subject to umask
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, dir, name string) {
	t.Helper()
	if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// fileState is what must not change about a file the guest may not touch.
// ctime catches any metadata change (chmod, link, rename, utimes).
type fileState struct {
	Content string
	Size    int64
	Mode    fs.FileMode
	Mtime   time.Time
	Ctime   unix.Timespec
	Nlink   uint64
	Ino     uint64
}

func snapshotFile(t *testing.T, p string) fileState {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("canary: %v", err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatalf("canary: %v", err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatalf("canary: %v", err)
	}
	return fileState{
		Content: string(b),
		Size:    fi.Size(),
		Mode:    fi.Mode(),
		Mtime:   fi.ModTime(),
		Ctime:   st.Ctim,
		Nlink:   uint64(st.Nlink),
		Ino:     uint64(st.Ino),
	}
}

// snapshotTree lists every entry under dir with its type, permissions,
// size, modification time and link target.
func snapshotTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		desc := fi.Mode().String()
		if fi.Mode().IsRegular() {
			desc += fmt.Sprintf(" %d bytes, modified %s", fi.Size(), fi.ModTime())
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", dir, err)
	}
	return out
}

// readAll reads an open sys.File to its end.
func readAll(t *testing.T, f experimentalsys.File) string {
	t.Helper()
	s, errno := readToEnd(f)
	if errno != 0 {
		t.Fatalf("Read: %v", errno)
	}
	return s
}

func readToEnd(f experimentalsys.File) (string, experimentalsys.Errno) {
	var out []byte
	buf := make([]byte, 7)
	for {
		n, errno := f.Read(buf)
		if errno != 0 {
			return string(out), errno
		}
		if n == 0 {
			return string(out), 0
		}
		out = append(out, buf[:n]...)
	}
}

// readPath opens name read-only in fsys and returns its content.
func readPath(fsys experimentalsys.FS, name string) (string, experimentalsys.Errno) {
	f, errno := fsys.OpenFile(name, experimentalsys.O_RDONLY, 0)
	if errno != 0 {
		return "", errno
	}
	defer f.Close()
	return readToEnd(f)
}

func wantErrno(t *testing.T, what string, got, want experimentalsys.Errno) {
	t.Helper()
	if got != want {
		t.Errorf("%s: errno %v (%d), want %v (%d)", what, got, got, want, want)
	}
}
