//go:build unix

package fsjail

import (
	"errors"
	"fmt"
	"os"
	"path"
	"syscall"

	"golang.org/x/sys/unix"
)

// Hidden directories.
//
// A granted root may contain a directory the guest must not see: the
// host's own state (its compile cache, its sessions) when the agent runs
// in $HOME, say. WithHidden names such directories. A mount knows the
// identity (device and inode) of each hidden directory below its root,
// and of every directory between its root and one (their guards), and
// it takes the same path as a mount with nested mounts (nested_unix.go):
// every open resolves the final component itself and judges the
// directory it lands in by walking up by descriptor. A walk that meets a
// hidden directory fails with ENOENT, so no name, symlink, ".." or hard
// link reaches into one. Besides:
//
//   - a listing leaves hidden directories out;
//   - an operation on a hidden directory's own name (stat, open, rename,
//     remove, readlink, create over it) fails with ENOENT;
//   - a guard cannot be renamed or removed (EACCES), so the hidden
//     directory stays where the host keeps looking for it and a new one
//     the host would make in its place is never outside the jail's view.
//
// Stat and Lstat go through the same resolution as an open (a
// descriptor opened O_PATH on Linux), and Readlink judges the directory
// it reads in by descriptor, so a symlink swapped meanwhile gains nothing.

// linkHidden gives every mount the identities of the hidden directories
// below its root, and of their guards. A mount whose root is hidden, or
// lies in a hidden directory, is refused.
func linkHidden(mounts []Mount, fss []mountFS, paths []string) error {
	type dir struct {
		path string
		id   devIno
		up   map[devIno]bool
	}
	var hidden []dir
	for _, p := range paths {
		f, err := os.Open(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("hidden directory %s: %w", p, err)
		}
		var d dir
		rc, err := f.SyscallConn()
		if err == nil {
			cerr := rc.Control(func(fd uintptr) { d.id, d.up, err = ancestors(int(fd)) })
			err = errors.Join(err, cerr)
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("hidden directory %s: %w", p, err)
		}
		d.path = p
		hidden = append(hidden, d)
	}
	for i, m := range fss {
		r := m.(*rootFS)
		d, err := r.root.Open(".")
		if err != nil {
			return err
		}
		var up map[devIno]bool
		rc, err := d.SyscallConn()
		if err == nil {
			cerr := rc.Control(func(fd uintptr) { r.id, up, err = ancestors(int(fd)) })
			err = errors.Join(err, cerr)
		}
		d.Close()
		if err != nil {
			return fmt.Errorf("identifying mount root: %w", err)
		}
		for _, h := range hidden {
			switch {
			case h.id == r.id || up[h.id]:
				return fmt.Errorf("%w: mount %d (host path %q) is inside %s", ErrHidden, i, mounts[i].HostPath, h.path)
			case !h.up[r.id]:
				continue // elsewhere
			}
			if r.hidden == nil {
				r.hidden, r.guards = map[devIno]bool{}, map[devIno]bool{}
			}
			r.hidden[h.id] = true
			for a := range h.up {
				if a != r.id && !up[a] {
					r.guards[a] = true
				}
			}
		}
	}
	return nil
}

// checkEntry fails with ENOENT if base in dirfd is a hidden directory,
// and, when moving is set (the entry would be renamed or removed), with
// EACCES if it is a guard.
func (r *rootFS) checkEntry(dirfd int, base string, moving bool) error {
	if len(r.hidden) == 0 {
		return nil
	}
	st, err := lstatAt(dirfd, base)
	if err != nil {
		return nil // the operation itself reports it
	}
	id := devIno{uint64(st.Dev), uint64(st.Ino)}
	switch {
	case r.hidden[id]:
		return syscall.ENOENT
	case moving && r.guards[id]:
		return syscall.EACCES
	}
	return nil
}

// inVisibleParent is inParent for a mount with hidden directories: the
// directory must not be, or lie in, a hidden one, and base must not be
// one.
func (r *rootFS) inVisibleParent(dir, base string, fn func(dirfd int) error) error {
	return r.inParent(dir, func(dirfd int) error {
		if len(r.hidden) > 0 {
			if _, err := r.readOnlyAt(dirfd); err != nil {
				return err
			}
			if err := r.checkEntry(dirfd, base, false); err != nil {
				return err
			}
		}
		return fn(dirfd)
	})
}

// hideErr turns the error of resolving name into ENOENT when the
// resolution failed inside a hidden directory (ENOTDIR for a file there,
// say, would tell that it exists): it finds the longest prefix of name
// that opens as a directory and judges it by descriptor.
func (r *rootFS) hideErr(name string, err error) error {
	if len(r.hidden) == 0 || err == nil {
		return err
	}
	for p := path.Clean(name); p != "." && p != "/"; p = path.Dir(p) {
		d, oerr := r.root.OpenFile(p, os.O_RDONLY|unix.O_DIRECTORY, 0)
		if oerr != nil {
			continue
		}
		rc, cerr := d.SyscallConn()
		var herr error
		if cerr == nil {
			cerr = rc.Control(func(fd uintptr) { _, herr = r.readOnlyAt(int(fd)) })
		}
		d.Close()
		if cerr == nil && herr == syscall.ENOENT {
			return herr
		}
		break
	}
	return err
}
