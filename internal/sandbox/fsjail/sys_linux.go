//go:build linux

package fsjail

import (
	"unsafe"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"golang.org/x/sys/unix"
)

// dsyncFlag is the open flag for synchronized data integrity.
const dsyncFlag = unix.O_DSYNC

// futimens sets the timestamps of the open file fd at nanosecond precision,
// leaving a timestamp equal to experimentalsys.UTIME_OMIT unchanged.
func futimens(fd int, atim, mtim int64) error {
	ts := [2]unix.Timespec{toTimespec(atim), toTimespec(mtim)}
	// utimensat with a NULL path operates on fd itself (futimens(3)).
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func toTimespec(nanos int64) unix.Timespec {
	if nanos == experimentalsys.UTIME_OMIT {
		return unix.Timespec{Nsec: unix.UTIME_OMIT}
	}
	return unix.NsecToTimespec(nanos)
}

func fdatasync(fd int) error {
	_, err := retryEINTR(func() (int, error) { return 0, unix.Fdatasync(fd) })
	return err
}

// pathOpenFlag opens a name only to stat it: without reading it, so that
// a file the guest may not read can still be stat'ed.
const pathOpenFlag = unix.O_PATH | unix.O_NONBLOCK
