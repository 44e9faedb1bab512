package filestore

import (
	"bufio"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

const (
	noCwdDir  = "_no-cwd"
	cwdPrefix = "cwd-"
	fileExt   = ".jsonl"
)

// Store keeps session files under a root directory, laid out as the
// reference harness does: <root>/cwd-<first 12 hex digits of
// sha256(cwd)>/<id>.jsonl, or <root>/_no-cwd/<id>.jsonl for a cwd-less
// session. A Store is safe for concurrent use.
type Store struct {
	root string
	now  func() time.Time

	mu   sync.Mutex
	open map[string]*file // the sessions open through this store, by path; nil while one is being opened
}

var _ session.Storage = (*Store)(nil)

// Options configure a Store. The zero Options are the defaults.
type Options struct {
	// Now stamps headers and events; nil means the system clock.
	Now func() time.Time
}

// New returns a store over root. The directory is created on the first
// Create.
func New(root string, opts Options) *Store {
	s := &Store{root: root, now: opts.Now, open: map[string]*file{}}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// Dir is the directory the store keeps its sessions under.
func (s *Store) Dir() string { return s.root }

// dirName is the directory of the sessions with working directory cwd.
func dirName(cwd string) string {
	if cwd == "" {
		return noCwdDir
	}
	sum := sha256.Sum256([]byte(cwd))
	return cwdPrefix + hex.EncodeToString(sum[:])[:12]
}

// path is where the session with header h lives.
func (s *Store) path(h session.Header) string {
	return filepath.Join(s.root, dirName(h.Cwd), h.ID+fileExt)
}

// claim marks path open through this store.
func (s *Store) claim(path string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.open[path]; ok {
		return fmt.Errorf("session: %s: %w", path, session.ErrLocked)
	}
	s.open[path] = nil
	return nil
}

// opened records the file of a session open through this store.
func (s *Store) opened(path string, f *file) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open[path] = f
}

func (s *Store) release(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.open, path)
}

// Create makes a new session file and returns the session open for
// appending. Version must be 0. An empty ID gets a random UUID, and a zero
// CreatedAt the current time.
//
// initial are events written with the header, keeping their Seq and
// Time: a fork's seed, copied from its parent (see session.ClosedPrefix),
// or the events of a session being copied. SeedLength, which a fork sets
// to the length of its seed, may not exceed their number, and neither the
// seed nor all of initial may end inside a turn.
//
// The header and initial events are on disk (fsynced, directory entry
// included) when Create returns. It fails with session.ErrExists if the
// id is taken.
func (s *Store) Create(h session.Header, initial ...session.Event) (*session.Session, error) {
	p, err := session.Prepare(h, s.now, initial...)
	if err != nil {
		return nil, err
	}
	h = p.Log.Header // completed: the id and time Prepare chose
	buf := append(append([]byte(nil), p.Header...), '\n')
	for _, r := range p.Records {
		buf = append(append(buf, r.JSON...), '\n')
	}

	path := s.path(h)
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("session: create %s: %w", h.ID, err)
	}
	if err := s.claim(path); err != nil { // open through this store: it exists
		return nil, fmt.Errorf("session: create %s: %w", h.ID, session.ErrExists)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		s.release(path)
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("session: create %s: %w", h.ID, session.ErrExists)
		}
		return nil, fmt.Errorf("session: create %s: %w", h.ID, err)
	}
	fail := func(err error) (*session.Session, error) {
		f.Close()
		os.Remove(path)
		s.release(path)
		return nil, fmt.Errorf("session: create %s: %w", h.ID, err)
	}
	if err := lockFile(f); err != nil {
		return fail(err)
	}
	if _, err := f.Write(buf); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := syncDir(dir); err != nil {
		return fail(err)
	}
	if err := syncDir(s.root); err != nil {
		return fail(err)
	}
	b := &file{f: f, size: int64(len(buf))}
	sess, err := session.Resume(path, p.Log, b, s.now, func() { s.release(path) })
	if err != nil {
		return fail(err)
	}
	s.opened(path, b)
	return sess, nil
}

// Open opens the session with the given id for appending, repairing what
// a crash left (see session.Recovery, and Session.Recovery for what was
// done): a torn last line is cut off the file, and a turn left open is
// closed with an error result for each unanswered tool call, step/end
// for an open step and turn/end kind interrupted. Repairs are on disk
// when Open returns.
//
// It fails with session.ErrNotFound when no file has the id,
// session.ErrLocked when the session is open elsewhere, and
// session.ErrCorrupt (a *session.CorruptError naming the line) when the
// file cannot be read.
func (s *Store) Open(id string) (*session.Session, error) {
	path, err := s.find(id)
	if err != nil {
		return nil, err
	}
	if err := s.claim(path); err != nil {
		return nil, err
	}
	sess, err := s.open1(id, path)
	if err != nil {
		s.release(path)
		return nil, err
	}
	return sess, nil
}

func (s *Store) open1(id, path string) (*session.Session, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("session: open %s: %w", id, err)
	}
	fail := func(err error) (*session.Session, error) {
		f.Close()
		return nil, err
	}
	if err := lockFile(f); err != nil {
		return fail(fmt.Errorf("session: open %s: %w", id, err))
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fail(fmt.Errorf("session: open %s: %w", id, err))
	}
	l, err := session.Decode(path, data)
	if err != nil {
		return fail(err)
	}
	if l.Header.ID != id {
		return fail(&session.CorruptError{Path: path, Line: 1, Err: fmt.Errorf("header id %q does not match the file name", l.Header.ID)})
	}
	sound := int64(len(data)) - l.Recovery.TornBytes
	if sound < int64(len(data)) {
		if err := f.Truncate(sound); err != nil {
			return fail(fmt.Errorf("session: open %s: cut torn line: %w", id, err))
		}
		if err := f.Sync(); err != nil {
			return fail(fmt.Errorf("session: open %s: cut torn line: %w", id, err))
		}
	}
	b := &file{f: f, size: sound}
	if l.Recovery.AddedNewline {
		b.lead = []byte{'\n'} // written with the repairs, or alone below
	}
	sess, err := session.Resume(path, l, b, s.now, func() { s.release(path) })
	if err != nil {
		return fail(fmt.Errorf("session: open %s: write repairs: %w", id, err))
	}
	if len(b.lead) > 0 {
		if err := b.Append(nil); err != nil {
			return fail(fmt.Errorf("session: open %s: write repairs: %w", id, flushError(id, err)))
		}
	}
	s.opened(path, b)
	return sess, nil
}

// find returns the path of the session file with the given id.
func (s *Store) find(id string) (string, error) {
	if err := session.CheckID(id); err != nil {
		return "", fmt.Errorf("session: open: %w", err)
	}
	dirs, err := s.dirs()
	if err != nil {
		return "", err
	}
	var found []string
	for _, d := range dirs {
		p := filepath.Join(d, id+fileExt)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("session: open %s: %w", id, session.ErrNotFound)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("session: open %s: %w: %d files have this id: %s",
		id, session.ErrCorrupt, len(found), strings.Join(found, ", "))
}

// dirs lists the session directories of the layout under the root.
func (s *Store) dirs() ([]string, error) {
	entries, err := os.ReadDir(s.root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("session: list %s: %w", s.root, err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && (e.Name() == noCwdDir || strings.HasPrefix(e.Name(), cwdPrefix)) {
			dirs = append(dirs, filepath.Join(s.root, e.Name()))
		}
	}
	return dirs, nil
}

// List returns the headers of the sessions in the store, oldest first.
// It reads only the first line of each file. Headers it cannot read are
// left out and reported together in the error, so the result is useful
// even when err is not nil.
func (s *Store) List() ([]session.Header, error) {
	dirs, err := s.dirs()
	if err != nil {
		return nil, err
	}
	var headers []session.Header
	var errs []error
	for _, d := range dirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			errs = append(errs, fmt.Errorf("session: list: %w", err))
			continue
		}
		for _, e := range entries {
			if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), fileExt) {
				continue
			}
			h, err := readHeader(filepath.Join(d, e.Name()))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			headers = append(headers, h)
		}
	}
	slices.SortFunc(headers, func(a, b session.Header) int {
		return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return headers, errors.Join(errs...)
}

// maxHeaderLine bounds the first line List reads.
const maxHeaderLine = 1 << 20

func readHeader(path string) (session.Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return session.Header{}, fmt.Errorf("session: list: %w", err)
	}
	defer f.Close()
	line, err := bufio.NewReader(io.LimitReader(f, maxHeaderLine)).ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return session.Header{}, fmt.Errorf("session: list: %s: %w", path, err)
	}
	var h session.Header
	if err := json.Unmarshal(line, &h); err != nil {
		return session.Header{}, &session.CorruptError{Path: path, Line: 1, Err: err}
	}
	if h.Version != session.FormatVersion {
		return session.Header{}, fmt.Errorf("session: %s: %w: %d", path, session.ErrUnsupportedVersion, h.Version)
	}
	return h, nil
}

// syncDir makes a directory's entries durable. Windows cannot sync a
// directory, and its entries are durable without it.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// Export writes the session file of id to w as it is on disk.
func (s *Store) Export(id string, w io.Writer) error {
	path, err := s.find(id)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("session: export %s: %w", id, err)
	}
	defer f.Close()
	if _, err := io.Copy(w, f); err != nil {
		return fmt.Errorf("session: export %s: %w", id, err)
	}
	return nil
}

// Header reads the header of session id without opening it.
func (s *Store) Header(id string) (session.Header, error) {
	path, err := s.find(id)
	if err != nil {
		return session.Header{}, err
	}
	return readHeader(path)
}
