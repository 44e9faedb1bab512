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

	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/plugin/internal/interrupt"
)

// TestInstrumentedModulesAreCached loads a guest through a fresh on-disk
// cache: the first load stores the rewritten module, a later load reads it
// back (proved by planting a marked but valid entry and seeing it used),
// and a corrupt entry is rebuilt rather than trusted.
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
	entry := filepath.Join(dir, "instrumented", digest+"-"+interrupt.Version+"-"+interrupt.SnapshotVersion+".wasm")

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
		b, release, ok := readInstrumented(entry)
		if !ok {
			return nil, false
		}
		defer release()
		return bytes.Clone(b), true
	}
	load()
	want, err := rewrite(src)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := readEntry()
	if !ok || !bytes.Equal(got, want) {
		t.Fatalf("after the first load the cache entry holds %d bytes (ok %v), want the %d rewritten bytes", len(got), ok, len(want))
	}

	// A later load must take the entry as it is: plant one that differs
	// from a fresh rewrite (a custom section appended, still valid Wasm)
	// and check the cache hands back exactly it.
	marked := append(bytes.Clone(want), 0, 5, 3, 'd', 's', 'h', 1)
	writeInstrumented(entry, marked)
	if ib, err := c.instrument(digest, src); err != nil || !bytes.Equal(ib, marked) {
		t.Fatalf("warm lookup returned %d bytes, %v; want the planted entry", len(ib), err)
	}
	load()

	// A corrupt entry is rebuilt, not trusted.
	raw, err := os.ReadFile(entry)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-10] ^= 0xff
	if err := os.WriteFile(entry, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	load()
	if got, ok := readEntry(); !ok || !bytes.Equal(got, want) {
		t.Fatalf("a corrupt entry was not rebuilt (ok %v, %d bytes)", ok, len(got))
	}
	// So is a truncated one.
	if err := os.WriteFile(entry, []byte(instrumentedMagic), 0o644); err != nil {
		t.Fatal(err)
	}
	if ib, err := c.instrument(digest, src); err != nil || !bytes.Equal(ib, want) {
		t.Fatalf("a truncated entry gave %d bytes, %v", len(ib), err)
	}
}
