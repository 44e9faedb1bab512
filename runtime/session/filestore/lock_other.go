//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package filestore

import "os"

// lockFile does nothing where flock is unavailable: only the Store's
// in-process check keeps two writers off one session there.
func lockFile(*os.File) error { return nil }
