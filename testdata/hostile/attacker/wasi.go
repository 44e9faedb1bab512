//go:build wasip1

package main

import (
	"errors"
	"os"
	"syscall"
	"unsafe"
)

// Raw WASI preview 1 imports. Go's os and syscall packages clean paths
// lexically and pick a pre-open by prefix before the host sees anything,
// so "../" never reaches the host through them. These bindings pass a
// path exactly as written, relative to a directory descriptor, which is
// what a hostile module written in any language can do.

//go:wasmimport wasi_snapshot_preview1 path_open
//go:noescape
func wasiPathOpen(fd int32, dirflags uint32, path *byte, pathLen uint32, oflags uint32, rightsBase uint64, rightsInheriting uint64, fdflags uint32, newFd *int32) uint32

//go:wasmimport wasi_snapshot_preview1 path_link
//go:noescape
func wasiPathLink(oldFd int32, oldFlags uint32, oldPath *byte, oldLen uint32, newFd int32, newPath *byte, newLen uint32) uint32

//go:wasmimport wasi_snapshot_preview1 path_rename
//go:noescape
func wasiPathRename(fd int32, oldPath *byte, oldLen uint32, newFd int32, newPath *byte, newLen uint32) uint32

//go:wasmimport wasi_snapshot_preview1 path_unlink_file
//go:noescape
func wasiPathUnlink(fd int32, path *byte, pathLen uint32) uint32

//go:wasmimport wasi_snapshot_preview1 path_create_directory
//go:noescape
func wasiPathMkdir(fd int32, path *byte, pathLen uint32) uint32

//go:wasmimport wasi_snapshot_preview1 path_remove_directory
//go:noescape
func wasiPathRmdir(fd int32, path *byte, pathLen uint32) uint32

//go:wasmimport wasi_snapshot_preview1 path_symlink
//go:noescape
func wasiPathSymlink(oldPath *byte, oldLen uint32, fd int32, newPath *byte, newLen uint32) uint32

//go:wasmimport wasi_snapshot_preview1 path_filestat_get
//go:noescape
func wasiPathStat(fd int32, flags uint32, path *byte, pathLen uint32, buf *[64]byte) uint32

//go:wasmimport wasi_snapshot_preview1 path_filestat_set_times
//go:noescape
func wasiPathSetTimes(fd int32, flags uint32, path *byte, pathLen uint32, atim uint64, mtim uint64, fstFlags uint32) uint32

const (
	lookupFollow = 1 // lookupflags: follow a final symlink

	oCreat     = 1 // oflags
	oDirectory = 2
	oTrunc     = 8

	fstMtim = 4 // fstflags: set mtim to the given value

	allRights  = ^uint64(0)
	readRights = 1 << 1 // fd_read: wazero opens read-only without fd_write
)

func bytePtr(s string) (*byte, uint32) {
	if s == "" {
		return nil, 0
	}
	return unsafe.StringData(s), uint32(len(s))
}

// dirFD opens dir through os and returns its descriptor: path operations
// relative to it reach the host's filesystem implementation unchanged.
func dirFD(dir string) (int32, error) {
	f, err := os.Open(dir)
	if err != nil {
		return -1, err
	}
	openDirs = append(openDirs, f) // keep it open
	return int32(f.Fd()), nil
}

var openDirs []*os.File

func errnoOf(e uint32) error {
	if e == 0 {
		return nil
	}
	return syscall.Errno(e)
}

func rawOpen(fd int32, path string, oflags uint32, follow bool) (*os.File, error) {
	return rawOpenRights(fd, path, oflags, follow, allRights)
}

func rawOpenRights(fd int32, path string, oflags uint32, follow bool, rights uint64) (*os.File, error) {
	p, n := bytePtr(path)
	var flags uint32
	if follow {
		flags = lookupFollow
	}
	var nfd int32
	if err := errnoOf(wasiPathOpen(fd, flags, p, n, oflags, rights, rights, 0, &nfd)); err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(nfd), path), nil
}

func rawRead(fd int32, path string) (string, error) {
	f, err := rawOpenRights(fd, path, 0, true, readRights)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b := make([]byte, 1<<16)
	n, err := f.Read(b)
	if err != nil && n == 0 {
		return "", err
	}
	return string(b[:n]), nil
}

func rawLink(oldFd int32, oldPath string, follow bool, newFd int32, newPath string) error {
	op, on := bytePtr(oldPath)
	np, nn := bytePtr(newPath)
	var flags uint32
	if follow {
		flags = lookupFollow
	}
	return errnoOf(wasiPathLink(oldFd, flags, op, on, newFd, np, nn))
}

func rawRename(oldFd int32, oldPath string, newFd int32, newPath string) error {
	op, on := bytePtr(oldPath)
	np, nn := bytePtr(newPath)
	return errnoOf(wasiPathRename(oldFd, op, on, newFd, np, nn))
}

func rawUnlink(fd int32, path string) error {
	p, n := bytePtr(path)
	return errnoOf(wasiPathUnlink(fd, p, n))
}

func rawMkdir(fd int32, path string) error {
	p, n := bytePtr(path)
	return errnoOf(wasiPathMkdir(fd, p, n))
}

func rawRmdir(fd int32, path string) error {
	p, n := bytePtr(path)
	return errnoOf(wasiPathRmdir(fd, p, n))
}

func rawSymlink(target string, fd int32, path string) error {
	tp, tn := bytePtr(target)
	p, n := bytePtr(path)
	return errnoOf(wasiPathSymlink(tp, tn, fd, p, n))
}

func rawStat(fd int32, path string) error {
	p, n := bytePtr(path)
	var buf [64]byte
	return errnoOf(wasiPathStat(fd, lookupFollow, p, n, &buf))
}

func rawSetMtime(fd int32, path string, nsec uint64) error {
	p, n := bytePtr(path)
	return errnoOf(wasiPathSetTimes(fd, lookupFollow, p, n, 0, nsec, fstMtim))
}

var errnoNames = map[syscall.Errno]string{
	syscall.EPERM: "EPERM", syscall.ENOENT: "ENOENT", syscall.EACCES: "EACCES", syscall.EROFS: "EROFS",
	syscall.ELOOP: "ELOOP", syscall.ENOTDIR: "ENOTDIR", syscall.EISDIR: "EISDIR", syscall.EBADF: "EBADF",
	syscall.EEXIST: "EEXIST", syscall.ENOSYS: "ENOSYS", syscall.EINVAL: "EINVAL", syscall.EIO: "EIO",
	syscall.ENOTEMPTY: "ENOTEMPTY", syscall.EXDEV: "EXDEV", syscall.EMFILE: "EMFILE", syscall.ENFILE: "ENFILE",
	syscall.ENOTCAPABLE: "ENOTCAPABLE", syscall.ENAMETOOLONG: "ENAMETOOLONG", syscall.ENOTSUP: "ENOTSUP", syscall.EAGAIN: "EAGAIN",
}

// errnoName names the errno inside err: "OK" for nil, the errno's name,
// or the error text when it carries no errno.
func errnoName(err error) string {
	if err == nil {
		return "OK"
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		if n, ok := errnoNames[e]; ok {
			return n
		}
		return "errno " + e.Error()
	}
	return err.Error()
}
