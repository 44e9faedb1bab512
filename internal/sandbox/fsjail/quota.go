package fsjail

import (
	"errors"
	"fmt"
	"github.com/dsh-wasm/dsh-wasm/internal/defaults"
	"sync"
)

// ErrQuotaExceeded reports a write or a creation past a Quota. Guests see
// EIO: wazero's errno set has neither ENOSPC nor EDQUOT (an errno outside
// the set reaches the guest as EIO anyway), and EIO is also what a guest
// sees when the host's disk is full.
var ErrQuotaExceeded = errors.New("fsjail: disk quota exceeded")

// Default quota of a plugin's fs grants, as runtime/config's defaults for
// grants.limits.disk_bytes and disk_files.
const (
	DefaultDiskBytes = defaults.DiskBytes
	DefaultDiskFiles = defaults.DiskFiles
)

// Quota bounds what one plugin adds to the disk through every Jail that
// shares it, and through files the host writes for it (Charge).
//
// Bytes are counted by file size, not by blocks allocated, so a sparse
// file's holes count: extending a file by write, pwrite at an offset past
// its end, or truncate costs the growth of its size. Files are counted by
// creation: a new file, directory, symlink or hard link costs one.
//
// The quota bounds the net growth the plugin causes. Shrinking a file gives
// back the smaller of the bytes cut and the blocks freed; removing an entry
// gives back one file, and, when it was a regular file's last link and no
// jail sharing the quota holds it open, the smaller of its size and its
// allocated blocks. So deleting a sparse file the plugin did not pay for,
// or a file still open, frees nothing it could spend twice.
//
// A Quota is safe for concurrent use. Size-changing operations of one
// plugin are serialised by it.
type Quota struct {
	maxBytes, maxFiles int64

	mu           sync.Mutex
	bytes, files int64
	open         map[devIno]int // files open through jails sharing the quota
}

// NewQuota returns a quota of maxBytes bytes and maxFiles files. Zero or
// less means the default for that dimension.
func NewQuota(maxBytes, maxFiles int64) *Quota {
	if maxBytes <= 0 {
		maxBytes = DefaultDiskBytes
	}
	if maxFiles <= 0 {
		maxFiles = DefaultDiskFiles
	}
	return &Quota{maxBytes: maxBytes, maxFiles: maxFiles, open: map[devIno]int{}}
}

// Limits returns the quota's bounds.
func (q *Quota) Limits() (bytes, files int64) { return q.maxBytes, q.maxFiles }

// Used returns the net bytes and files charged so far. They may be
// negative when the plugin removed more than it added.
func (q *Quota) Used() (bytes, files int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bytes, q.files
}

// Charge counts bytes and files the host adds to the disk for the plugin
// (saved command output, say), or fails with ErrQuotaExceeded and charges
// nothing. Call it before writing; Release gives back what was charged but
// not written or what was removed.
func (q *Quota) Charge(bytes, files int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.chargeLocked(bytes, files)
}

// Release gives back bytes and files charged earlier.
func (q *Quota) Release(bytes, files int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.releaseLocked(bytes, files)
}

func (q *Quota) chargeLocked(bytes, files int64) error {
	if bytes < 0 || files < 0 {
		return fmt.Errorf("fsjail: negative charge (%d bytes, %d files)", bytes, files)
	}
	if bytes > q.maxBytes-q.bytes {
		return fmt.Errorf("%w: %d more bytes, with %d of %d used", ErrQuotaExceeded, bytes, q.bytes, q.maxBytes)
	}
	if files > q.maxFiles-q.files {
		return fmt.Errorf("%w: %d more files, with %d of %d used", ErrQuotaExceeded, files, q.files, q.maxFiles)
	}
	q.bytes += bytes
	q.files += files
	return nil
}

func (q *Quota) releaseLocked(bytes, files int64) {
	q.bytes -= max(bytes, 0)
	q.files -= max(files, 0)
}

// roomLocked is how many more bytes the quota allows.
func (q *Quota) roomLocked() int64 { return max(q.maxBytes-q.bytes, 0) }

// Option configures a Jail.
type Option func(*options)

type options struct {
	quota  *Quota
	hidden []string
}

// WithQuota charges every write and creation through the Jail to q, which
// several Jails (a plugin's instances) may share.
func WithQuota(q *Quota) Option {
	return func(o *options) { o.quota = q }
}

// WithHidden hides host directories from the guest: each one that lies
// below a mount's root is not there for the guest (see hidden_unix.go),
// and a mount whose root is one of them, or lies inside one, is refused
// with ErrHidden. A path that does not exist when New runs is skipped.
func WithHidden(paths ...string) Option {
	return func(o *options) { o.hidden = append(o.hidden, paths...) }
}
