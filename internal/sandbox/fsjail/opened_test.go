//go:build unix

package fsjail

import (
	"os"
	"path/filepath"
	"testing"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// A mount given opened serves that directory: its name (HostPath) is
// never opened, so a link put at the name before New changes nothing.
func TestMountOfOpenedDirectory(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	other := filepath.Join(base, "other")
	for _, d := range []string{ws, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(other, "theirs"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "mine"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dir, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(ws, filepath.Join(base, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, ws); err != nil {
		t.Fatal(err)
	}
	j, err := New([]Mount{{HostPath: ws, GuestPath: ws, Dir: dir}})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	dir.Close() // the jail holds its own handle
	fsys, _ := j.FS(ws)
	if f, errno := fsys.OpenFile("mine", experimentalsys.O_RDONLY, 0); errno != 0 {
		t.Errorf("the opened directory's file: %v", errno)
	} else {
		f.Close()
	}
	if f, errno := fsys.OpenFile("theirs", experimentalsys.O_RDONLY, 0); errno == 0 {
		f.Close()
		t.Errorf("the jail serves the directory now at the mount's name")
	}
	if f, errno := fsys.OpenFile("planted", experimentalsys.O_CREAT|experimentalsys.O_RDWR, 0o644); errno == 0 {
		f.Close()
	}
	if _, err := os.Stat(filepath.Join(other, "planted")); err == nil {
		t.Errorf("a write landed in the directory now at the mount's name")
	}
}
