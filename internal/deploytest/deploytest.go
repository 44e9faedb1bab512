// Package deploytest is test support for code that opens deployments:
// the compilation cache the module's tests share, in the root's terms.
package deploytest

import (
	"sync"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
)

var (
	once  sync.Once
	cache *deploy.Cache
	err   error
)

// Cache is one on-disk compilation cache for every deployment a test
// process opens, in the directory internal/plugintest.SharedCache uses
// (the cache is content-addressed and safe to share between processes),
// so each guest compiles once per machine.
func Cache(t testing.TB) *deploy.Cache {
	t.Helper()
	once.Do(func() {
		dir, e := guestbuild.CompileCacheDir()
		if e != nil {
			err = e
			return
		}
		cache, err = deploy.NewCache(dir)
	})
	if err != nil {
		t.Fatal(err)
	}
	return cache
}
