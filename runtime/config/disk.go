package config

import (
	"fmt"
)

// The per-plugin disk quota of its fs grants (grants.limits.disk_bytes and
// grants.limits.disk_files): what the plugin may add to the disk through
// the jail, and through files the host writes for it.
const (
	DefaultDiskBytes = 1 * GiB    // grants.limits.disk_bytes
	DefaultDiskFiles = 4096       // grants.limits.disk_files
	MaxDiskBytes     = 1024 * GiB // grants.limits.disk_bytes
	MaxDiskFiles     = 1 << 24    // grants.limits.disk_files
)

// DiskQuota returns the disk quota in bytes and files, with the defaults
// for unset values.
func (l Limits) DiskQuota() (bytes, files int64) {
	bytes, files = int64(l.DiskBytes), int64(l.DiskFiles)
	if bytes == 0 {
		bytes = int64(DefaultDiskBytes)
	}
	if files == 0 {
		files = DefaultDiskFiles
	}
	return bytes, files
}

// checkCount reports why v is not a count in [lo, hi], or "".
func checkCount(v, lo, hi int) string {
	if v < lo || v > hi {
		return fmt.Sprintf("%d is outside [%d, %d]", v, lo, hi)
	}
	return ""
}
