package session

import (
	"bufio"
	"cmp"
	"crypto/rand"
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
	open map[string]bool // paths of the sessions open through this store
}

// Option configures a Store.
type Option func(*Store)

// WithClock makes the store stamp headers and events with now instead of
// the system clock.
func WithClock(now func() time.Time) Option {
	return func(s *Store) { s.now = now }
}

// NewStore returns a store over root. The directory is created on the
// first Create.
func NewStore(root string, opts ...Option) *Store {
	s := &Store{root: root, now: time.Now, open: map[string]bool{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

func (s *Store) nowMilli() int64 { return s.now().UnixMilli() }

// dirName is the directory of the sessions with working directory cwd.
func dirName(cwd string) string {
	if cwd == "" {
		return noCwdDir
	}
	sum := sha256.Sum256([]byte(cwd))
	return cwdPrefix + hex.EncodeToString(sum[:])[:12]
}

// path is where the session with header h lives.
func (s *Store) path(h Header) string {
	return filepath.Join(s.root, dirName(h.Cwd), h.ID+fileExt)
}

// checkID rejects ids that cannot be a file name in the layout.
func checkID(id string) error {
	switch {
	case id == "", id == ".", id == "..":
	case len(id) > 200:
	case strings.ContainsAny(id, `/\`+"\x00"):
	default:
		return nil
	}
	return fmt.Errorf("%w: %q", ErrInvalidID, id)
}

// newID returns a random UUID (version 4), the reference's id format.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// claim marks path open through this store.
func (s *Store) claim(path string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[path] {
		return fmt.Errorf("session: %s: %w", path, ErrLocked)
	}
	s.open[path] = true
	return nil
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
// initial are events written with the header, keeping their Seq and Time:
// a fork's seed, copied from its parent (see ClosedPrefix), or the events
// of a session being copied. SeedLength, which a fork sets to the length
// of its seed, may not exceed their number, and neither the seed nor all
// of initial may end inside a turn.
//
// The header and initial events are on disk (fsynced, directory entry
// included) when Create returns. It fails with ErrExists if the id is
// taken.
func (s *Store) Create(h Header, initial ...Event) (*Session, error) {
	h, buf, st, err := prepare(h, s.nowMilli, initial)
	if err != nil {
		return nil, err
	}

	path := s.path(h)
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("session: create %s: %w", h.ID, err)
	}
	if err := s.claim(path); err != nil { // open through this store: it exists
		return nil, fmt.Errorf("session: create %s: %w", h.ID, ErrExists)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		s.release(path)
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("session: create %s: %w", h.ID, ErrExists)
		}
		return nil, fmt.Errorf("session: create %s: %w", h.ID, err)
	}
	fail := func(err error) (*Session, error) {
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
	return newSession(s, path, f, st, int64(len(buf)), Recovery{}), nil
}

// Open opens the session with the given id for appending, repairing what
// a crash left (see Recovery, and Session.Recovery for what was done): a
// torn last line is cut off the file, and a turn left open is closed
// with an error result for each unanswered tool call, step/end for an
// open step and turn/end kind interrupted. Repairs are on disk when Open
// returns.
//
// It fails with ErrNotFound when no file has the id, ErrLocked when the
// session is open elsewhere, and ErrCorrupt (a *CorruptError naming the
// line) when the file cannot be read.
func (s *Store) Open(id string) (*Session, error) {
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

func (s *Store) open1(id, path string) (*Session, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("session: open %s: %w", id, err)
	}
	fail := func(err error) (*Session, error) {
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
	st, rec, sound, err := parse(data, path, s.nowMilli)
	if err != nil {
		return fail(err)
	}
	if st.header.ID != id {
		return fail(&CorruptError{Path: path, Line: 1, Err: fmt.Errorf("header id %q does not match the file name", st.header.ID)})
	}
	if sound < int64(len(data)) {
		if err := f.Truncate(sound); err != nil {
			return fail(fmt.Errorf("session: open %s: cut torn line: %w", id, err))
		}
		if err := f.Sync(); err != nil {
			return fail(fmt.Errorf("session: open %s: cut torn line: %w", id, err))
		}
	}
	sess := newSession(s, path, f, st, sound, rec)
	if rec.AddedNewline {
		sess.pending = append(sess.pending, '\n')
	}
	for _, e := range rec.Closed {
		line, err := encodeLine(&e)
		if err != nil {
			return fail(fmt.Errorf("session: open %s: %w", id, err))
		}
		sess.pending = append(sess.pending, line...)
	}
	if err := sess.Flush(); err != nil {
		return fail(fmt.Errorf("session: open %s: write repairs: %w", id, err))
	}
	return sess, nil
}

// find returns the path of the session file with the given id.
func (s *Store) find(id string) (string, error) {
	if err := checkID(id); err != nil {
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
		return "", fmt.Errorf("session: open %s: %w", id, ErrNotFound)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("session: open %s: %w: %d files have this id: %s",
		id, ErrCorrupt, len(found), strings.Join(found, ", "))
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
func (s *Store) List() ([]Header, error) {
	dirs, err := s.dirs()
	if err != nil {
		return nil, err
	}
	var headers []Header
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
	slices.SortFunc(headers, func(a, b Header) int {
		return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return headers, errors.Join(errs...)
}

// maxHeaderLine bounds the first line List reads.
const maxHeaderLine = 1 << 20

func readHeader(path string) (Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return Header{}, fmt.Errorf("session: list: %w", err)
	}
	defer f.Close()
	line, err := bufio.NewReader(io.LimitReader(f, maxHeaderLine)).ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return Header{}, fmt.Errorf("session: list: %s: %w", path, err)
	}
	var h Header
	if err := json.Unmarshal(line, &h); err != nil {
		return Header{}, &CorruptError{Path: path, Line: 1, Err: err}
	}
	if h.Version != FormatVersion {
		return Header{}, fmt.Errorf("session: %s: %w: %d", path, ErrUnsupportedVersion, h.Version)
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
