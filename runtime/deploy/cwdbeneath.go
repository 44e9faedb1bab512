package deploy

import (
	"os"

	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/workdir"
)

// Errors of OpenCwdBeneath, wrapped with detail; test with errors.Is.
var (
	// ErrCwdEscapes: the directory is not below its base (an absolute
	// path, a .. out of it, or a symbolic link in its path).
	ErrCwdEscapes = workdir.ErrEscapes
	// ErrCwdNotDirectory: the path names something other than a directory.
	ErrCwdNotDirectory = workdir.ErrNotDirectory
)

// OpenCwdBeneath opens the directory rel (relative) below base (absolute)
// without following a symbolic link in any component of rel, making the
// missing ones with mkdir: a session's working directory that a client
// names relative to its own root, as serve's tenants do. It returns the
// directory's name (base/rel) and a handle on it, for SessionOptions.Cwd
// and CwdDir; the caller closes the handle.
func OpenCwdBeneath(base, rel string, mkdir bool) (name string, dir *os.Root, err error) {
	d, err := workdir.OpenBeneath(base, rel, mkdir)
	if err != nil {
		return "", nil, err
	}
	// The handle is the caller's now: the Dir is dropped, not closed.
	return d.Name(), d.Root(), nil
}
