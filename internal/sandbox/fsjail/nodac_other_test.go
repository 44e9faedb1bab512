//go:build unix && !linux

package fsjail

import (
	"os"
	"testing"
)

// asUnprivileged runs fn; as root outside Linux (no per-thread
// capabilities to drop) the test is skipped.
func asUnprivileged(t *testing.T, fn func()) {
	t.Helper()
	if os.Geteuid() == 0 {
		t.Skip("root bypasses permission bits, and this system has no per-thread capabilities")
	}
	fn()
}
