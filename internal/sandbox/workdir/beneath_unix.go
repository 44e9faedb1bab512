//go:build unix

package workdir

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// useOpenat2 is cleared by tests to exercise the component walk.
var useOpenat2 = true

// openBeneath opens rel below base, following no symbolic link in rel:
// with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) where the kernel has
// it, else by a walk, one component at a time with O_NOFOLLOW.
func openBeneath(base, rel string, mkdir bool) (*os.Root, error) {
	b, err := os.Open(base)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	if fi, err := b.Stat(); err != nil {
		return nil, err
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s", ErrNotDirectory, base)
	}
	bfd := int(b.Fd())
	if useOpenat2 && !mkdir {
		fd, err := openat2(bfd, rel)
		if err == nil {
			return rootOf(fd)
		}
		if !errors.Is(err, errNoOpenat2) {
			return nil, err
		}
	}
	return walk(bfd, rel, mkdir)
}

var errNoOpenat2 = errors.New("openat2 unavailable")

// walk opens rel from dirfd one component at a time, each with
// O_NOFOLLOW|O_DIRECTORY relative to the one before.
func walk(dirfd int, rel string, mkdir bool) (*os.Root, error) {
	fd, err := unix.Dup(dirfd)
	if err != nil {
		return nil, err
	}
	unix.CloseOnExec(fd)
	if rel != "." {
		for _, c := range strings.Split(rel, "/") {
			next, err := openComponent(fd, c, mkdir)
			unix.Close(fd)
			if err != nil {
				return nil, err
			}
			fd = next
		}
	}
	return rootOf(fd)
}

func openComponent(dirfd int, name string, mkdir bool) (int, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	for {
		fd, err := unix.Openat(dirfd, name, flags, 0)
		switch {
		case err == nil:
			return fd, nil
		case err == unix.EINTR:
			continue
		case err == unix.ENOENT && mkdir:
			if err := unix.Mkdirat(dirfd, name, 0o750); err != nil && err != unix.EEXIST {
				return -1, fmt.Errorf("mkdir %s: %w", name, err)
			}
			mkdir = false // one try: a racing swap is then refused below
			continue
		case err == unix.ELOOP, err == unix.ENOTDIR:
			// O_NOFOLLOW on a symbolic link fails with ELOOP; with
			// O_DIRECTORY some systems say ENOTDIR. Tell them apart.
			var st unix.Stat_t
			if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return -1, fmt.Errorf("%w: %s is a symbolic link", ErrEscapes, name)
			}
			return -1, fmt.Errorf("%w: %s", ErrNotDirectory, name)
		}
		return -1, fmt.Errorf("%s: %w", name, err)
	}
}

// rootOf makes an os.Root of an open directory descriptor, which it
// closes. The descriptor's own path in /proc or /dev/fd names exactly the
// open directory, whatever has been renamed since.
func rootOf(fd int) (*os.Root, error) {
	defer unix.Close(fd)
	r, err := os.OpenRoot(fdPath(fd))
	if err != nil {
		return nil, err
	}
	return r, nil
}
