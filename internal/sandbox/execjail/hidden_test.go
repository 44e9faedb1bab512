//go:build linux

package execjail

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hiddenHome is a root holding host state, as $HOME holds the compile
// cache and the sessions.
func hiddenHome(t *testing.T) (home, cache, sessions string) {
	t.Helper()
	home = t.TempDir()
	cache = filepath.Join(home, ".cache", "dsh", "wazero")
	sessions = filepath.Join(home, ".local", "sessions")
	for _, d := range []string{cache, sessions} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(sessions, "s1.jsonl"), []byte("secret-session-line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".local/sessions", filepath.Join(home, "slink")); err != nil {
		t.Fatal(err)
	}
	return home, cache, sessions
}

// Commands see none of the host state inside their roots: with bwrap, and
// in the PID namespace mode without it (the helper's mount namespace).
func TestHiddenHostStateInRoots(t *testing.T) {
	script := `cat .local/sessions/s1.jsonl slink/s1.jsonl 2>/dev/null; ls -A .local/sessions .cache/dsh/wazero; ` +
		`echo planted > .cache/dsh/wazero/x 2>/dev/null; echo forged >> slink/s1.jsonl 2>/dev/null; ` +
		`mv .local .local-moved 2>/dev/null; mv .cache/dsh .cache/moved 2>/dev/null; rmdir .local/share 2>/dev/null; echo done`
	for _, tc := range []struct {
		name    string
		mode    Mode
		sandbox bool
	}{{"bwrap", Isolation(), true}, {"pid-namespace", ModePIDNamespace, false}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.sandbox {
				requireBwrap(t)
			}
			home, cache, sessions := hiddenHome(t)
			m, _ := newManager(t, tc.mode, Options{Roots: []Root{{Path: home, Writable: true}},
				Sandbox: tc.sandbox, Hidden: []string{cache, sessions}})
			res := run(t, m, Command{Script: script})
			out := string(res.Stdout.Data)
			if strings.Contains(out, "secret-session-line") || !strings.HasSuffix(out, "done\n") {
				t.Errorf("the command saw the session: stdout %q stderr %q", out, res.Stderr.Data)
			}
			if b, _ := os.ReadFile(filepath.Join(sessions, "s1.jsonl")); string(b) != "secret-session-line\n" {
				t.Errorf("the session file is now %q", b)
			}
			if _, err := os.Stat(filepath.Join(cache, "x")); err == nil {
				t.Error("the command planted a cache entry")
			}
			// What leads to the host state stays where the host looks.
			for _, d := range []string{cache, sessions} {
				if _, err := os.Stat(d); err != nil {
					t.Errorf("the command moved host state: %v", err)
				}
			}
			// The host state is not a working directory either.
			if _, err := m.Run(t.Context(), Command{Script: "true", Dir: filepath.Join(home, "slink")}); !errors.Is(err, ErrCwdOutsideRoots) {
				t.Errorf("cwd in the sessions dir: err %v, want ErrCwdOutsideRoots", err)
			}
		})
	}
}

func TestHiddenRefusesRootInside(t *testing.T) {
	home, cache, _ := hiddenHome(t)
	_ = home
	_, err := NewManager(Options{Roots: []Root{{Path: cache}}, Hidden: []string{filepath.Dir(cache)}})
	if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), cache) || !strings.Contains(err.Error(), filepath.Dir(cache)) {
		t.Errorf("root inside hidden: err %v, want ErrInvalidOptions naming both", err)
	}
}
