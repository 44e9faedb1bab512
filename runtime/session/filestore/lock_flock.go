//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package filestore

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// lockFile takes an exclusive advisory lock on f for as long as f is open,
// so no other process (or other open file in this one) writes the same
// session. It fails with ErrLocked when the lock is held.
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return fmt.Errorf("%w: %s is locked by another writer", session.ErrLocked, f.Name())
		}
		return fmt.Errorf("lock %s: %w", f.Name(), err)
	}
}
