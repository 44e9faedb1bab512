// Package plugintest holds test helpers for packages that run plugins
// through internal/plugin. (internal/plugin's own tests cannot import it:
// it imports internal/plugin.)
package plugintest

import (
	"sync"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
)

var (
	once  sync.Once
	cache *plugin.Cache
	err   error
)

// SharedCache is one on-disk compilation cache for every test in the
// process, in the directory internal/plugin's tests use too, so each guest
// compiles once per machine.
func SharedCache(t testing.TB) *plugin.Cache {
	t.Helper()
	once.Do(func() {
		dir, e := guestbuild.CompileCacheDir()
		if e != nil {
			err = e
			return
		}
		cache, err = plugin.NewCache(dir)
	})
	if err != nil {
		t.Fatal(err)
	}
	return cache
}
