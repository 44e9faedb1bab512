//go:build unix

package modcache

import (
	"fmt"
	"os"
	"syscall"
)

// checkOwner refuses a cache directory another user owns: its compiled
// code would be theirs to choose.
func checkOwner(dir string, fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, not by this user (uid %d)", dir, st.Uid, os.Geteuid())
	}
	return nil
}
