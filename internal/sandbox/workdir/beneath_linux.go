package workdir

import (
	"fmt"

	"golang.org/x/sys/unix"
)

func fdPath(fd int) string { return fmt.Sprintf("/proc/self/fd/%d", fd) }

// openat2 opens rel beneath dirfd with no symbolic link followed;
// errNoOpenat2 when the kernel (or a seccomp filter) refuses the call.
func openat2(dirfd int, rel string) (int, error) {
	how := unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	for {
		fd, err := unix.Openat2(dirfd, rel, &how)
		switch err {
		case nil:
			return fd, nil
		case unix.EINTR, unix.EAGAIN:
			continue
		case unix.ENOSYS, unix.EPERM:
			return -1, errNoOpenat2
		case unix.ELOOP, unix.EXDEV:
			return -1, fmt.Errorf("%w: %s has a symbolic link or leaves the base", ErrEscapes, rel)
		case unix.ENOTDIR:
			return -1, fmt.Errorf("%w: %s", ErrNotDirectory, rel)
		}
		return -1, fmt.Errorf("%s: %w", rel, err)
	}
}
