// Package fsjail confines the filesystem view of WASI (wasip1) guests run on
// wazero to a fixed set of host directories, and holds against every path
// trick a hostile guest can play.
//
// wazero's own WithDirMount is not a jail: its DirFS joins guest paths onto a
// host path as strings and lets the kernel resolve them, so a symlink created
// by the guest (for example "../../../../etc/passwd") is followed straight out
// of the mount (wazero issue #2321).
//
// # Design
//
// Each Mount is opened once, by New, as its own os.Root (one directory file
// descriptor) and wrapped in an experimental/sys.FS that wazero registers as a
// separate WASI pre-open at the mount's guest path. The guest sees those
// pre-opens and nothing else: there is no "/" unless the caller mounts one,
// so /etc, /proc/self and every other host path simply do not exist for it.
//
// Path resolution is never done with strings. Every path a guest passes is
// resolved component by component by os.Root (openat with O_NOFOLLOW, with
// symbolic links read and evaluated by os.Root itself), which follows
// symlinks only while they stay beneath the root and refuses ".." out of
// it and absolute or escaping link targets. As in wazero's sys.FS
// contract, names are relative to the mount: a leading "/" is the mount's
// root (wazero passes "/name" for a name relative to a directory the guest
// opened as "."), never the host's. Nothing is checked first and
// used later, so a symlink swapped in during an operation cannot redirect it.
// Symlinks inside a root that point inside it keep working.
//
// A few operations have no os.Root method with POSIX semantics: unlink versus
// rmdir (Root.Remove does either), rename over a directory (Root.Rename
// refuses it) and open with O_NOFOLLOW (Root.OpenFile follows anyway). For
// those the parent directory is opened through os.Root and the *at system
// call (unlinkat, renameat, openat with O_NOFOLLOW) is applied to the single
// final component, which contains no slash, is never "." or "..", and is not
// followed by the kernel. That is the same technique os.Root uses internally.
//
// An open file is the *os.File os.Root returned: reads, writes, seeks,
// truncates and timestamps work on its descriptor and never resolve a path
// again. Directory listings read names from the descriptor and stat each
// entry relative to it (fstatat), never by host path, and rewinding a
// directory seeks its descriptor instead of re-opening it by name.
//
// # Errors
//
// Guests see honest POSIX errno values (ENOENT, ENOTDIR, EISDIR, EEXIST,
// ENOTEMPTY, ELOOP, EBADF, EINVAL, EACCES, EROFS...). A path that would leave
// its root, through ".." or a symlink, fails with EPERM:
// the operation is not permitted, whether or not the target exists. This is
// the errno wazero itself uses for invalid guest paths and the one the WASI
// filesystem rules prescribe for absolute symlink targets. A chain of more
// than a few symlinks, or a loop, fails with ELOOP. Host errors outside
// wazero's errno set (ENOSPC, EXDEV, EBUSY...) reach the guest as EIO.
//
// Creating a symlink whose target is absolute fails with EPERM (as in WASI);
// relative targets are stored verbatim, even when they point outside, because
// every later resolution goes through os.Root, and Readlink returns the text
// as written. Hard links keep both ends in one root. Permission bits beyond
// 0o777 (setuid, setgid, sticky) are never applied.
//
// Each mount is a distinct sys.FS, so a rename or hard link across mounts
// never reaches this package: wazero refuses it with ENOSYS. (wazero's Errno
// set has no EXDEV, so no implementation could return it to the guest.)
//
// The jail confines names, not what the host put in a root: a mount point
// or hard link the host placed inside a granted directory is reachable
// like any other entry. Grant only directories whose content the guest may
// see. FIFOs, sockets and device nodes are never opened: every open is
// non-blocking and anything but a regular file, directory or symlink fails
// with ENOTSUP (a FIFO's open would otherwise block the host's thread
// until its other end opened).
//
// # Nested mounts and the disk quota
//
// A mount with another mount's root below it lets the innermost one decide
// every mutation; see nested_unix.go. WithQuota charges growth in file size
// (sparse holes included) and created entries to a Quota shared by a
// plugin's jails; see Quota.
//
// # Hidden directories
//
// WithHidden names host directories inside a mount that the guest must not
// see (the host's own state). They are known by identity and judged by
// descriptor, as nested mounts are: everything that lands in one fails
// with ENOENT, listings leave it out, and the directories that lead to it
// cannot be moved. See hidden_unix.go.
//
// # Read-only mounts
//
// On a read-only mount every mutating operation fails with EROFS: opening with
// write access, O_CREAT, O_TRUNC or O_APPEND, mkdir, rmdir, unlink, rename,
// link, symlink, chmod, utimes and truncate. Files are opened O_RDONLY, so
// the kernel refuses writes through them as well (EBADF).
//
// # Platforms
//
// The jail needs the *at system calls and works on Unix systems. Elsewhere
// New fails with ErrUnsupportedPlatform.
package fsjail
