// Package prereq is how tests treat a missing external prerequisite
// (bubblewrap, clang, the conformance corpus, an exec isolation mode):
// skipped on a developer's machine, failed under CI=true, where .ci/run
// installs every prerequisite and a skip would hide a broken setup.
package prereq

import (
	"fmt"
	"os"
	"testing"
)

// CI reports whether the tests run under CI (CI=true in the environment;
// .ci/run sets it).
func CI() bool { return os.Getenv("CI") == "true" }

// Missing ends t because a prerequisite is missing: a skip, or under CI
// a failure. The message says what is missing and why it matters.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if CI() {
		t.Fatalf("prerequisite missing under CI=true (.ci/run installs it): %s", msg)
	}
	t.Skip(msg)
}
