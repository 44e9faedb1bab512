package fsjail

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// asUnprivileged runs fn on an OS thread of its own whose effective
// capabilities lack the ones that let root ignore permission bits
// (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER), so a test of
// EACCES runs as root too, as it does in CI. Linux capabilities are per
// thread: the thread is locked and never unlocked, so Go discards it when
// fn returns and no other goroutine ever runs on it.
func asUnprivileged(t *testing.T, fn func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			done <- err
			return
		}
		for _, c := range []uint{unix.CAP_DAC_OVERRIDE, unix.CAP_DAC_READ_SEARCH, unix.CAP_FOWNER} {
			data[c/32].Effective &^= 1 << (c % 32)
		}
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			done <- err
			return
		}
		fn()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatalf("drop capabilities: %v", err)
	}
}
