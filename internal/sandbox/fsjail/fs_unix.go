//go:build unix

package fsjail

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
	"golang.org/x/sys/unix"
)

// writeFlags are the open flags that can modify a file or create one.
const writeFlags = experimentalsys.O_WRONLY | experimentalsys.O_RDWR |
	experimentalsys.O_CREAT | experimentalsys.O_TRUNC | experimentalsys.O_APPEND

// rootFS is the jailed sys.FS of one mount. Every path it is given is
// relative to root and resolved by os.Root; see the package documentation.
type rootFS struct {
	experimentalsys.UnimplementedFS

	root     *os.Root
	readOnly bool
	open     *openCounter
	quota    *Quota // nil: no quota

	// id is the root directory's identity; nested maps the identity of
	// every other mount's root to its read-only flag (see nested_unix.go).
	// Both are set once by New, before the mount is used.
	id     devIno
	nested map[devIno]bool
	// hidden holds the identities of the hidden directories below the
	// root, guards those of the directories between the root and one
	// (see hidden_unix.go). Set once by New.
	hidden map[devIno]bool
	guards map[devIno]bool
}

var _ experimentalsys.FS = (*rootFS)(nil)

func openMount(m Mount, open *openCounter, quota *Quota) (mountFS, error) {
	var root *os.Root
	var err error
	if m.Dir != nil {
		// The directory the caller opened, never its name again.
		root, err = m.Dir.OpenRoot(".")
	} else {
		root, err = os.OpenRoot(m.HostPath)
	}
	if err != nil {
		// os.OpenRoot reports a non-directory with an untyped error.
		if fi, serr := os.Stat(m.HostPath); serr == nil && !fi.IsDir() {
			return nil, fmt.Errorf("%w: %w", ErrNotDirectory, err)
		}
		return nil, err
	}
	// wazero opens the pre-open lazily and cannot report a failure then,
	// so make sure now that the directory can be opened and listed.
	dir, err := root.Open(".")
	if err != nil {
		_ = root.Close()
		return nil, err
	}
	_ = dir.Close()
	learnEscapeError(root)
	return &rootFS{root: root, readOnly: m.ReadOnly, open: open, quota: quota}, nil
}

// String implements fmt.Stringer for wazero's logging.
func (r *rootFS) String() string {
	if r.readOnly {
		return "fsjail:" + r.root.Name() + ":ro"
	}
	return "fsjail:" + r.root.Name()
}

// Close closes the underlying os.Root.
func (r *rootFS) Close() error {
	return r.root.Close()
}

// OpenFile implements sys.FS.
func (r *rootFS) OpenFile(name string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	name = rel(name)
	if name != "." || flag != 0 {
		// The root opened read-only is how wazero makes a pre-open real
		// (a guest's libc asks for every pre-open's type as it starts):
		// listing it is a use (file.Readdir), opening it is not.
		r.open.touch()
	}
	if name == "" {
		return nil, experimentalsys.ENOENT
	}
	if flag&(experimentalsys.O_WRONLY|experimentalsys.O_RDWR) == experimentalsys.O_WRONLY|experimentalsys.O_RDWR {
		return nil, experimentalsys.EINVAL
	}
	if r.readOnly && flag&writeFlags != 0 {
		return nil, experimentalsys.EROFS
	}
	var (
		f     *file
		errno experimentalsys.Errno
	)
	if r.quota == nil || r.readOnly {
		f, errno = r.openFile(name, flag, perm)
	} else {
		f, errno = r.openCharged(name, flag, perm)
	}
	if errno != 0 {
		return nil, errno
	}
	return f, 0
}

// openCharged opens name under the mount's quota: a file it creates costs
// one, and O_TRUNC truncates through the file so that the bytes it frees
// are given back.
func (r *rootFS) openCharged(name string, flag experimentalsys.Oflag, perm fs.FileMode) (*file, experimentalsys.Errno) {
	trunc := flag&experimentalsys.O_TRUNC != 0 && flag&(experimentalsys.O_WRONLY|experimentalsys.O_RDWR) != 0
	if trunc {
		flag &^= experimentalsys.O_TRUNC
	}
	create := func(flag experimentalsys.Oflag) (*file, experimentalsys.Errno) {
		if err := r.quota.Charge(0, 1); err != nil {
			return nil, experimentalsys.EIO
		}
		f, errno := r.openFile(name, flag, perm)
		if errno != 0 {
			r.quota.Release(0, 1)
		}
		return f, errno
	}
	var (
		f     *file
		errno experimentalsys.Errno
	)
	switch {
	case flag&experimentalsys.O_CREAT == 0:
		f, errno = r.openFile(name, flag, perm)
	case flag&experimentalsys.O_EXCL != 0:
		f, errno = create(flag)
	default:
		// Only a file that did not exist costs one: open it plainly
		// first, and create it exclusively if it is missing.
		f, errno = r.openFile(name, flag&^experimentalsys.O_CREAT, perm)
		if errno == experimentalsys.ENOENT {
			f, errno = create(flag | experimentalsys.O_EXCL)
			if errno == experimentalsys.EEXIST {
				// Made meanwhile, or a dangling symlink (which
				// O_EXCL refuses): create through it, paid for.
				f, errno = create(flag)
			}
		}
	}
	if errno == 0 && trunc {
		if errno = f.Truncate(0); errno != 0 {
			f.Close()
			return nil, errno
		}
	}
	return f, errno
}

// openFile opens name, counting it against the jail's open files.
func (r *rootFS) openFile(name string, flag experimentalsys.Oflag, perm fs.FileMode) (*file, experimentalsys.Errno) {
	// Always open non-blocking: opening a FIFO blocks until its other end
	// opens, and a device's open may block too. Only regular files,
	// directories and symlinks (with O_NOFOLLOW) are served; see
	// checkFileType.
	osFlag := toOSFlag(flag) | unix.O_NONBLOCK
	perm &= fs.ModePerm

	if !r.open.acquire() {
		return nil, experimentalsys.EAGAIN
	}
	var (
		f   *os.File
		ro  = r.readOnly
		err error
	)
	if r.hasNested() {
		f, ro, err = r.openNested(name, flag, osFlag, perm)
	} else if flag&experimentalsys.O_NOFOLLOW != 0 {
		f, err = r.openNoFollow(name, osFlag, perm)
	} else {
		f, err = r.root.OpenFile(name, osFlag, perm)
	}
	if err != nil {
		r.open.release()
		errno := toErrno(err)
		if errno == experimentalsys.EBADF && errors.Is(err, fs.ErrClosed) {
			// The Jail is closed: nothing is granted any more. wazero's
			// lazily opened pre-open only tolerates ENOENT here.
			errno = experimentalsys.ENOENT
		}
		return nil, errno
	}
	file, errno := newFile(f, flag, ro, r.open)
	if errno == 0 {
		file.hidden = r.hidden
		errno = file.checkFileType(flag)
	}
	if errno == 0 && r.quota != nil {
		file.track(r.quota)
	}
	if errno != 0 {
		_ = f.Close()
		r.open.release()
		return nil, errno
	}
	return file, 0
}

// hasNested reports whether other mounts' roots may lie below this
// read-write mount, so that mutations must find the innermost one.
func (r *rootFS) hasNested() bool {
	return (!r.readOnly && len(r.nested) > 0) || len(r.hidden) > 0
}

// openNoFollow opens name without following a symlink in its final
// component, which os.Root.OpenFile would follow.
func (r *rootFS) openNoFollow(name string, osFlag int, perm fs.FileMode) (*os.File, error) {
	dir, base, trailingSlash := splitParent(name)
	if base == "" || base == "." || base == ".." || trailingSlash {
		// Nothing to "not follow": the final component is a directory
		// reference or must be resolved as a directory anyway.
		return r.root.OpenFile(name, osFlag, perm)
	}
	var fd int
	err := r.inParent(dir, func(dirfd int) error {
		var err error
		fd, err = retryEINTR(func() (int, error) {
			return unix.Openat(dirfd, base, osFlag|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm))
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// inParent opens dir through os.Root and calls fn with its descriptor.
// Callers apply an *at system call to a single, non-followed name in it.
func (r *rootFS) inParent(dir string, fn func(dirfd int) error) error {
	d, err := r.root.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return r.hideErr(dir, err)
	}
	defer d.Close()
	rc, err := d.SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	if err := rc.Control(func(fd uintptr) { opErr = fn(int(fd)) }); err != nil {
		return err
	}
	return opErr
}

// splitParent splits name into the directory holding its final component
// and that component, with trailing slashes removed and reported. base is
// empty only for a name made of slashes, which is absolute.
func splitParent(name string) (dir, base string, trailingSlash bool) {
	end := len(name)
	for end > 0 && name[end-1] == '/' {
		end--
	}
	trailingSlash = end < len(name)
	trimmed := name[:end]
	i := strings.LastIndexByte(trimmed, '/')
	switch {
	case i < 0:
		return ".", trimmed, trailingSlash
	case i == 0:
		return "/", trimmed[1:], trailingSlash
	}
	return trimmed[:i], trimmed[i+1:], trailingSlash
}

// rel turns a name wazero passes into one relative to the root. wazero's
// sys.FS contract makes every name relative to the mount, and it names a
// directory the guest opened as "." (or "/") by "", so a guest working
// relative to such a descriptor (Rust std, C openat on a pre-open) reaches
// the jail as "/name": the mount's root, never the host's. wazero has
// already refused guest paths that are absolute or climb out with "..";
// whatever remains is resolved by os.Root, which refuses every escape.
// Only the empty name stays empty (ENOENT); "/" alone is the root.
func rel(name string) string {
	if name == "" || name[0] != '/' {
		return name
	}
	name = strings.TrimLeft(name, "/")
	if name == "" {
		return "."
	}
	return name
}

// target splits name for an operation on its final component and rejects
// names that cannot denote an entry of the root.
func target(name string) (dir, base string, trailingSlash bool, errno experimentalsys.Errno) {
	name = rel(name)
	switch {
	case name == "":
		return "", "", false, experimentalsys.ENOENT
	case strings.IndexByte(name, 0) >= 0:
		return "", "", false, experimentalsys.EINVAL
	}
	dir, base, trailingSlash = splitParent(name)
	return dir, base, trailingSlash, 0
}

func lstatAt(dirfd int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	_, err := retryEINTR(func() (int, error) {
		return 0, unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	})
	return st, err
}

func isDirMode(mode uint32) bool {
	return mode&unix.S_IFMT == unix.S_IFDIR
}

// Lstat implements sys.FS.
func (r *rootFS) Lstat(name string) (sys.Stat_t, experimentalsys.Errno) {
	r.open.touch()
	name = rel(name)
	if name == "" {
		return sys.Stat_t{}, experimentalsys.ENOENT
	}
	if len(r.hidden) > 0 {
		return r.statVisible(name, experimentalsys.O_NOFOLLOW)
	}
	fi, err := r.root.Lstat(name)
	if err != nil {
		return sys.Stat_t{}, toErrno(err)
	}
	return sys.NewStat_t(fi), 0
}

// statVisible stats name in a mount with hidden directories, through a
// descriptor openNested judged (pathOpenFlag: without reading it).
func (r *rootFS) statVisible(name string, flag experimentalsys.Oflag) (sys.Stat_t, experimentalsys.Errno) {
	osFlag := pathOpenFlag
	if flag&experimentalsys.O_NOFOLLOW != 0 {
		osFlag |= unix.O_NOFOLLOW
	}
	f, _, err := r.openNested(name, flag, osFlag, 0)
	if err != nil {
		return sys.Stat_t{}, toErrno(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return sys.Stat_t{}, toErrno(err)
	}
	return sys.NewStat_t(fi), 0
}

// Stat implements sys.FS.
func (r *rootFS) Stat(name string) (sys.Stat_t, experimentalsys.Errno) {
	r.open.touch()
	name = rel(name)
	if name == "" {
		return sys.Stat_t{}, experimentalsys.ENOENT
	}
	if len(r.hidden) > 0 {
		return r.statVisible(name, 0)
	}
	fi, err := r.root.Stat(name)
	if err != nil {
		return sys.Stat_t{}, toErrno(err)
	}
	return sys.NewStat_t(fi), 0
}

// Mkdir implements sys.FS.
func (r *rootFS) Mkdir(name string, perm fs.FileMode) experimentalsys.Errno {
	r.open.touch()
	return r.charged(func() experimentalsys.Errno { return r.mkdir(name, perm) })
}

// charged runs op, which creates one entry, under the quota: it costs one
// file, given back if op fails.
func (r *rootFS) charged(op func() experimentalsys.Errno) experimentalsys.Errno {
	if r.quota == nil || r.readOnly {
		return op()
	}
	if err := r.quota.Charge(0, 1); err != nil {
		return experimentalsys.EIO // ErrQuotaExceeded
	}
	errno := op()
	if errno != 0 {
		r.quota.Release(0, 1)
	}
	return errno
}

// removing runs op, which removes or replaces base in dirfd, under the
// quota's lock, and gives back what the removal frees: one file, and for
// a regular file's last link that no jail of the quota holds open, the
// smaller of its size and its allocated blocks.
func (r *rootFS) removing(dirfd int, base string, op func() error) error {
	q := r.quota
	if q == nil {
		return op()
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	st, lerr := lstatAt(dirfd, base)
	if err := op(); err != nil || lerr != nil {
		return err
	}
	var bytes int64
	if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink == 1 && q.open[devIno{uint64(st.Dev), st.Ino}] == 0 {
		bytes = min(st.Size, int64(st.Blocks)*512)
	}
	q.releaseLocked(bytes, 1)
	return nil
}

func (r *rootFS) mkdir(name string, perm fs.FileMode) experimentalsys.Errno {
	name = rel(name)
	if r.readOnly {
		return experimentalsys.EROFS
	}
	if name == "" {
		return experimentalsys.ENOENT
	}
	if r.hasNested() {
		dir, base, _, errno := target(name)
		if errno != 0 {
			return errno
		}
		return toErrno(r.inParent(dir, func(dirfd int) error {
			if err := errors.Join(r.writableAt(dirfd), r.checkEntry(dirfd, base, false)); err != nil {
				return err
			}
			_, err := retryEINTR(func() (int, error) { return 0, unix.Mkdirat(dirfd, base, uint32(perm&fs.ModePerm)) })
			return err
		}))
	}
	return toErrno(r.root.Mkdir(name, perm&fs.ModePerm))
}

// Chmod implements sys.FS. Only the permission bits of perm are applied.
func (r *rootFS) Chmod(name string, perm fs.FileMode) experimentalsys.Errno {
	r.open.touch()
	name = rel(name)
	if r.readOnly {
		return experimentalsys.EROFS
	}
	if name == "" {
		return experimentalsys.ENOENT
	}
	if r.hasNested() {
		return r.onNestedFile(name, func(f *os.File) error { return f.Chmod(perm & fs.ModePerm) })
	}
	return toErrno(r.root.Chmod(name, perm&fs.ModePerm))
}

// Utimens implements sys.FS.
func (r *rootFS) Utimens(name string, atim, mtim int64) experimentalsys.Errno {
	r.open.touch()
	name = rel(name)
	if r.readOnly {
		return experimentalsys.EROFS
	}
	if name == "" {
		return experimentalsys.ENOENT
	}
	if r.hasNested() {
		return r.onNestedFile(name, func(f *os.File) error {
			rc, err := f.SyscallConn()
			if err != nil {
				return err
			}
			var opErr error
			if err := rc.Control(func(fd uintptr) { opErr = futimens(int(fd), atim, mtim) }); err != nil {
				return err
			}
			return opErr
		})
	}
	return toErrno(r.root.Chtimes(name, nanosToTime(atim), nanosToTime(mtim)))
}

// onNestedFile applies fn to name, following symlinks, in a mount with
// nested mounts: the file is opened (read-only, without blocking) through
// openNested, which tells whether it lies in a read-only area.
func (r *rootFS) onNestedFile(name string, fn func(*os.File) error) experimentalsys.Errno {
	f, ro, err := r.openNested(name, experimentalsys.O_RDONLY, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return toErrno(err)
	}
	defer f.Close()
	if ro {
		return experimentalsys.EROFS
	}
	return toErrno(fn(f))
}

// nanosToTime converts a wazero timestamp; the zero time.Time tells os to
// leave the timestamp unchanged.
func nanosToTime(nanos int64) time.Time {
	if nanos == experimentalsys.UTIME_OMIT {
		return time.Time{}
	}
	return time.Unix(0, nanos)
}

// Rename implements sys.FS.
func (r *rootFS) Rename(from, to string) experimentalsys.Errno {
	r.open.touch()
	if r.readOnly {
		return experimentalsys.EROFS
	}
	fromDir, fromBase, fromSlash, errno := target(from)
	if errno != 0 {
		return errno
	}
	toDir, toBase, toSlash, errno := target(to)
	if errno != 0 {
		return errno
	}
	if isDot(fromBase) || isDot(toBase) {
		return experimentalsys.EINVAL
	}
	err := r.inParent(fromDir, func(fromfd int) error {
		return r.inParent(toDir, func(tofd int) error {
			if r.hasNested() {
				for _, err := range []error{r.writableAt(fromfd), r.writableAt(tofd),
					r.notReadOnlyRoot(fromfd, fromBase), r.notReadOnlyRoot(tofd, toBase)} {
					if err != nil {
						return err
					}
				}
			}
			if fromSlash || toSlash {
				// A trailing slash only names a directory. The kernel
				// does not follow a symlink here either.
				st, err := lstatAt(fromfd, fromBase)
				if err != nil {
					return err
				}
				if !isDirMode(uint32(st.Mode)) {
					return syscall.ENOTDIR
				}
			}
			rename := func() error {
				_, err := retryEINTR(func() (int, error) {
					return 0, unix.Renameat(fromfd, fromBase, tofd, toBase)
				})
				return err
			}
			if r.quota != nil {
				from, ferr := lstatAt(fromfd, fromBase)
				to, terr := lstatAt(tofd, toBase)
				if ferr == nil && terr == nil && (from.Dev != to.Dev || from.Ino != to.Ino) {
					// The target is replaced: as if removed.
					return r.removing(tofd, toBase, rename)
				}
			}
			return rename()
		})
	})
	return toErrno(err)
}

// Rmdir implements sys.FS.
func (r *rootFS) Rmdir(name string) experimentalsys.Errno {
	r.open.touch()
	if r.readOnly {
		return experimentalsys.EROFS
	}
	dir, base, _, errno := target(name)
	if errno != 0 {
		return errno
	}
	switch base {
	case ".":
		return experimentalsys.EINVAL
	case "..":
		return experimentalsys.ENOTEMPTY
	}
	err := r.inParent(dir, func(dirfd int) error {
		if r.hasNested() {
			if err := errors.Join(r.writableAt(dirfd), r.notReadOnlyRoot(dirfd, base)); err != nil {
				return err
			}
		}
		return r.removing(dirfd, base, func() error {
			_, err := retryEINTR(func() (int, error) {
				return 0, unix.Unlinkat(dirfd, base, unix.AT_REMOVEDIR)
			})
			return err
		})
	})
	return toErrno(err)
}

// Unlink implements sys.FS.
func (r *rootFS) Unlink(name string) experimentalsys.Errno {
	r.open.touch()
	if r.readOnly {
		return experimentalsys.EROFS
	}
	dir, base, trailingSlash, errno := target(name)
	if errno != 0 {
		return errno
	}
	if isDot(base) {
		return experimentalsys.EISDIR
	}
	err := r.inParent(dir, func(dirfd int) error {
		if r.hasNested() {
			if err := errors.Join(r.writableAt(dirfd), r.checkEntry(dirfd, base, true)); err != nil {
				return err
			}
		}
		if trailingSlash {
			// "name/" names a directory, which unlink never removes.
			st, err := lstatAt(dirfd, base)
			switch {
			case err != nil:
				return err
			case isDirMode(uint32(st.Mode)):
				return syscall.EISDIR
			default:
				return syscall.ENOTDIR
			}
		}
		err := r.removing(dirfd, base, func() error {
			_, err := retryEINTR(func() (int, error) {
				return 0, unix.Unlinkat(dirfd, base, 0)
			})
			return err
		})
		if err == unix.EPERM {
			// BSDs report EPERM when unlinking a directory.
			if st, serr := lstatAt(dirfd, base); serr == nil && isDirMode(uint32(st.Mode)) {
				return syscall.EISDIR
			}
		}
		return err
	})
	return toErrno(err)
}

// Link implements sys.FS. Both names are resolved in this root; a symlink
// in oldName's final component is linked itself, not its target.
func (r *rootFS) Link(oldName, newName string) experimentalsys.Errno {
	r.open.touch()
	return r.charged(func() experimentalsys.Errno { return r.link(oldName, newName) })
}

func (r *rootFS) link(oldName, newName string) experimentalsys.Errno {
	oldName, newName = rel(oldName), rel(newName)
	if r.readOnly {
		return experimentalsys.EROFS
	}
	if oldName == "" || newName == "" {
		return experimentalsys.ENOENT
	}
	if r.hasNested() {
		return r.linkNested(oldName, newName)
	}
	return toErrno(r.root.Link(oldName, newName))
}

// Symlink implements sys.FS. Absolute targets are refused with EPERM, as
// the WASI filesystem rules require; relative targets are stored verbatim.
func (r *rootFS) Symlink(oldName, linkName string) experimentalsys.Errno {
	r.open.touch()
	return r.charged(func() experimentalsys.Errno { return r.symlink(oldName, linkName) })
}

func (r *rootFS) symlink(oldName, linkName string) experimentalsys.Errno {
	linkName = rel(linkName)
	if r.readOnly {
		return experimentalsys.EROFS
	}
	switch {
	case oldName == "" || linkName == "":
		return experimentalsys.ENOENT
	case path.IsAbs(oldName):
		return experimentalsys.EPERM
	case strings.IndexByte(oldName, 0) >= 0:
		return experimentalsys.EINVAL
	}
	if r.hasNested() {
		dir, base, _, errno := target(linkName)
		if errno != 0 {
			return errno
		}
		return toErrno(r.inParent(dir, func(dirfd int) error {
			if err := errors.Join(r.writableAt(dirfd), r.checkEntry(dirfd, base, false)); err != nil {
				return err
			}
			_, err := retryEINTR(func() (int, error) { return 0, unix.Symlinkat(oldName, dirfd, base) })
			return err
		}))
	}
	return toErrno(r.root.Symlink(oldName, linkName))
}

// Readlink implements sys.FS.
func (r *rootFS) Readlink(name string) (string, experimentalsys.Errno) {
	r.open.touch()
	name = rel(name)
	if name == "" {
		return "", experimentalsys.ENOENT
	}
	if len(r.hidden) > 0 {
		dir, base, _, errno := target(name)
		if errno != 0 {
			return "", errno
		}
		var dst string
		err := r.inVisibleParent(dir, base, func(dirfd int) (err error) {
			dst, err = readlinkAt(dirfd, base)
			return err
		})
		if err != nil {
			return "", toErrno(err)
		}
		return dst, 0
	}
	dst, err := r.root.Readlink(name)
	if err != nil {
		return "", toErrno(err)
	}
	return dst, 0
}

// linkNested makes a hard link in a mount with nested mounts. Both
// directories must be writable: a link out of a read-only area would make
// its file writable through the new name.
func (r *rootFS) linkNested(oldName, newName string) experimentalsys.Errno {
	oldDir, oldBase, oldSlash, errno := target(oldName)
	if errno != 0 {
		return errno
	}
	newDir, newBase, newSlash, errno := target(newName)
	if errno != 0 {
		return errno
	}
	if isDot(oldBase) || isDot(newBase) || oldSlash || newSlash {
		// Directories cannot be hard linked; let os.Root say how.
		return toErrno(r.root.Link(oldName, newName))
	}
	return toErrno(r.inParent(oldDir, func(oldfd int) error {
		return r.inParent(newDir, func(newfd int) error {
			if err := errors.Join(r.writableAt(oldfd), r.writableAt(newfd),
				r.checkEntry(oldfd, oldBase, false), r.checkEntry(newfd, newBase, false)); err != nil {
				return err
			}
			_, err := retryEINTR(func() (int, error) { return 0, unix.Linkat(oldfd, oldBase, newfd, newBase, 0) })
			return err
		})
	}))
}

func isDot(base string) bool {
	return base == "" || base == "." || base == ".."
}

// toOSFlag converts wazero open flags to os.OpenFile flags. O_NOFOLLOW is
// handled by the caller.
func toOSFlag(flag experimentalsys.Oflag) int {
	var f int
	switch flag & (experimentalsys.O_RDONLY | experimentalsys.O_RDWR | experimentalsys.O_WRONLY) {
	case experimentalsys.O_RDWR:
		f = os.O_RDWR
	case experimentalsys.O_WRONLY:
		f = os.O_WRONLY
	default:
		f = os.O_RDONLY
	}
	for _, m := range [...]struct {
		from experimentalsys.Oflag
		to   int
	}{
		{experimentalsys.O_APPEND, os.O_APPEND},
		{experimentalsys.O_CREAT, os.O_CREATE},
		{experimentalsys.O_EXCL, os.O_EXCL},
		{experimentalsys.O_TRUNC, os.O_TRUNC},
		{experimentalsys.O_SYNC, os.O_SYNC},
		{experimentalsys.O_RSYNC, os.O_SYNC},
		{experimentalsys.O_DSYNC, dsyncFlag},
		{experimentalsys.O_NONBLOCK, unix.O_NONBLOCK},
		{experimentalsys.O_DIRECTORY, unix.O_DIRECTORY},
	} {
		if flag&m.from != 0 {
			f |= m.to
		}
	}
	return f
}

// retryEINTR runs a raw system call until it is not interrupted.
func retryEINTR(call func() (int, error)) (int, error) {
	for {
		n, err := call()
		if err != unix.EINTR {
			return n, err
		}
	}
}
