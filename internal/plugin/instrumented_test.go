package plugin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/interrupt"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/modcache"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// TestInstrumentedModulesAreCached loads a guest through a fresh on-disk
// cache: the first load stores the rewritten module, a later load reads it
// back (proved by storing a marked but valid entry and seeing it used),
// and an entry changed on disk is rebuilt rather than trusted.
func TestInstrumentedModulesAreCached(t *testing.T) {
	ctx := context.Background()
	src, err := os.ReadFile(testkit(t))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	digest := hex.EncodeToString(sum[:])
	dir := t.TempDir()
	c, err := NewCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	key := digest + "-" + interrupt.Version + "-" + interrupt.SnapshotVersion
	store := c.m.Instrumented()

	load := func() *Plugin {
		t.Helper()
		h, err := New(Options{Registry: prompt.NewRegistry(nil), Cache: c, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close(ctx) })
		p, err := h.Load(ctx, Spec{Name: "kit", Source: testkit(t)})
		if err != nil {
			t.Fatal(err)
		}
		if !p.interruptible {
			t.Fatal("the module was not instrumented")
		}
		return p
	}

	readEntry := func() ([]byte, bool) {
		b, release, ok := store.Get(key, modcache.MaxInstrumented)
		if !ok {
			return nil, false
		}
		defer release()
		return bytes.Clone(b), true
	}
	load()
	want, err := modcache.Rewrite(src)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := readEntry()
	if !ok || !bytes.Equal(got, want) {
		t.Fatalf("after the first load the cache entry holds %d bytes (ok %v), want the %d rewritten bytes", len(got), ok, len(want))
	}
	// The entry is named by the sha256 of its own bytes.
	wantSum := sha256.Sum256(want)
	if ref := store.Ref(key); ref != hex.EncodeToString(wantSum[:]) {
		t.Fatalf("the entry is named %q, want the sha256 of the rewritten module", ref)
	}

	// A later load must take the entry as it is: store one that differs
	// from a fresh rewrite (a custom section appended, still valid Wasm)
	// and check the cache hands back exactly it.
	marked := append(bytes.Clone(want), 0, 5, 3, 'd', 's', 'h', 1)
	store.Put(key, marked)
	if ib, err := c.m.Instrument(digest, src); err != nil || !bytes.Equal(ib, marked) {
		t.Fatalf("warm lookup returned %d bytes, %v; want the stored entry", len(ib), err)
	}
	load()

	// An entry changed in place (what a plugin that could write the
	// cache directory would do) is rebuilt, not trusted: one byte
	// flipped, the whole module replaced, or cut short.
	for what, change := range map[string]func([]byte) []byte{
		"a flipped byte":   func(b []byte) []byte { b[len(b)-10] ^= 0xff; return b },
		"a planted module": func([]byte) []byte { return append(bytes.Clone(want), 0, 6, 5, 'e', 'v', 'i', 'l', 1) },
		"a truncated file": func(b []byte) []byte { return b[:len(b)/2] },
	} {
		obj := store.ObjPath(store.Ref(key))
		raw, err := os.ReadFile(obj)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(obj, change(raw), 0o644); err != nil {
			t.Fatal(err)
		}
		if ib, err := c.m.Instrument(digest, src); err != nil || !bytes.Equal(ib, want) {
			t.Fatalf("after %s the cache gave %d bytes, %v; want a fresh rewrite", what, len(ib), err)
		}
		if got, ok := readEntry(); !ok || !bytes.Equal(got, want) {
			t.Fatalf("after %s the entry was not rebuilt (ok %v, %d bytes)", what, ok, len(got))
		}
	}
}

// The cache directory is the host's alone: made 0700, and an existing
// one opened up is closed again.
func TestCacheDirIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	for _, before := range []func(){func() {}, func() { os.Chmod(dir, 0o777) }} {
		before()
		c, err := NewCache(dir)
		if err != nil {
			t.Fatal(err)
		}
		c.Close(context.Background())
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("cache dir mode %v (%v), want 0700", fi.Mode().Perm(), err)
		}
	}
}
