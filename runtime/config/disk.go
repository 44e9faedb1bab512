package config

import (
	"fmt"

	"github.com/dsh-wasm/dsh-wasm/internal/defaults"
)

// The per-plugin disk quota of its fs grants (grants.limits.disk_bytes and
// grants.limits.disk_files): what the plugin may add to the disk through
// the jail, and through files the host writes for it.
const (
	DefaultDiskBytes = ByteSize(defaults.DiskBytes)    // grants.limits.disk_bytes
	DefaultDiskFiles = defaults.DiskFiles              // grants.limits.disk_files
	MaxDiskBytes     = ByteSize(defaults.MaxDiskBytes) // grants.limits.disk_bytes
	MaxDiskFiles     = defaults.MaxDiskFiles           // grants.limits.disk_files
)

// DiskQuota returns the disk quota in bytes and files, with the defaults
// for unset values.
func (l Limits) DiskQuota() (bytes, files int64) {
	r := Grants{Limits: l}.Effective().Limits
	return int64(r.DiskBytes), int64(r.DiskFiles)
}

// checkCount reports why v is not a count in [lo, hi], or "".
func checkCount(v, lo, hi int) string {
	if v < lo || v > hi {
		return fmt.Sprintf("%d is outside [%d, %d]", v, lo, hi)
	}
	return ""
}
