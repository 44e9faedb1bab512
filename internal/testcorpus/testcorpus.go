// Package testcorpus locates the conformance corpus for tests: the
// recorded sessions of the reference harness, which live outside the
// repository at ../shared/conformance beside the module root.
package testcorpus

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/prereq"
)

// EnvDir names an environment variable that, when set, is the corpus
// directory, for checkouts that do not sit beside it.
const EnvDir = "DSH_CONFORMANCE_DIR"

// Dir returns the corpus directory (holding README.md and sessions/), or
// skips the test with a message saying where it was looked for.
func Dir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(EnvDir)
	if dir == "" {
		root, err := guestbuild.ModuleRoot()
		if err != nil {
			prereq.Missing(t, "module root not found, so neither is the conformance corpus: %v", err)
		}
		dir = filepath.Join(filepath.Dir(root), "shared", "conformance")
	}
	if _, err := os.Stat(filepath.Join(dir, "sessions")); err != nil {
		prereq.Missing(t, "conformance corpus not found at %s (../shared/conformance beside the checkout, or $%s): %v", dir, EnvDir, err)
	}
	return dir
}

// Sessions returns the corpus's sessions directory, or skips the test
// (fails it under CI).
func Sessions(t testing.TB) string {
	t.Helper()
	return filepath.Join(Dir(t), "sessions")
}

// SessionFiles returns every recorded session file of the corpus: the
// ACP sessions and the hook scenarios beside them. It skips the test (fails
// it under CI) when the corpus is missing, and fails it when either set is
// empty.
func SessionFiles(t testing.TB) []string {
	t.Helper()
	sessions := Sessions(t)
	files, err := filepath.Glob(filepath.Join(sessions, "*", "session*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		prereq.Missing(t, "no session files in the conformance corpus at %s", sessions)
	}
	hooks, err := filepath.Glob(filepath.Join(filepath.Dir(sessions), "hook-sessions", "*", "session*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(hooks) == 0 {
		t.Fatalf("no hook-sessions files beside %s", sessions)
	}
	return append(files, hooks...)
}
