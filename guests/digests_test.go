package guests

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"strings"
	"testing"
)

// The host takes a built-in module's digest from NAME.wasm.sha256 instead
// of hashing the module: a digest that does not match would key the
// caches and pins to another module.
func TestDigestFilesMatchModules(t *testing.T) {
	mods, err := fs.Glob(All(), "*.wasm")
	if err != nil || len(mods) == 0 {
		t.Fatalf("no modules embedded: %v", err)
	}
	for _, m := range mods {
		b, err := fs.ReadFile(All(), m)
		if err != nil {
			t.Fatal(err)
		}
		want := sha256.Sum256(b)
		got, err := fs.ReadFile(All(), m+".sha256")
		if err != nil {
			t.Errorf("%s has no digest file: run go generate ./guests: %v", m, err)
			continue
		}
		if strings.TrimSpace(string(got)) != hex.EncodeToString(want[:]) {
			t.Errorf("%s.sha256 is %q, the module's sha256 is %x: run go generate ./guests", m, got, want)
		}
	}
	sums, _ := fs.Glob(All(), "*.wasm.sha256")
	if len(sums) != len(mods) {
		t.Errorf("%d digest files for %d modules", len(sums), len(mods))
	}
}
