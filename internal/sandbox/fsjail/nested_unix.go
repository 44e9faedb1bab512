//go:build unix

package fsjail

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"golang.org/x/sys/unix"
)

// Nested mounts.
//
// Mounts may nest on the host: a read-write workspace and a read-only
// directory inside it, say. Each mount is its own os.Root, so without more
// the read-only directory would be writable through the workspace's
// pre-open ("protected/config" relative to it), whatever the guest's libc
// does with the longest matching pre-open. The narrower grant must win.
//
// So a mount knows the identity (device and inode) of every other mount's
// root directory, and before any mutation it finds the innermost mount
// root above the directory it is about to change: it walks up from that
// directory's descriptor through ".." until it meets its own root or
// another mount's. That mount's mode decides. The walk is by descriptor
// and identity, never by name, so symlinks, "..", hard-linked or renamed
// directories change nothing: a directory stays protected wherever it is
// moved.
//
// Mutations are checked on the directory they change: the parent of a
// created, removed, renamed (both ends) or linked (both ends) entry, the
// parent of an opened-for-write file after the jail has resolved every
// symlink itself, and a directory itself. A nested read-only root cannot be
// renamed or removed. Files opened from inside a read-only area remember
// it, so set-times and truncate through their descriptor fail with EROFS.

// maxWalk bounds the walk up to the innermost mount root.
const maxWalk = 4096

// maxSymlinks bounds the symlinks the jail follows itself when resolving a
// name in a mount with nested mounts, as the kernel's own limit does.
const maxSymlinks = 40

func fdIdentity(fd int) (devIno, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return devIno{}, err
	}
	return devIno{uint64(st.Dev), uint64(st.Ino)}, nil
}

// linkNested tells every mount the identities and modes of the other
// mounts' roots that lie below its own root, found by walking up from each
// root when the jail is made. Mounts with none below them keep the plain
// path, with no walk. (A guest cannot move a directory from outside its
// mounts to below one; a command could, but a command can write wherever
// its own grants let it.)
func linkNested(fss []mountFS) error {
	ids := make([]devIno, len(fss))
	above := make([]map[devIno]bool, len(fss)) // every directory above each root
	for i, m := range fss {
		r := m.(*rootFS)
		d, err := r.root.Open(".")
		if err != nil {
			return err
		}
		rc, err := d.SyscallConn()
		if err == nil {
			cerr := rc.Control(func(fd uintptr) { ids[i], above[i], err = ancestors(int(fd)) })
			err = errors.Join(err, cerr)
		}
		d.Close()
		if err != nil {
			return fmt.Errorf("identifying mount root: %w", err)
		}
		r.id = ids[i]
	}
	for i, m := range fss {
		r := m.(*rootFS)
		for j, o := range fss {
			if i == j || ids[j] == ids[i] || !above[j][ids[i]] {
				continue
			}
			if r.nested == nil {
				r.nested = map[devIno]bool{}
			}
			r.nested[ids[j]] = r.nested[ids[j]] || o.(*rootFS).readOnly
		}
	}
	return nil
}

// ancestors returns the identity of the directory fd and of every
// directory above it up to the host's "/".
func ancestors(fd int) (devIno, map[devIno]bool, error) {
	self, err := fdIdentity(fd)
	if err != nil {
		return devIno{}, nil, err
	}
	up := map[devIno]bool{}
	cur, prev := -1, self
	defer func() {
		if cur >= 0 {
			unix.Close(cur)
		}
	}()
	from := fd
	for range maxWalk {
		next, err := retryEINTR(func() (int, error) {
			return unix.Openat(from, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		})
		if err != nil {
			return self, up, err
		}
		if cur >= 0 {
			unix.Close(cur)
		}
		cur, from = next, next
		id, err := fdIdentity(cur)
		if err != nil || id == prev {
			return self, up, err
		}
		up[id], prev = true, id
	}
	return self, up, nil
}

// readOnlyAt reports whether the directory dirfd lies in a read-only area:
// the mode of the innermost mount root at or above it.
func (r *rootFS) readOnlyAt(dirfd int) (bool, error) {
	if len(r.hidden) == 0 && (r.readOnly || len(r.nested) == 0) {
		return r.readOnly, nil
	}
	fd, owned := dirfd, -1
	defer func() {
		if owned >= 0 {
			unix.Close(owned)
		}
	}()
	for range maxWalk {
		id, err := fdIdentity(fd)
		if err != nil {
			return true, err
		}
		if r.hidden[id] {
			return true, syscall.ENOENT
		}
		if id == r.id {
			return r.readOnly, nil
		}
		if ro, ok := r.nested[id]; ok {
			return r.readOnly || ro, nil
		}
		up, err := retryEINTR(func() (int, error) {
			return unix.Openat(fd, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		})
		if err != nil {
			return true, err
		}
		upID, err := fdIdentity(up)
		if err != nil || upID == id {
			// The host's "/", reached without meeting this root: the
			// directory was moved out from under it. Refuse.
			unix.Close(up)
			return true, err
		}
		if owned >= 0 {
			unix.Close(owned)
		}
		fd, owned = up, up
	}
	return true, nil
}

// writableAt fails with EROFS unless dirfd may be changed.
func (r *rootFS) writableAt(dirfd int) error {
	ro, err := r.readOnlyAt(dirfd)
	switch {
	case err != nil:
		return err
	case ro:
		return syscall.EROFS
	}
	return nil
}

// notReadOnlyRoot fails with EROFS if base in dirfd is the root of a nested
// read-only mount, which cannot be moved or removed through this one.
func (r *rootFS) notReadOnlyRoot(dirfd int, base string) error {
	if err := r.checkEntry(dirfd, base, true); err != nil {
		return err
	}
	if len(r.nested) == 0 {
		return nil
	}
	st, err := lstatAt(dirfd, base)
	if err != nil {
		return nil // the operation itself reports it
	}
	if r.nested[devIno{uint64(st.Dev), uint64(st.Ino)}] {
		return syscall.EROFS
	}
	return nil
}

// openNested opens name in a mount that has other mounts nested in it. It
// resolves the final component's symlinks itself (each through os.Root), so
// that it holds the directory the file lives in, checks that directory's
// area before any write, and opens the entry relative to it without
// following. It reports whether the file lies in a read-only area.
func (r *rootFS) openNested(name string, flag experimentalsys.Oflag, osFlag int, perm fs.FileMode) (*os.File, bool, error) {
	write := flag&writeFlags != 0
	for hops := 0; ; hops++ {
		dir, base, trailingSlash := splitParent(name)
		if isDot(base) || trailingSlash {
			// A directory: open it as os.Root does, then judge it by
			// itself. Writes to a directory fail anyway.
			f, err := r.root.OpenFile(name, osFlag, perm)
			if err != nil {
				return nil, false, r.hideErr(name, err)
			}
			ro, err := r.readOnlyAt(int(f.Fd()))
			if err == nil && ro && write {
				err = syscall.EROFS
			}
			if err != nil {
				f.Close()
				return nil, false, err
			}
			return f, ro, nil
		}
		var (
			fd     = -1
			ro     bool
			target string
			relook bool
		)
		err := r.inParent(dir, func(dirfd int) error {
			st, err := lstatAt(dirfd, base)
			exists := err == nil
			if exists && r.hidden[devIno{uint64(st.Dev), uint64(st.Ino)}] {
				return syscall.ENOENT
			}
			if exists && st.Mode&unix.S_IFMT == unix.S_IFLNK && flag&experimentalsys.O_NOFOLLOW == 0 {
				if flag&(experimentalsys.O_CREAT|experimentalsys.O_EXCL) == experimentalsys.O_CREAT|experimentalsys.O_EXCL {
					return syscall.EEXIST
				}
				target, err = readlinkAt(dirfd, base)
				if err == syscall.EINVAL {
					// No longer a symlink: replaced meanwhile. Look
					// again (counted as a hop).
					target, err = ".", nil
					relook = true
				}
				return err
			}
			if ro, err = r.readOnlyAt(dirfd); err != nil {
				return err
			}
			if ro && write {
				return syscall.EROFS
			}
			fd, err = retryEINTR(func() (int, error) {
				return unix.Openat(dirfd, base, osFlag|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm))
			})
			if err != nil {
				return err
			}
			if exists && isDirMode(uint32(st.Mode)) {
				// The directory may be a mount root itself.
				if ro, err = r.readOnlyAt(fd); err != nil {
					unix.Close(fd)
					fd = -1
				}
			}
			return err
		})
		if err != nil {
			return nil, false, err
		}
		if fd >= 0 {
			return os.NewFile(uintptr(fd), name), ro, nil
		}
		// A symlink to follow: its target replaces the final component.
		switch {
		case relook && hops < maxSymlinks:
			continue
		case len(target) > 0 && target[0] == '/':
			return nil, false, syscall.EPERM // absolute: outside every root
		case hops >= maxSymlinks:
			return nil, false, syscall.ELOOP
		case dir == ".":
			name = target
		default:
			name = dir + "/" + target
		}
	}
}

func readlinkAt(dirfd int, base string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := retryEINTR(func() (int, error) { return unix.Readlinkat(dirfd, base, buf) })
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
		if size >= 1<<16 {
			return "", syscall.ENAMETOOLONG
		}
	}
}
