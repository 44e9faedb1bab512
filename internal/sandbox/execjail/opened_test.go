package execjail

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A root given opened is reached through its descriptor only: once the
// Manager holds it, renaming the directory away and putting a symbolic
// link to another directory at its name changes nothing. Commands start
// in the opened directory (by default and at a Dir under its name), the
// sandbox binds the opened directory at its name, and a Dir that leaves
// it by a link is refused.
func TestOpenedRootIgnoresItsName(t *testing.T) {
	for _, sandbox := range []bool{false, true} {
		name := "plain"
		if sandbox {
			name = "bwrap"
		}
		t.Run(name, func(t *testing.T) {
			if sandbox {
				requireBwrap(t)
			}
			base := t.TempDir()
			ws := filepath.Join(base, "ws")
			other := filepath.Join(base, "other")
			must(t, os.MkdirAll(filepath.Join(ws, "sub"), 0o755))
			must(t, os.MkdirAll(filepath.Join(other, "sub"), 0o755))
			must(t, os.WriteFile(filepath.Join(ws, "sub", "f"), []byte("mine"), 0o644))
			must(t, os.WriteFile(filepath.Join(other, "sub", "f"), []byte("theirs"), 0o644))
			must(t, os.Symlink(other, filepath.Join(ws, "sub", "escape")))
			dir, err := os.OpenRoot(ws)
			must(t, err)
			m, _ := newManager(t, Isolation(), Options{Sandbox: sandbox, Roots: []Root{{Path: ws, Writable: true, Dir: dir}}})
			dir.Close() // the Manager holds its own handle
			must(t, os.Rename(ws, filepath.Join(base, "moved")))
			must(t, os.Symlink(other, ws))

			for _, d := range []string{"", ws, filepath.Join(ws, "sub")} {
				res := run(t, m, Command{Script: "cat sub/f 2>/dev/null || cat f; echo written > w", Dir: d})
				if got := strings.TrimSpace(string(res.Stdout.Data)); got != "mine" {
					t.Errorf("Dir %q: read %q (stderr %q), want the opened directory's file", d, got, res.Stderr.Data)
				}
			}
			if _, err := os.Stat(filepath.Join(other, "w")); err == nil {
				t.Errorf("a command wrote through the swapped name")
			}
			if _, err := os.Stat(filepath.Join(other, "sub", "w")); err == nil {
				t.Errorf("a command wrote through the swapped name")
			}
			if sandbox {
				// bwrap closes the bound descriptor: a directory opened
				// outside the sandbox would lead out of it by "..".
				res := run(t, m, Command{Script: "for n in 5 6 7; do test -e /proc/self/fd/$n && echo leaked $n; done; true"})
				if out := strings.TrimSpace(string(res.Stdout.Data)); out != "" {
					t.Errorf("the command inherited a bound root's descriptor: %s", out)
				}
			}
			if _, err := m.Run(context.Background(), Command{Script: "true", Dir: filepath.Join(ws, "sub", "escape")}); !errors.Is(err, ErrCwdOutsideRoots) {
				t.Errorf("a link out of the opened root: %v, want ErrCwdOutsideRoots", err)
			}
			if _, err := m.Run(context.Background(), Command{Script: "true", Dir: filepath.Join(ws, "missing")}); !errors.Is(err, ErrInvalidCwd) {
				t.Errorf("a missing directory: %v, want ErrInvalidCwd", err)
			}
		})
	}
}
