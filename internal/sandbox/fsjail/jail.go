package fsjail

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
)

// Mount grants a guest access to one host directory.
type Mount struct {
	// HostPath is the host directory to expose. It must exist and be a
	// directory. It is opened once, by New; symlinks in HostPath itself are
	// resolved at that moment and later changes to them have no effect.
	HostPath string
	// GuestPath is where the guest sees the directory. It must be absolute
	// and clean, such as "/work" or "/".
	GuestPath string
	// ReadOnly refuses every mutating operation with EROFS.
	ReadOnly bool
	// Dir, when set, is the host directory, already opened: HostPath is
	// then only its name in messages and is never opened. New takes its
	// own handle on Dir, which the caller may close after New returns.
	Dir *os.Root
}

var (
	// ErrInvalidGuestPath reports a guest path that is empty, relative or
	// not clean.
	ErrInvalidGuestPath = errors.New("fsjail: invalid guest path")
	// ErrDuplicateGuestPath reports two mounts at the same guest path.
	ErrDuplicateGuestPath = errors.New("fsjail: duplicate guest path")
	// ErrNotDirectory reports a host path that is not a directory.
	ErrNotDirectory = errors.New("fsjail: host path is not a directory")
	// ErrUnsupportedFSConfig reports a wazero.FSConfig that cannot take a
	// sys.FS mount (it does not implement experimental/sysfs.FSConfig).
	ErrUnsupportedFSConfig = errors.New("fsjail: FSConfig does not support sys.FS mounts")
	// ErrHidden reports a mount whose root is, or lies inside, a
	// directory hidden by WithHidden.
	ErrHidden = errors.New("fsjail: mount lies inside a hidden directory")
	// ErrUnsupportedPlatform reports an operating system the jail cannot
	// enforce itself on.
	ErrUnsupportedPlatform = errors.New("fsjail: unsupported platform")
)

// devIno identifies a file or directory.
type devIno struct{ dev, ino uint64 }

// mountFS is a jailed sys.FS for one mount, implemented per platform.
type mountFS interface {
	experimentalsys.FS
	io.Closer
}

// Jail is a validated set of mounts, each backed by its own os.Root. It is
// safe for concurrent use, and one Jail may back any number of modules.
type Jail struct {
	mounts []Mount
	fss    []mountFS
	open   *openCounter

	closeOnce sync.Once
	closeErr  error
}

// New validates mounts and opens each host directory as an os.Root. Guest
// paths must be absolute, clean and distinct; host paths must be readable
// directories. Nested guest paths (such as "/" and "/work") are allowed: the
// guest's libc resolves a path against the longest matching mount.
//
// Options add to that: WithQuota charges the guest's writes to a Quota.
//
// The caller must Close the Jail once no module uses it any more.
func New(mounts []Mount, opts ...Option) (*Jail, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	seen := make(map[string]int, len(mounts))
	for i, m := range mounts {
		if err := validateGuestPath(m.GuestPath); err != nil {
			return nil, fmt.Errorf("fsjail: mount %d (guest path %q): %w", i, m.GuestPath, err)
		}
		if prev, dup := seen[m.GuestPath]; dup {
			return nil, fmt.Errorf("fsjail: mounts %d and %d (guest path %q): %w", prev, i, m.GuestPath, ErrDuplicateGuestPath)
		}
		seen[m.GuestPath] = i
	}

	j := &Jail{
		mounts: append([]Mount(nil), mounts...),
		fss:    make([]mountFS, 0, len(mounts)),
		open:   &openCounter{max: MaxOpenFiles},
	}
	for i, m := range mounts {
		fs, err := openMount(m, j.open, o.quota)
		if err != nil {
			_ = j.Close()
			return nil, fmt.Errorf("fsjail: mount %d (host path %q at %q): %w", i, m.HostPath, m.GuestPath, err)
		}
		j.fss = append(j.fss, fs)
	}
	if len(o.hidden) > 0 {
		if err := linkHidden(j.mounts, j.fss, o.hidden); err != nil {
			_ = j.Close()
			if errors.Is(err, ErrHidden) {
				return nil, err
			}
			return nil, fmt.Errorf("fsjail: %w", err)
		}
	}
	if len(j.fss) > 1 {
		if err := linkNested(j.fss); err != nil {
			_ = j.Close()
			return nil, fmt.Errorf("fsjail: %w", err)
		}
	}
	return j, nil
}

// MaxOpenFiles caps the files and directories one Jail holds open at once,
// across all its mounts, so a guest cannot exhaust the host process's file
// descriptors. Past it OpenFile fails with EAGAIN: wazero's errno set has no
// EMFILE, and closing a file makes room again.
const MaxOpenFiles = 1024

// openCounter counts a Jail's open files, and notes that the guest used
// the jail at all.
type openCounter struct {
	n    atomic.Int64
	max  int64
	used atomic.Bool
}

// touch notes a use of the jail: every operation of every mount starts
// with one, and so do listings and an open file's metadata (a root's
// modification time says something about its contents); file contents
// are reached only through an OpenFile. Opening a mount's root read-only
// is not a use (see OpenFile): wazero does it for every pre-open.
func (c *openCounter) touch() {
	if !c.used.Load() {
		c.used.Store(true)
	}
}

// Used reports whether anything (a guest, or host code through FS) has
// opened, looked up or changed a path in the jail since it was created.
// A plugin load uses it to tell whether what the plugin registered could
// depend on the files it was granted.
func (j *Jail) Used() bool { return j.open.used.Load() }

// acquire reserves a slot, or reports that the jail is at its limit.
func (c *openCounter) acquire() bool {
	if c.n.Add(1) > c.max {
		c.n.Add(-1)
		return false
	}
	return true
}

func (c *openCounter) release() { c.n.Add(-1) }

func validateGuestPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%w: empty", ErrInvalidGuestPath)
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("%w: not absolute", ErrInvalidGuestPath)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("%w: contains NUL", ErrInvalidGuestPath)
	case path.Clean(p) != p:
		return fmt.Errorf("%w: not clean (want %q)", ErrInvalidGuestPath, path.Clean(p))
	}
	return nil
}

// Mounts returns a copy of the mounts the Jail was created with.
func (j *Jail) Mounts() []Mount {
	return append([]Mount(nil), j.mounts...)
}

// FS returns the jailed sys.FS serving guestPath, for callers that drive the
// filesystem directly. Paths given to it are relative to the mount.
func (j *Jail) FS(guestPath string) (experimentalsys.FS, bool) {
	for i, m := range j.mounts {
		if m.GuestPath == guestPath {
			return j.fss[i], true
		}
	}
	return nil, false
}

// FSConfig returns a new wazero.FSConfig holding every mount of the Jail.
// Use it with wazero.ModuleConfig.WithFSConfig.
func (j *Jail) FSConfig() wazero.FSConfig {
	// wazero.NewFSConfig always implements sysfs.FSConfig.
	cfg, _ := j.AddTo(wazero.NewFSConfig())
	return cfg
}

// AddTo returns cfg with every mount of the Jail added. A mount replaces any
// mount cfg already has at the same guest path. cfg must come from
// wazero.NewFSConfig (or otherwise implement experimental/sysfs.FSConfig).
func (j *Jail) AddTo(cfg wazero.FSConfig) (wazero.FSConfig, error) {
	for i, m := range j.mounts {
		sc, ok := cfg.(sysfs.FSConfig)
		if !ok {
			return nil, fmt.Errorf("fsjail: adding mount at %q to %T: %w", m.GuestPath, cfg, ErrUnsupportedFSConfig)
		}
		cfg = sc.WithSysFSMount(j.fss[i], m.GuestPath)
	}
	return cfg, nil
}

// Close closes every os.Root of the Jail. Files a guest already opened stay
// usable until the guest closes them; every new path operation fails (opens
// with ENOENT, everything else with EBADF). Close is idempotent.
func (j *Jail) Close() error {
	j.closeOnce.Do(func() {
		var errs []error
		for i, fs := range j.fss {
			if err := fs.Close(); err != nil {
				errs = append(errs, fmt.Errorf("fsjail: closing mount %q: %w", j.mounts[i].GuestPath, err))
			}
		}
		j.closeErr = errors.Join(errs...)
	})
	return j.closeErr
}
