package plugin

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

// Environment variables that configure DefaultCache.
const (
	// EnvCacheDir names the compilation cache directory.
	EnvCacheDir = "DSH_WASM_CACHE_DIR"
	// EnvCache set to "off" disables the compilation cache.
	EnvCache = "DSH_WASM_CACHE"
)

// Cache is a wazero compilation cache shared by every plugin of a host.
// Compiled code is stored on disk keyed by the module's bytes and wazero's
// version, so a warm load skips the compiler. A Cache must outlive every
// plugin compiled with it: close it only after the hosts using it.
//
// What the host itself caches beside wazero's code (rewritten modules,
// manifests) is content-addressed (blobStore): each entry is a file named
// by the sha256 of its bytes, checked against that name before use, and
// a key names it through a small ref file. wazero's compiled code cannot
// be checked that way, so the directory is the host's alone: created, or
// repaired, with mode 0700, and hidden from every plugin's jails and
// refused as a grant (HostState).
type Cache struct {
	c   wazero.CompilationCache
	dir string
	// manifests is where lazy loads' manifests are kept (manifest.go):
	// dir/manifests, or another directory in tests.
	manifests string
}

// NewCache opens a cache in dir, creating it. An empty dir makes an
// in-memory cache.
func NewCache(dir string) (*Cache, error) {
	if dir == "" {
		return &Cache{c: wazero.NewCompilationCache()}, nil
	}
	if err := privateDir(dir); err != nil {
		return nil, fmt.Errorf("compilation cache: %w", err)
	}
	c, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return nil, fmt.Errorf("compilation cache %s: %w", dir, err)
	}
	return &Cache{c: c, dir: dir, manifests: filepath.Join(dir, "manifests")}, nil
}

// NoCache returns a cache that caches nothing: every load compiles.
func NoCache() *Cache { return &Cache{} }

// DefaultCache opens the cache named by $DSH_WASM_CACHE_DIR, or
// <user cache dir>/dsh-wasm/wazero; $DSH_WASM_CACHE=off turns caching off.
// Without a user cache dir it falls back to an in-memory cache.
func DefaultCache() (*Cache, error) {
	if os.Getenv(EnvCache) == "off" {
		return NoCache(), nil
	}
	dir := os.Getenv(EnvCacheDir)
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return NewCache("")
		}
		dir = filepath.Join(base, "dsh-wasm", "wazero")
	}
	return NewCache(dir)
}

// Dir is the cache's directory, empty for in-memory or no cache.
func (c *Cache) Dir() string { return c.dir }

// Close releases the cache. Compiled code on disk stays.
func (c *Cache) Close(ctx context.Context) error {
	if c == nil || c.c == nil {
		return nil
	}
	return c.c.Close(ctx)
}

// runtimeConfig is the config of a plugin's runtime. closeOnDone turns on
// wazero's own termination checks, for modules that could not be
// instrumented with an interrupt flag.
func (c *Cache) runtimeConfig(closeOnDone bool) wazero.RuntimeConfig {
	cfg := wazero.NewRuntimeConfig().WithCloseOnContextDone(closeOnDone)
	if c != nil && c.c != nil {
		cfg = cfg.WithCompilationCache(c.c)
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

// blobStore keeps content-addressed entries under dir: objects/SUM holds
// bytes whose sha256 is SUM (hex), refs/KEY the SUM of KEY's entry. An
// entry whose bytes do not hash to its name is never used: it is dropped
// and the caller rebuilds it. (A ref can only choose among objects, each
// of which is what its name says; who could write both could also write
// wazero's compiled code, which is why the directory is the host's alone.)
type blobStore struct{ dir string }

func (s blobStore) refPath(key string) string { return filepath.Join(s.dir, "refs", key) }
func (s blobStore) objPath(sum string) string { return filepath.Join(s.dir, "objects", sum) }

// ref reads the SUM key names, or "".
func (s blobStore) ref(key string) string {
	f, err := os.Open(s.refPath(key))
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

// get returns key's entry, mapped read-only (valid until release), if
// there is one no longer than max whose bytes hash to its name.
func (s blobStore) get(key string, max int) (b []byte, release func(), ok bool) {
	sum := s.ref(key)
	if sum == "" {
		return nil, nil, false
	}
	b, release, err := mapFile(s.objPath(sum))
	if err != nil {
		return nil, nil, false
	}
	if got := sha256.Sum256(b); len(b) > max || hex.EncodeToString(got[:]) != sum {
		release()
		s.drop(key)
		return nil, nil, false
	}
	return b, release, true
}

// put stores body as key's entry, best effort: the cache is an
// accelerator. The entry it replaces is removed.
func (s blobStore) put(key string, body []byte) {
	sum := sha256.Sum256(body)
	name := hex.EncodeToString(sum[:])
	old := s.ref(key)
	if _, err := os.Stat(s.objPath(name)); err != nil {
		if !writeCacheFile(s.objPath(name), body) {
			return
		}
	}
	if writeCacheFile(s.refPath(key), []byte(name)) && old != "" && old != name {
		os.Remove(s.objPath(old))
	}
}

// drop removes key's entry.
func (s blobStore) drop(key string) {
	sum := s.ref(key)
	os.Remove(s.refPath(key))
	if sum != "" {
		os.Remove(s.objPath(sum))
	}
}
