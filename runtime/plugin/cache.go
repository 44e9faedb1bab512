package plugin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

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
	if err := os.MkdirAll(dir, 0o755); err != nil {
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
