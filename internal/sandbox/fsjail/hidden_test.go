//go:build unix

package fsjail

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// hiddenFixture is a workspace holding host state, as $HOME holds the
// compile cache and the sessions:
//
//	home/                       rw at /home, and ro at /ro (same dir)
//	home/.cache/dsh/wazero/     hidden: entry.wasm
//	home/.local/sessions/       hidden: s1.jsonl
//	home/notes.txt
//	home/clink -> .cache/dsh/wazero
//	home/slink -> .local/sessions/s1.jsonl
func hiddenFixture(t *testing.T) (home, cache, sessions string, rw, ro experimentalsys.FS) {
	t.Helper()
	home = filepath.Join(t.TempDir(), "home")
	cache = filepath.Join(home, ".cache", "dsh", "wazero")
	sessions = filepath.Join(home, ".local", "sessions")
	for _, d := range []string{cache, sessions} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, cache, "entry.wasm", "compiled", 0o600)
	writeFile(t, sessions, "s1.jsonl", `{"type":"user/message"}`+"\n", 0o600)
	writeFile(t, home, "notes.txt", "mine", 0o644)
	symlink(t, ".cache/dsh/wazero", home, "clink")
	symlink(t, ".local/sessions/s1.jsonl", home, "slink")
	j, err := New([]Mount{{HostPath: home, GuestPath: "/home"}, {HostPath: home, GuestPath: "/ro", ReadOnly: true}},
		WithHidden(cache, sessions, filepath.Join(home, "not-there")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	rw, _ = j.FS("/home")
	ro, _ = j.FS("/ro")
	return home, cache, sessions, rw, ro
}

func TestHiddenDirectoriesAreNotThere(t *testing.T) {
	home, cache, sessions, rw, ro := hiddenFixture(t)
	for _, fsys := range []experimentalsys.FS{rw, ro} {
		for _, name := range []string{
			".cache/dsh/wazero", ".cache/dsh/wazero/entry.wasm", ".cache/dsh/wazero/",
			".local/sessions/s1.jsonl", ".local/sessions/.", "clink", "clink/entry.wasm", "slink",
			".cache/dsh/../dsh/wazero/entry.wasm",
		} {
			if f, errno := fsys.OpenFile(name, experimentalsys.O_RDONLY, 0); errno != experimentalsys.ENOENT {
				if f != nil {
					f.Close()
				}
				t.Errorf("%s: open %s: errno %v, want ENOENT", fsys, name, errno)
			}
			if _, errno := fsys.Stat(name); errno != experimentalsys.ENOENT {
				t.Errorf("%s: stat %s: errno %v, want ENOENT", fsys, name, errno)
			}
		}
		if _, errno := fsys.Lstat(".cache/dsh/wazero"); errno != experimentalsys.ENOENT {
			t.Errorf("%s: lstat of the hidden dir: errno %v, want ENOENT", fsys, errno)
		}
		if _, errno := fsys.Readlink(".local/sessions"); errno != experimentalsys.ENOENT {
			t.Errorf("%s: readlink of the hidden dir: errno %v, want ENOENT", fsys, errno)
		}
		// What is not hidden works as before, symlinks included.
		if st, errno := fsys.Lstat("clink"); errno != 0 || st.Mode&os.ModeSymlink == 0 {
			t.Errorf("%s: lstat clink: %v %v, want the symlink itself", fsys, st.Mode, errno)
		}
		if f, errno := fsys.OpenFile("notes.txt", experimentalsys.O_RDONLY, 0); errno != 0 {
			t.Errorf("%s: open notes.txt: %v", fsys, errno)
		} else {
			f.Close()
		}
		// Listings leave the hidden directories out, not their parents.
		for dir, hidden := range map[string]string{".cache/dsh": "wazero", ".local": "sessions"} {
			f, errno := fsys.OpenFile(dir, experimentalsys.O_RDONLY|experimentalsys.O_DIRECTORY, 0)
			if errno != 0 {
				t.Fatalf("%s: open %s: %v", fsys, dir, errno)
			}
			ents, errno := f.Readdir(-1)
			f.Close()
			if errno != 0 {
				t.Fatalf("%s: readdir %s: %v", fsys, dir, errno)
			}
			if slices.ContainsFunc(ents, func(e experimentalsys.Dirent) bool { return e.Name == hidden }) {
				t.Errorf("%s: listing %s shows %s", fsys, dir, hidden)
			}
		}
	}
	// Writes: no entry planted, no rename or removal of the hidden
	// directory or of what leads to it.
	for what, errno := range map[string]experimentalsys.Errno{
		"create in cache": func() experimentalsys.Errno {
			f, errno := rw.OpenFile(".cache/dsh/wazero/planted", experimentalsys.O_CREAT|experimentalsys.O_WRONLY, 0o644)
			if f != nil {
				f.Close()
			}
			return errno
		}(),
		"append to session through a symlink": func() experimentalsys.Errno {
			f, errno := rw.OpenFile("slink", experimentalsys.O_WRONLY|experimentalsys.O_APPEND, 0)
			if f != nil {
				f.Close()
			}
			return errno
		}(),
		"append to the hidden dir itself": func() experimentalsys.Errno {
			f, errno := rw.OpenFile(".cache/dsh/wazero", experimentalsys.O_CREAT|experimentalsys.O_WRONLY|experimentalsys.O_APPEND, 0o644)
			if f != nil {
				f.Close()
			}
			return errno
		}(),
		"create below a hidden file (ENOTDIR would tell it exists)": func() experimentalsys.Errno {
			f, errno := rw.OpenFile(".local/sessions/s1.jsonl/x", experimentalsys.O_CREAT|experimentalsys.O_WRONLY, 0o644)
			if f != nil {
				f.Close()
			}
			return errno
		}(),
		"mkdir below a hidden file":  rw.Mkdir(".local/sessions/s1.jsonl/x", 0o755),
		"mkdir over the hidden dir":  rw.Mkdir(".cache/dsh/wazero", 0o755),
		"rename the hidden dir":      rw.Rename(".local/sessions", "stolen"),
		"rename onto the hidden dir": rw.Rename("notes.txt", ".local/sessions"),
		"rmdir the hidden dir":       rw.Rmdir(".cache/dsh/wazero"),
		"unlink in the hidden dir":   rw.Unlink(".local/sessions/s1.jsonl"),
		"link out of the hidden dir": rw.Link(".local/sessions/s1.jsonl", "copy"),
		"chmod the hidden dir":       rw.Chmod(".cache/dsh/wazero", 0o777),
	} {
		if errno != experimentalsys.ENOENT {
			t.Errorf("%s: errno %v, want ENOENT", what, errno)
		}
	}
	if errno := rw.Rename(".cache", "moved"); errno != experimentalsys.EACCES {
		t.Errorf("rename of a directory holding host state: errno %v, want EACCES", errno)
	}
	if got, _ := os.ReadFile(filepath.Join(sessions, "s1.jsonl")); !strings.Contains(string(got), "user/message") {
		t.Errorf("the session file changed: %q", got)
	}
	if _, err := os.Stat(filepath.Join(cache, "planted")); err == nil {
		t.Error("a file was planted in the cache")
	}
	if _, err := os.Stat(filepath.Join(home, ".cache")); err != nil {
		t.Error("the cache's parent moved")
	}
	// Ordinary work still happens around it.
	if errno := rw.Mkdir(".cache/dsh/other", 0o755); errno != 0 {
		t.Errorf("mkdir beside the hidden dir: %v", errno)
	}
}

func TestHiddenRefusesMountInside(t *testing.T) {
	home := t.TempDir()
	cache := filepath.Join(home, "cache")
	mkdir(t, home, "cache")
	mkdir(t, cache, "sub")
	for _, root := range []string{cache, filepath.Join(cache, "sub")} {
		j, err := New([]Mount{{HostPath: root, GuestPath: "/w"}}, WithHidden(cache))
		if !errors.Is(err, ErrHidden) {
			if j != nil {
				j.Close()
			}
			t.Errorf("mount %s inside hidden %s: err %v, want ErrHidden", root, cache, err)
		}
	}
}
