//go:build unix && !linux

package fsjail

import (
	"os"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"golang.org/x/sys/unix"
)

// dsyncFlag is the open flag for synchronized data integrity. Not every
// BSD defines O_DSYNC; O_SYNC is a superset of it.
const dsyncFlag = os.O_SYNC

// futimens sets the timestamps of the open file fd, leaving a timestamp
// equal to experimentalsys.UTIME_OMIT unchanged. These platforms only offer
// futimes(2), at microsecond precision, so omitted values are read back
// from the file first.
func futimens(fd int, atim, mtim int64) error {
	if atim == experimentalsys.UTIME_OMIT && mtim == experimentalsys.UTIME_OMIT {
		return nil
	}
	if atim == experimentalsys.UTIME_OMIT || mtim == experimentalsys.UTIME_OMIT {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		if atim == experimentalsys.UTIME_OMIT {
			atim = unix.TimespecToNsec(st.Atim)
		}
		if mtim == experimentalsys.UTIME_OMIT {
			mtim = unix.TimespecToNsec(st.Mtim)
		}
	}
	tv := []unix.Timeval{unix.NsecToTimeval(atim), unix.NsecToTimeval(mtim)}
	_, err := retryEINTR(func() (int, error) { return 0, unix.Futimes(fd, tv) })
	return err
}

// fdatasync falls back to fsync where fdatasync(2) is not available.
func fdatasync(fd int) error {
	_, err := retryEINTR(func() (int, error) { return 0, unix.Fsync(fd) })
	return err
}

// pathOpenFlag opens a name only to stat it. Without O_PATH it is read
// access: in a mount with hidden directories, a file without read
// permission cannot be stat'ed here.
const pathOpenFlag = unix.O_RDONLY | unix.O_NONBLOCK
