package dsh

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/fsjail"
)

// spillTarget is where a command's long streams are saved: a directory
// inside a writable granted root, reached through an os.Root of that root
// so that no symlink leads out of it.
type spillTarget struct {
	root  string        // the granted root's host path
	dir   *os.Root      // the granted root opened, when it was (the workspace); root is then only its name
	rel   string        // the directory, relative to root
	quota *fsjail.Quota // the plugin's disk quota, charged before each write; nil: none
	// hostState names the host-state directory a path lies in, or "":
	// the host never writes a spill file there (see HostState).
	hostState func(path string) string
}

// SpillTargetFor checks the spill_dir of an exec request: absolute, clean,
// inside a writable root of the call. It creates the directory.
func SpillTargetFor(dir string, mounts []fsjail.Mount, hostState func(string) string) (*spillTarget, hostfns.Status, string) {
	if dir == "" {
		return nil, 0, ""
	}
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return nil, hostfns.ErrBadJSON, fmt.Sprintf("spill_dir %q: want a clean absolute path", dir)
	}
	if h := hostState(dir); h != "" {
		return nil, hostfns.ErrDenied, fmt.Sprintf("spill_dir %q lies inside %s, the host's own state", dir, h)
	}
	var best *fsjail.Mount
	for i, m := range mounts {
		if m.ReadOnly {
			continue
		}
		if dir == m.HostPath || strings.HasPrefix(dir, strings.TrimSuffix(m.HostPath, "/")+"/") {
			if best == nil || len(m.HostPath) > len(best.HostPath) {
				best = &mounts[i]
			}
		}
	}
	if best == nil {
		return nil, hostfns.ErrDenied, fmt.Sprintf("spill_dir %q is not inside a writable granted fs root", dir)
	}
	rel, err := filepath.Rel(best.HostPath, dir)
	if err != nil {
		return nil, hostfns.ErrDenied, fmt.Sprintf("spill_dir %q: %v", dir, err)
	}
	t := &spillTarget{root: best.HostPath, dir: best.Dir, rel: rel, hostState: hostState}
	r, err := t.open()
	if err != nil {
		return nil, hostfns.ErrInternal, fmt.Sprintf("spill_dir %q: %v", dir, err)
	}
	defer r.Close()
	if err := r.MkdirAll(rel, 0o700); err != nil {
		return nil, hostfns.ErrDenied, fmt.Sprintf("spill_dir %q: %v", dir, err)
	}
	return t, 0, ""
}

// open returns a new handle on the granted root: through the opened
// directory when there is one, never through its name.
func (t *spillTarget) open() (*os.Root, error) {
	if t.dir != nil {
		return t.dir.OpenRoot(".")
	}
	return os.OpenRoot(t.root)
}

// SpillWriter is a tee of one stream. It keeps the first cap bytes in
// memory and creates its file only when the stream outgrows the cap (when
// the host's capped copy drops bytes); from then on every byte goes to the
// file, up to hostfns.MaxSpillBytes. It never fails the command: a write
// error stops the spill and is remembered.
type SpillWriter struct {
	t      *spillTarget
	name   string // file name, relative to t.rel
	cap    int
	mu     sync.Mutex
	buf    []byte
	saved  int64
	path   string // host path once the file exists
	full   bool   // stopped at MaxSpillBytes
	failed error
}

// Spills are a command's spill writers: stdout's and stderr's, nil when
// its output is not saved.
type Spills [2]*SpillWriter

// NewSpillWriters returns the writers of a command's stdout and stderr
// into t, each keeping cap bytes in memory first; nil when t is.
func NewSpillWriters(t *spillTarget, cap int) (out, errw *SpillWriter) {
	if t == nil {
		return nil, nil
	}
	var b [6]byte
	rand.Read(b[:])
	base := fmt.Sprintf("exec-%s-%s", time.Now().UTC().Format("20060102T150405"), hex.EncodeToString(b[:]))
	return &SpillWriter{t: t, name: base + ".stdout", cap: cap}, &SpillWriter{t: t, name: base + ".stderr", cap: cap}
}

func (w *SpillWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	if w.failed != nil || w.full {
		return n, nil
	}
	if w.path == "" && len(w.buf)+len(p) <= w.cap {
		w.buf = append(w.buf, p...)
		return n, nil
	}
	if err := w.save(p); err != nil {
		w.failed = err
	}
	return n, nil
}

// save appends the buffered head, then p, to the file, opening it through
// an os.Root of the granted root for each write: nothing stays open after
// the command ends.
func (w *SpillWriter) save(p []byte) error {
	r, err := w.t.open()
	if err != nil {
		return err
	}
	defer r.Close()
	flags := os.O_WRONLY | os.O_APPEND
	if w.path == "" {
		flags |= os.O_CREATE | os.O_EXCL
	}
	if w.path == "" {
		p = append(w.buf, p...)
	}
	if room := hostfns.MaxSpillBytes - w.saved; int64(len(p)) > room {
		p, w.full = p[:room], true
	}
	// The host writes this file for the plugin, so it is charged to the
	// plugin's disk quota like a file the plugin wrote itself: the file,
	// then every byte, before it is written. Past the quota the saved
	// copy stops, marked truncated.
	newFiles := int64(0)
	if w.path == "" {
		newFiles = 1
	}
	if q := w.t.quota; q != nil {
		if err := q.Charge(int64(len(p)), newFiles); err != nil {
			w.full = true
			return err
		}
	}
	f, err := r.OpenFile(filepath.Join(w.t.rel, w.name), flags, 0o600)
	if err == nil {
		// The directory is judged where the file really landed (a
		// symlink swapped since SpillTargetFor could have moved it).
		if h, real := w.t.landedIn(f); h != "" {
			if w.path == "" {
				os.Remove(real) // the empty file just made there
			}
			f.Close()
			err = fmt.Errorf("the spill file would lie inside %s, the host's own state", h)
		}
	}
	if err != nil {
		if q := w.t.quota; q != nil {
			q.Release(int64(len(p)), newFiles)
		}
		return err
	}
	if w.path == "" {
		w.path = filepath.Join(w.t.root, w.t.rel, w.name)
		w.buf = nil
	}
	n, err := f.Write(p)
	if q := w.t.quota; q != nil && n < len(p) {
		q.Release(int64(len(p)-n), 0)
	}
	w.saved += int64(n)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Failed is why the spill stopped early, or nil.
func (w *SpillWriter) Failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// result fills o's spill fields.
func (w *SpillWriter) result(o *hostfns.ExecOutput) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.path != "" {
		o.SpillPath = w.path
		o.SpillTruncated = w.full || w.failed != nil
	}
}

// landedIn names the host-state directory the open file f lies in, as the
// kernel resolved it (/proc/self/fd, on Linux), and that path; "" when it
// lies in none.
func (t *spillTarget) landedIn(f *os.File) (string, string) {
	if t.hostState == nil {
		return "", ""
	}
	real, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil {
		return "", ""
	}
	return t.hostState(real), real
}
