package plugin

import (
	"context"
	"os"
	"path/filepath"

	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/modcache"
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
// manifests) is content-addressed: each entry is checked against the
// sha256 that names it before use. wazero's compiled code cannot be
// checked that way, so the directory is the host's alone: created, or
// repaired, with mode 0700, and hidden from every plugin's jails and
// refused as a grant (HostState). Package internal/modcache owns it.
type Cache struct{ m *modcache.Cache }

// NewCache opens a cache in dir, creating it. An empty dir makes an
// in-memory cache.
func NewCache(dir string) (*Cache, error) {
	m, err := modcache.New(dir)
	if err != nil {
		return nil, err
	}
	return &Cache{m: m}, nil
}

// NoCache returns a cache that caches nothing: every load compiles.
func NoCache() *Cache { return &Cache{m: modcache.None()} }

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
func (c *Cache) Dir() string { return c.mod().Dir() }

// Close releases the cache. Compiled code on disk stays.
func (c *Cache) Close(ctx context.Context) error { return c.mod().Close(ctx) }

// mod is what c wraps; nil for a nil c (modcache's nil caches nothing).
func (c *Cache) mod() *modcache.Cache {
	if c == nil {
		return nil
	}
	return c.m
}
