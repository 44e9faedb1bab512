package fsjail

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"sync"
	"syscall"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// os.Root reports a path that would leave the root with an unexported error
// ("path escapes from parent"). learnEscapeError captures that exact value
// once, from a probe os.Root refuses lexically before any system call, so
// toErrno can recognise it by identity rather than by its message.
var (
	escapeOnce sync.Once
	escapeErr  error
)

const escapeMessage = "path escapes from parent"

func learnEscapeError(r *os.Root) {
	escapeOnce.Do(func() {
		_, err := r.Lstat("..")
		var pe *fs.PathError
		var errno syscall.Errno
		if errors.As(err, &pe) && !errors.As(pe.Err, &errno) {
			escapeErr = pe.Err
		}
	})
}

func isEscape(err error) bool {
	if escapeErr != nil && errors.Is(err, escapeErr) {
		return true
	}
	// Fallback should the probe ever fail: match the innermost message.
	inner := err
	for u := errors.Unwrap(inner); u != nil; u = errors.Unwrap(inner) {
		inner = u
	}
	return inner.Error() == escapeMessage
}

// toErrno maps an error from os or a system call to the errno a guest sees.
func toErrno(err error) experimentalsys.Errno {
	if err == nil || err == io.EOF {
		return 0
	}
	var (
		guestErrno experimentalsys.Errno
		errno      syscall.Errno
	)
	switch {
	case errors.As(err, &guestErrno):
		return guestErrno
	case errors.As(err, &errno):
		return experimentalsys.UnwrapOSError(errno)
	case isEscape(err):
		return experimentalsys.EPERM
	case errors.Is(err, fs.ErrClosed):
		return experimentalsys.EBADF
	case errors.Is(err, fs.ErrNotExist):
		return experimentalsys.ENOENT
	case errors.Is(err, fs.ErrExist):
		return experimentalsys.EEXIST
	case errors.Is(err, fs.ErrPermission):
		return experimentalsys.EACCES
	case errors.Is(err, fs.ErrInvalid):
		return experimentalsys.EINVAL
	}
	return experimentalsys.EIO
}
