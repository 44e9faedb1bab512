//go:build unix

package fsjail

import (
	"io"
	"io/fs"
	"os"
	"syscall"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
	"golang.org/x/sys/unix"
)

// file is an open file or directory of a jail. It wraps the *os.File that
// os.Root opened; no method resolves a path again.
//
// Like every sys.File, it is used by one guest module at a time and is not
// safe for concurrent use.
type file struct {
	experimentalsys.UnimplementedFile

	f        *os.File
	rc       syscall.RawConn
	flag     experimentalsys.Oflag
	readOnly bool
	closed   bool
	open     *openCounter    // released on Close
	quota    *Quota          // nil: no quota; else this file is in quota.open
	hidden   map[devIno]bool // directories a listing leaves out (hidden_unix.go)

	// Fields that do not change while the file is open, filled by the
	// first successful Stat.
	statted bool
	dev     uint64
	ino     sys.Inode
	isDir   bool
}

var _ experimentalsys.File = (*file)(nil)

func newFile(f *os.File, flag experimentalsys.Oflag, readOnly bool, open *openCounter) (*file, experimentalsys.Errno) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, toErrno(err)
	}
	return &file{f: f, rc: rc, flag: flag, readOnly: readOnly, open: open}, 0
}

// checkFileType refuses what the jail does not serve: FIFOs, sockets and
// devices, which a granted directory may hold (the host's, or made by a
// command the plugin ran). Reading or writing one can block the host's
// thread for as long as the other end likes, or reach a device. They fail
// with ENOTSUP, without blocking: the file was opened O_NONBLOCK, which
// this then clears on what it keeps, so reads and writes behave as the
// guest asked.
func (f *file) checkFileType(flag experimentalsys.Oflag) experimentalsys.Errno {
	var st unix.Stat_t
	if err := f.control(func(fd int) error { return unix.Fstat(fd, &st) }); err != nil {
		return toErrno(err)
	}
	switch uint32(st.Mode) & unix.S_IFMT {
	case unix.S_IFREG, unix.S_IFDIR, unix.S_IFLNK:
	default:
		return experimentalsys.ENOTSUP
	}
	f.dev, f.ino, f.isDir, f.statted = uint64(st.Dev), st.Ino, isDirMode(uint32(st.Mode)), true
	if flag&experimentalsys.O_NONBLOCK != 0 {
		return 0
	}
	return toErrno(f.control(func(fd int) error {
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err != nil || fl&unix.O_NONBLOCK == 0 {
			return err
		}
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
		return err
	}))
}

// track registers the open file with its quota, so that removing its last
// link while it is open gives nothing back.
func (f *file) track(q *Quota) {
	q.mu.Lock()
	q.open[devIno{f.dev, f.ino}]++
	q.mu.Unlock()
	f.quota = q
}

// untrack is called as the file closes. The last close of a regular file
// whose links are all gone frees its blocks, and gives them back.
func (f *file) untrack() {
	q := f.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	id := devIno{f.dev, f.ino}
	if q.open[id]--; q.open[id] > 0 {
		return
	}
	delete(q.open, id)
	var st unix.Stat_t
	if err := f.control(func(fd int) error { return unix.Fstat(fd, &st) }); err == nil &&
		st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink == 0 {
		q.releaseLocked(min(st.Size, int64(st.Blocks)*512), 0)
	}
}

// sizeBlocks returns the file's size and the bytes allocated to it.
func (f *file) sizeBlocks() (size, alloc int64, err error) {
	var st unix.Stat_t
	err = f.control(func(fd int) error { return unix.Fstat(fd, &st) })
	return st.Size, int64(st.Blocks) * 512, err
}

// chargedWrite runs write on buf at off (off < 0: at the file's offset, or
// its end in append mode) under the quota: the growth of the file's size
// is charged, and a write the quota cannot hold is cut short, or refused
// with EIO when nothing of it fits. The quota's lock is held throughout,
// so no other write of the plugin can slip between measure and charge.
func (f *file) chargedWrite(buf []byte, off int64, write func([]byte) (int, error)) (int, experimentalsys.Errno) {
	q := f.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	size, _, err := f.sizeBlocks()
	if err != nil {
		return 0, toErrno(err)
	}
	pos := off
	switch {
	case f.flag&experimentalsys.O_APPEND != 0:
		// The kernel writes at the end, pwrite included (Linux).
		pos = size
	case pos < 0:
		if pos, err = f.f.Seek(0, io.SeekCurrent); err != nil {
			return 0, toErrno(err)
		}
	}
	end := pos + int64(len(buf))
	if end < pos {
		return 0, experimentalsys.EINVAL
	}
	if end > size {
		limit := size + q.roomLocked()
		if pos >= limit {
			return 0, experimentalsys.EIO // ErrQuotaExceeded
		}
		if end > limit {
			buf = buf[:limit-pos]
		}
	}
	n, err := write(buf)
	if newSize, _, serr := f.sizeBlocks(); serr == nil {
		q.bytes += max(newSize-size, 0)
	} else if n > 0 {
		q.bytes += max(pos+int64(n)-size, 0)
	}
	return n, f.fileErrno(err)
}

// control runs fn with the file's descriptor, which stays valid meanwhile.
func (f *file) control(fn func(fd int) error) error {
	var opErr error
	if err := f.rc.Control(func(fd uintptr) { opErr = fn(int(fd)) }); err != nil {
		return err
	}
	return opErr
}

func (f *file) cached() experimentalsys.Errno {
	if f.statted {
		return 0
	}
	_, errno := f.Stat()
	return errno
}

// Dev implements sys.File.
func (f *file) Dev() (uint64, experimentalsys.Errno) {
	if errno := f.cached(); errno != 0 {
		return 0, errno
	}
	return f.dev, 0
}

// Ino implements sys.File.
func (f *file) Ino() (sys.Inode, experimentalsys.Errno) {
	if errno := f.cached(); errno != 0 {
		return 0, errno
	}
	return f.ino, 0
}

// IsDir implements sys.File.
func (f *file) IsDir() (bool, experimentalsys.Errno) {
	if errno := f.cached(); errno != 0 {
		return false, errno
	}
	return f.isDir, 0
}

// IsAppend implements sys.File.
func (f *file) IsAppend() bool {
	return f.flag&experimentalsys.O_APPEND != 0
}

// SetAppend implements sys.File. The descriptor's O_APPEND flag is changed
// in place with fcntl; the file is not re-opened.
func (f *file) SetAppend(enable bool) experimentalsys.Errno {
	if f.closed {
		return experimentalsys.EBADF
	}
	if isDir, errno := f.IsDir(); errno != 0 {
		return errno
	} else if isDir {
		return experimentalsys.EISDIR
	}
	err := f.control(func(fd int) error {
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err != nil {
			return err
		}
		if enable {
			fl |= unix.O_APPEND
		} else {
			fl &^= unix.O_APPEND
		}
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl)
		return err
	})
	if err != nil {
		return toErrno(err)
	}
	if enable {
		f.flag |= experimentalsys.O_APPEND
	} else {
		f.flag &^= experimentalsys.O_APPEND
	}
	return 0
}

// Stat implements sys.File.
func (f *file) Stat() (sys.Stat_t, experimentalsys.Errno) {
	f.open.touch()
	if f.closed {
		return sys.Stat_t{}, experimentalsys.EBADF
	}
	fi, err := f.f.Stat()
	if err != nil {
		return sys.Stat_t{}, toErrno(err)
	}
	st := sys.NewStat_t(fi)
	f.dev, f.ino, f.isDir, f.statted = st.Dev, st.Ino, st.Mode.IsDir(), true
	return st, 0
}

// Read implements sys.File.
func (f *file) Read(buf []byte) (int, experimentalsys.Errno) {
	if f.closed {
		return 0, experimentalsys.EBADF
	}
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.f.Read(buf)
	return n, f.fileErrno(err)
}

// Pread implements sys.File.
func (f *file) Pread(buf []byte, off int64) (int, experimentalsys.Errno) {
	if f.closed {
		return 0, experimentalsys.EBADF
	}
	if off < 0 {
		return 0, experimentalsys.EINVAL
	}
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.f.ReadAt(buf, off)
	return n, f.fileErrno(err)
}

// fileOffset is int64. sys.File.Seek must return an Errno, not an error;
// declaring its offset with this alias keeps go vet's stdmethods check, which
// assumes every Seek method implements io.Seeker, from rejecting it.
type fileOffset = int64

// Seek implements sys.File. Seeking a directory to zero rewinds it, making
// entries added since it was opened visible.
func (f *file) Seek(offset fileOffset, whence int) (int64, experimentalsys.Errno) {
	if f.closed {
		return 0, experimentalsys.EBADF
	}
	if whence < io.SeekStart || whence > io.SeekEnd {
		return 0, experimentalsys.EINVAL
	}
	n, err := f.f.Seek(offset, whence)
	return n, toErrno(err)
}

// Readdir implements sys.File. Names are read from the descriptor and each
// entry is stat'ed relative to it, never by path.
func (f *file) Readdir(n int) ([]experimentalsys.Dirent, experimentalsys.Errno) {
	f.open.touch()
	if f.closed {
		return nil, experimentalsys.EBADF
	}
	if isDir, errno := f.IsDir(); errno != 0 {
		return nil, errno
	} else if !isDir {
		return nil, experimentalsys.EBADF
	}

	var dirents []experimentalsys.Dirent
	for n <= 0 || len(dirents) < n {
		count := -1
		if n > 0 {
			count = n - len(dirents)
		}
		names, err := f.f.Readdirnames(count)
		if err != nil && err != io.EOF {
			errno := toErrno(err)
			if errno == experimentalsys.ENOTDIR || errno == experimentalsys.EINVAL {
				errno = experimentalsys.EBADF
			}
			return nil, errno
		}
		if len(names) == 0 {
			break
		}
		if dirents == nil {
			dirents = make([]experimentalsys.Dirent, 0, len(names))
		}
		err = f.control(func(dirfd int) error {
			for _, name := range names {
				st, err := lstatAt(dirfd, name)
				switch {
				case err == nil && f.hidden[devIno{uint64(st.Dev), uint64(st.Ino)}]:
					// Hidden from the guest: not there.
				case err == nil:
					dirents = append(dirents, experimentalsys.Dirent{
						Name: name,
						Ino:  st.Ino,
						Type: fileType(uint32(st.Mode)),
					})
				case err == unix.ENOENT:
					// Removed since it was listed: as if never there.
				default:
					// Listed but not stat-able (e.g. a directory without
					// search permission): type unknown.
					dirents = append(dirents, experimentalsys.Dirent{Name: name, Type: fs.ModeIrregular})
				}
			}
			return nil
		})
		if err != nil {
			return nil, toErrno(err)
		}
		if n <= 0 {
			break
		}
	}
	return dirents, 0
}

// fileType converts a st_mode file type to fs.FileMode type bits.
func fileType(mode uint32) fs.FileMode {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return 0
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}

// Write implements sys.File.
func (f *file) Write(buf []byte) (int, experimentalsys.Errno) {
	if f.closed {
		return 0, experimentalsys.EBADF
	}
	if len(buf) == 0 {
		return 0, 0
	}
	if f.quota != nil {
		return f.chargedWrite(buf, -1, f.f.Write)
	}
	n, err := f.f.Write(buf)
	return n, toErrno(err)
}

// Pwrite implements sys.File. It uses pwrite(2) directly so that it behaves
// as the host kernel does whatever the O_APPEND history of the descriptor
// (os.File.WriteAt refuses files opened with O_APPEND).
func (f *file) Pwrite(buf []byte, off int64) (int, experimentalsys.Errno) {
	if f.closed {
		return 0, experimentalsys.EBADF
	}
	if off < 0 {
		return 0, experimentalsys.EINVAL
	}
	if len(buf) == 0 {
		return 0, 0
	}
	if f.quota != nil {
		return f.chargedWrite(buf, off, func(buf []byte) (int, error) { return f.pwrite(buf, off) })
	}
	n, err := f.pwrite(buf, off)
	return n, f.fileErrno(err)
}

// pwrite writes all of buf at off with pwrite(2).
func (f *file) pwrite(buf []byte, off int64) (int, error) {
	var written int
	err := f.control(func(fd int) error {
		for written < len(buf) {
			m, err := retryEINTR(func() (int, error) {
				return unix.Pwrite(fd, buf[written:], off+int64(written))
			})
			if err != nil {
				return err
			}
			if m == 0 {
				return io.ErrShortWrite
			}
			written += m
		}
		return nil
	})
	return written, err
}

// Truncate implements sys.File.
func (f *file) Truncate(size int64) experimentalsys.Errno {
	if f.closed {
		return experimentalsys.EBADF
	}
	if f.readOnly {
		return experimentalsys.EROFS
	}
	if size < 0 {
		return experimentalsys.EINVAL
	}
	if f.quota != nil {
		return f.chargedTruncate(size)
	}
	return f.fileErrno(f.f.Truncate(size))
}

// chargedTruncate truncates under the quota: growth is charged (holes
// included), and shrinking gives back the smaller of the bytes cut and the
// blocks freed.
func (f *file) chargedTruncate(size int64) experimentalsys.Errno {
	q := f.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	old, oldAlloc, err := f.sizeBlocks()
	if err != nil {
		return f.fileErrno(err)
	}
	if size > old && size-old > q.roomLocked() {
		return experimentalsys.EIO // ErrQuotaExceeded
	}
	err = f.f.Truncate(size)
	newSize, newAlloc, serr := f.sizeBlocks()
	switch {
	case serr != nil:
		if err == nil && size > old {
			q.bytes += size - old
		}
	case newSize > old:
		q.bytes += newSize - old
	case newSize < old:
		q.bytes -= min(old-newSize, max(oldAlloc-newAlloc, 0))
	}
	return f.fileErrno(err)
}

// Sync implements sys.File.
func (f *file) Sync() experimentalsys.Errno {
	if f.closed {
		return experimentalsys.EBADF
	}
	return toErrno(f.f.Sync())
}

// Datasync implements sys.File.
func (f *file) Datasync() experimentalsys.Errno {
	if f.closed {
		return experimentalsys.EBADF
	}
	return toErrno(f.control(fdatasync))
}

// Utimens implements sys.File.
func (f *file) Utimens(atim, mtim int64) experimentalsys.Errno {
	if f.closed {
		return experimentalsys.EBADF
	}
	if f.readOnly {
		return experimentalsys.EROFS
	}
	return toErrno(f.control(func(fd int) error { return futimens(fd, atim, mtim) }))
}

// Close implements sys.File.
func (f *file) Close() experimentalsys.Errno {
	if f.closed {
		return 0
	}
	f.closed = true
	if f.quota != nil {
		f.untrack()
	}
	f.open.release()
	return toErrno(f.f.Close())
}

// fileErrno maps err for an operation that needs a regular file: it fails
// on a directory with EISDIR.
func (f *file) fileErrno(err error) experimentalsys.Errno {
	errno := toErrno(err)
	if errno == 0 {
		return 0
	}
	if isDir, serr := f.IsDir(); serr == 0 && isDir {
		return experimentalsys.EISDIR
	}
	return errno
}
