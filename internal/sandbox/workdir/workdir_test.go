package workdir

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Both ways of opening beneath a base (openat2, and the walk where the
// kernel has none) refuse every symbolic link below the base, wherever it
// points, and ..; they open real directories.
func TestOpenBeneathFollowsNoLink(t *testing.T) {
	for _, viaOpenat2 := range []bool{true, false} {
		name := "walk"
		if viaOpenat2 {
			name = "openat2"
		}
		t.Run(name, func(t *testing.T) {
			old := useOpenat2
			useOpenat2 = viaOpenat2
			t.Cleanup(func() { useOpenat2 = old })
			base := t.TempDir()
			ws := filepath.Join(base, "ws")
			other := filepath.Join(base, "other")
			must(t, os.MkdirAll(filepath.Join(ws, "a", "b"), 0o755))
			must(t, os.MkdirAll(other, 0o755))
			must(t, os.Symlink(other, filepath.Join(ws, "out")))
			must(t, os.Symlink("/", filepath.Join(ws, "a", "slash")))
			must(t, os.Symlink("b", filepath.Join(ws, "a", "inside"))) // stays beneath, still refused
			for _, rel := range []string{"out", "a/slash", "a/inside", "out/x", "../other", "/etc"} {
				for _, mkdir := range []bool{false, true} {
					if d, err := OpenBeneath(ws, rel, mkdir); !errors.Is(err, ErrEscapes) {
						if d != nil {
							d.Close()
						}
						t.Errorf("%q (mkdir %v): %v, want ErrEscapes", rel, mkdir, err)
					}
				}
			}
			if _, err := os.Stat(filepath.Join(other, "x")); err == nil {
				t.Errorf("mkdir through a link created a directory outside")
			}
			d, err := OpenBeneath(ws, "a/b", false)
			must(t, err)
			defer d.Close()
			if d.Name() != filepath.Join(ws, "a", "b") {
				t.Errorf("name %q", d.Name())
			}
			d2, err := OpenBeneath(ws, "new/deeper", true)
			must(t, err)
			d2.Close()
			if fi, err := os.Stat(filepath.Join(ws, "new", "deeper")); err != nil || !fi.IsDir() {
				t.Errorf("mkdir: %v", err)
			}
		})
	}
}

// A Dir keeps the directory it opened: renaming it and putting a link to
// elsewhere at its name changes nothing for handles taken later.
func TestDirOutlivesItsName(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	other := filepath.Join(base, "other")
	must(t, os.Mkdir(ws, 0o755))
	must(t, os.Mkdir(other, 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "mine"), []byte("mine"), 0o644))
	must(t, os.WriteFile(filepath.Join(other, "theirs"), []byte("theirs"), 0o644))
	d, err := Open(ws)
	must(t, err)
	defer d.Close()
	must(t, os.Rename(ws, filepath.Join(base, "moved")))
	must(t, os.Symlink(other, ws))
	r, err := d.OpenRoot()
	must(t, err)
	defer r.Close()
	if _, err := r.Stat("mine"); err != nil {
		t.Errorf("the opened directory is lost: %v", err)
	}
	if _, err := r.Stat("theirs"); err == nil {
		t.Errorf("a handle taken after the swap reaches the link's target")
	}
	if _, err := Open(filepath.Join(base, "moved", "mine")); !errors.Is(err, ErrNotDirectory) {
		t.Errorf("a file: %v, want ErrNotDirectory", err)
	}
}
