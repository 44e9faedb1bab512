package modcache

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"

	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/interrupt"
)

// Rewriting a module for interruption (package interrupt) costs about as
// much as wazero's own decoding of it, and its output depends only on the
// module's bytes and the rewriter's version. The cache keeps the output
// next to wazero's compiled code, so a warm load skips the rewrite.
//
// The output is kept in a Store under a key of the module's digest
// and the rewriter's versions: named by the sha256 of the rewritten bytes
// and checked against it before use, so an entry that was changed on
// disk is rebuilt, never compiled (the pin covers the bytes the operator
// named; this covers the bytes that are compiled). A missing or corrupt
// entry is rebuilt: the cache is an accelerator, never a source of truth.

// memInstrumented holds rewritten modules for caches without a directory,
// keyed by digest and rewriter version; a process loads few distinct
// modules, and the same ones again and again (reloads, new hosts in tests).
var memInstrumented sync.Map

// Instrument returns the module rewritten for interruption, and for
// instance images where it can be (interrupt.PrepareSnapshot), from the
// cache when it has it. digest is the sha256 of b, in hex.
func (c *Cache) Instrument(digest string, b []byte) ([]byte, error) {
	ib, release, err := c.InstrumentSource(digest, func() ([]byte, error) { return b, nil })
	if err != nil {
		return nil, err
	}
	defer release()
	return bytes.Clone(ib), nil
}

// InstrumentSource is Instrument for a module read by src, which it calls
// only when the cache does not have the module rewritten. The bytes it
// returns may be a read-only mapping of the cache's file: they are valid
// until release is called, and must not be written.
func (c *Cache) InstrumentSource(digest string, src func() ([]byte, error)) (_ []byte, release func(), _ error) {
	key := digest + "-" + interrupt.Version + "-" + interrupt.SnapshotVersion
	noop := func() {}
	rewriteSource := func() ([]byte, func(), error) {
		b, err := src()
		if err != nil {
			return nil, nil, err
		}
		ib, err := Rewrite(b)
		return ib, noop, err
	}
	if c == nil || c.compiled == nil {
		return rewriteSource()
	}
	if c.dir == "" {
		if v, ok := memInstrumented.Load(key); ok {
			return v.([]byte), noop, nil
		}
		ib, _, err := rewriteSource()
		if err == nil {
			memInstrumented.Store(key, ib)
		}
		return ib, noop, err
	}
	store := c.Instrumented()
	if ib, release, ok := store.Get(key, MaxInstrumented); ok {
		return ib, release, nil
	}
	ib, _, err := rewriteSource()
	if err != nil {
		return nil, nil, err
	}
	store.Put(key, ib) // best effort: a failed write costs the next load a rewrite
	return ib, noop, nil
}

// MaxInstrumented bounds a rewritten module read from the cache.
const MaxInstrumented = 1 << 30

// Instrumented is where c keeps rewritten modules.
func (c *Cache) Instrumented() Store { return Store{Dir: filepath.Join(c.dir, "instrumented")} }

// writeFile writes the concatenation of parts to path through a
// temporary file and a rename, so that a reader sees the whole entry or
// none, and reports whether it did. Best effort: the cache is an
// accelerator.
func writeFile(path string, parts ...[]byte) bool {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return false
	}
	for _, b := range parts {
		if _, err = f.Write(b); err != nil {
			break
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err == nil
}

// Rewrite prepares b for images when it can, then instruments it.
func Rewrite(b []byte) ([]byte, error) {
	if pb, _, err := interrupt.PrepareSnapshot(b); err == nil {
		b = pb
	}
	return interrupt.Instrument(b)
}
