// Package testcorpus locates the conformance corpus for tests: the
// recorded sessions of the reference harness, which live outside the
// repository at ../shared/conformance beside the module root.
package testcorpus

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
)

// EnvDir names an environment variable that, when set, is the corpus
// directory: for a checkout (a git worktree, say) that has no ../shared
// beside it.
const EnvDir = "DSH_CONFORMANCE_DIR"

// Dir returns the corpus directory (holding README.md and sessions/), or
// skips the test with a message saying where it was looked for.
func Dir(t testing.TB) string {
	t.Helper()
	if dir := os.Getenv(EnvDir); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "sessions")); err != nil {
			t.Fatalf("%s=%s is not the conformance corpus: %v", EnvDir, dir, err)
		}
		return dir
	}
	root, err := guestbuild.ModuleRoot()
	if err != nil {
		t.Skipf("module root not found, so neither is the conformance corpus: %v", err)
	}
	dir := filepath.Join(filepath.Dir(root), "shared", "conformance")
	if _, err := os.Stat(filepath.Join(dir, "sessions")); err != nil {
		t.Skipf("conformance corpus not found at %s (../shared/conformance beside the checkout): %v", dir, err)
	}
	return dir
}

// Sessions returns the corpus's sessions directory, or skips the test.
func Sessions(t testing.TB) string {
	t.Helper()
	return filepath.Join(Dir(t), "sessions")
}
