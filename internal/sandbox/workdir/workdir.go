// Package workdir owns a session's working directory once it is opened.
//
// A cwd given as a path is a name, and a name can be pointed elsewhere
// (a directory renamed, a component swapped for a symbolic link) between
// the moment it is checked and any later use. A Dir is the directory
// itself: opened once, when the session opens, and reached from then on
// only through its descriptor. Every later user (the fs jail's
// `workspace` root, a command's working directory, the sandbox's bind of
// it, a subagent's session) takes its own handle from the Dir with
// OpenRoot or OpenFile, never by resolving the name again. The name stays
// only as what the model is told ({{cwd}}) and where the jails show the
// directory to the guest.
//
// Open opens a path as it is now (symbolic links in it followed once, at
// that moment): for `run` and `acp`, which have no root to stay beneath.
// OpenBeneath opens a path relative to a base directory without
// following any symbolic link and without leaving the base: for `serve`,
// whose tenants own everything below their root.
package workdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Errors; test with errors.Is.
var (
	// ErrNotDirectory: the path names something other than a directory.
	ErrNotDirectory = errors.New("workdir: not a directory")
	// ErrEscapes: the relative path leaves its base, by .., an absolute
	// path or a symbolic link.
	ErrEscapes = errors.New("workdir: leaves its base directory")
	// ErrClosed: the Dir was closed.
	ErrClosed = errors.New("workdir: closed")
)

// Dir is an opened working directory with the name it is shown under.
// It is safe for concurrent use.
type Dir struct {
	name string

	mu   sync.Mutex
	root *os.Root // nil once closed
}

// Open opens dir (made absolute and clean) as it is now. A symbolic link
// in it is followed at this moment only; later changes to the path do
// not reach the Dir.
func Open(dir string) (*Dir, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workdir: %q: %w", dir, err)
	}
	abs = filepath.Clean(abs)
	r, err := os.OpenRoot(abs)
	if err != nil {
		if fi, serr := os.Stat(abs); serr == nil && !fi.IsDir() {
			return nil, fmt.Errorf("%w: %s", ErrNotDirectory, abs)
		}
		return nil, fmt.Errorf("workdir: %w", err)
	}
	return &Dir{name: abs, root: r}, nil
}

// FromRoot makes a Dir of an already opened directory, shown as name
// (absolute and clean). The Dir takes its own handle on r: the caller
// keeps r and closes it when it likes.
func FromRoot(name string, r *os.Root) (*Dir, error) {
	if r == nil {
		return nil, errors.New("workdir: nil directory")
	}
	if !filepath.IsAbs(name) || filepath.Clean(name) != name {
		return nil, fmt.Errorf("workdir: name %q is not an absolute clean path", name)
	}
	own, err := r.OpenRoot(".")
	if err != nil {
		return nil, fmt.Errorf("workdir: %s: %w", name, err)
	}
	return &Dir{name: name, root: own}, nil
}

// OpenBeneath opens the directory rel (a relative path) below base
// without following a symbolic link in any component of rel and without
// leaving base; base itself is opened as it is. With mkdir, missing
// components are created (mode 0o750), each beneath the one before. The
// Dir is named base/rel. A component that is a symbolic link, or a rel
// that is absolute or climbs out with .., fails with ErrEscapes.
func OpenBeneath(base, rel string, mkdir bool) (*Dir, error) {
	if !filepath.IsAbs(base) {
		return nil, fmt.Errorf("workdir: base %q is not absolute", base)
	}
	base = filepath.Clean(base)
	if strings.IndexByte(rel, 0) >= 0 || filepath.IsAbs(rel) {
		return nil, fmt.Errorf("%w: %q", ErrEscapes, rel)
	}
	rel = filepath.Clean(rel)
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("%w: %q", ErrEscapes, rel)
	}
	r, err := openBeneath(base, rel, mkdir)
	if err != nil {
		return nil, fmt.Errorf("workdir: %s beneath %s: %w", rel, base, err)
	}
	return &Dir{name: filepath.Join(base, rel), root: r}, nil
}

// Name is the path the directory was opened under: what the model is
// told and where the jails show it. It is never opened again.
func (d *Dir) Name() string { return d.name }

// OpenRoot returns a new handle on the directory, which the caller
// closes; it stays valid after the Dir is closed.
func (d *Dir) OpenRoot() (*os.Root, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.root == nil {
		return nil, fmt.Errorf("%w: %s", ErrClosed, d.name)
	}
	r, err := d.root.OpenRoot(".")
	if err != nil {
		return nil, fmt.Errorf("workdir: %s: %w", d.name, err)
	}
	return r, nil
}

// Root is the Dir's own handle, nil once closed. A user that keeps the
// directory past the call that read it takes its own handle from it
// (Root.OpenRoot("."), as the jails do), which outlives the Dir.
func (d *Dir) Root() *os.Root {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.root
}

// Dup returns a new Dir on the same directory with the same name, for a
// holder with its own lifetime (a subagent's session).
func (d *Dir) Dup() (*Dir, error) {
	r, err := d.OpenRoot()
	if err != nil {
		return nil, err
	}
	return &Dir{name: d.name, root: r}, nil
}

// Close releases the Dir's handle; handles taken from it stay open.
// Closing twice does nothing.
func (d *Dir) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.root == nil {
		return nil
	}
	err := d.root.Close()
	d.root = nil
	return err
}
