// Package modcache keeps what loading a module costs, so that a warm load
// skips it: wazero's compiled code, the modules rewritten for interruption
// (instrumented.go) and, through Store, any other content-addressed entry
// the host keeps beside them (the lazy loads' manifests).
//
// What the host caches beside wazero's code is content-addressed (Store):
// each entry is a file named by the sha256 of its bytes, checked against
// that name before use, and a key names it through a small ref file.
// wazero's compiled code cannot be checked that way, so the directory is
// the host's alone: created, or repaired, with mode 0700, and hidden from
// every plugin's jails and refused as a grant.
package modcache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/tetratelabs/wazero"
)

// Cache is a wazero compilation cache and the host's own entries beside
// it. A nil *Cache, or one from None, caches nothing.
type Cache struct {
	compiled wazero.CompilationCache
	dir      string
	// manifests is where lazy loads' manifests are kept: dir/manifests,
	// or another directory in tests.
	manifests string
}

// New opens a cache in dir, creating it. An empty dir makes an in-memory
// cache.
func New(dir string) (*Cache, error) {
	if dir == "" {
		return &Cache{compiled: wazero.NewCompilationCache()}, nil
	}
	if err := privateDir(dir); err != nil {
		return nil, fmt.Errorf("compilation cache: %w", err)
	}
	c, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return nil, fmt.Errorf("compilation cache %s: %w", dir, err)
	}
	return &Cache{compiled: c, dir: dir, manifests: filepath.Join(dir, "manifests")}, nil
}

// None returns a cache that caches nothing: every load compiles.
func None() *Cache { return &Cache{} }

// WithManifests is c keeping its manifests in dir instead (tests share
// compiled code but not manifests).
func (c *Cache) WithManifests(dir string) *Cache {
	d := &Cache{manifests: dir}
	if c != nil {
		d.compiled, d.dir = c.compiled, c.dir
	}
	return d
}

// Dir is the cache's directory, empty for in-memory or no cache.
func (c *Cache) Dir() string {
	if c == nil {
		return ""
	}
	return c.dir
}

// Manifests is where c keeps manifests; ok is false when it keeps none.
func (c *Cache) Manifests() (_ Store, ok bool) {
	if c == nil || c.manifests == "" {
		return Store{}, false
	}
	return Store{Dir: c.manifests}, true
}

// Close releases the cache. Compiled code on disk stays.
func (c *Cache) Close(ctx context.Context) error {
	if c == nil || c.compiled == nil {
		return nil
	}
	return c.compiled.Close(ctx)
}

// RuntimeConfig is the config of a plugin's runtime. closeOnDone turns on
// wazero's own termination checks, for modules that could not be
// instrumented with an interrupt flag.
func (c *Cache) RuntimeConfig(closeOnDone bool) wazero.RuntimeConfig {
	cfg := wazero.NewRuntimeConfig().WithCloseOnContextDone(closeOnDone)
	if c != nil && c.compiled != nil {
		cfg = cfg.WithCompilationCache(c.compiled)
	}
	return cfg
}

// privateDir creates dir with mode 0700, or makes an existing one 0700;
// it must be a directory owned by this process's user.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if err := checkOwner(dir, fi); err != nil {
		return err
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("make %s private (mode 0700): %w", dir, err)
		}
	}
	return nil
}

// Store keeps content-addressed entries under Dir: objects/SUM holds
// bytes whose sha256 is SUM (hex), refs/KEY the SUM of KEY's entry. An
// entry whose bytes do not hash to its name is never used: it is dropped
// and the caller rebuilds it. (A ref can only choose among objects, each
// of which is what its name says; who could write both could also write
// wazero's compiled code, which is why the directory is the host's alone.)
type Store struct{ Dir string }

// RefPath is the ref file of key.
func (s Store) RefPath(key string) string { return filepath.Join(s.Dir, "refs", key) }

// ObjPath is the object file of the entry whose sha256 is sum.
func (s Store) ObjPath(sum string) string { return filepath.Join(s.Dir, "objects", sum) }

// Ref reads the SUM key names, or "".
func (s Store) Ref(key string) string {
	f, err := os.Open(s.RefPath(key))
	if err != nil {
		return ""
	}
	defer f.Close()
	var b [2*sha256.Size + 1]byte
	n, _ := io.ReadFull(f, b[:])
	sum := string(b[:n])
	if len(sum) != 2*sha256.Size || strings.Trim(sum, "0123456789abcdef") != "" {
		return ""
	}
	return sum
}

// Get returns key's entry, mapped read-only (valid until release), if
// there is one no longer than max whose bytes hash to its name.
func (s Store) Get(key string, max int) (b []byte, release func(), ok bool) {
	sum := s.Ref(key)
	if sum == "" {
		return nil, nil, false
	}
	b, release, err := mapFile(s.ObjPath(sum))
	if err != nil {
		return nil, nil, false
	}
	if got := sha256.Sum256(b); len(b) > max || hex.EncodeToString(got[:]) != sum {
		release()
		s.Drop(key)
		return nil, nil, false
	}
	return b, release, true
}

// Put stores body as key's entry, best effort: the cache is an
// accelerator. The entry it replaces is removed.
func (s Store) Put(key string, body []byte) {
	sum := sha256.Sum256(body)
	name := hex.EncodeToString(sum[:])
	old := s.Ref(key)
	if _, err := os.Stat(s.ObjPath(name)); err != nil {
		if !writeFile(s.ObjPath(name), body) {
			return
		}
	}
	if writeFile(s.RefPath(key), []byte(name)) && old != "" && old != name {
		os.Remove(s.ObjPath(old))
	}
}

// Drop removes key's entry.
func (s Store) Drop(key string) {
	sum := s.Ref(key)
	os.Remove(s.RefPath(key))
	if sum != "" {
		os.Remove(s.ObjPath(sum))
	}
}
