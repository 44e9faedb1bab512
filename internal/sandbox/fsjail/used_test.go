//go:build unix

package fsjail

import (
	"testing"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// Used tells a plugin load whether its dsh_init could have learnt
// anything from its files. Making a pre-open real (opening the root
// read-only) is not a use; any lookup, open, listing or change is.
func TestJailUsed(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   func(fsys experimentalsys.FS) experimentalsys.Errno
		used bool
	}{
		{"nothing", func(experimentalsys.FS) experimentalsys.Errno { return 0 }, false},
		{"pre-open", func(fsys experimentalsys.FS) experimentalsys.Errno {
			_, errno := fsys.OpenFile(".", 0, 0)
			return errno
		}, false},
		{"listing", func(fsys experimentalsys.FS) experimentalsys.Errno {
			f, errno := fsys.OpenFile(".", 0, 0)
			if errno != 0 {
				return errno
			}
			defer f.Close()
			_, errno = f.Readdir(-1)
			return errno
		}, true},
		{"root's metadata", func(fsys experimentalsys.FS) experimentalsys.Errno {
			f, errno := fsys.OpenFile(".", 0, 0)
			if errno != 0 {
				return errno
			}
			defer f.Close()
			_, errno = f.Stat()
			return errno
		}, true},
		{"open", func(fsys experimentalsys.FS) experimentalsys.Errno {
			f, errno := fsys.OpenFile("a.txt", experimentalsys.O_RDONLY, 0)
			if errno == 0 {
				f.Close()
			}
			return errno
		}, true},
		{"missing", func(fsys experimentalsys.FS) experimentalsys.Errno {
			if _, errno := fsys.Stat("none"); errno != experimentalsys.ENOENT {
				return errno
			}
			return 0
		}, true},
		{"readlink", func(fsys experimentalsys.FS) experimentalsys.Errno {
			fsys.Readlink("a.txt")
			return 0
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, fsys := fileJail(t, "a.txt")
			if errno := tc.op(fsys); errno != 0 {
				t.Fatalf("op: %v", errno)
			}
			if got := j.Used(); got != tc.used {
				t.Errorf("Used = %v, want %v", got, tc.used)
			}
		})
	}
}
