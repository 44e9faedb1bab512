package plugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
)

// Load errors say what to do.

func TestLoadErrorNameClash(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	src := communityGuest(t, "mcp-run")
	if _, err := h.Load(ctx, Spec{Source: src}); err != nil {
		t.Fatal(err)
	}
	_, err := h.Load(ctx, Spec{Source: src})
	if !errors.Is(err, ErrAlreadyLoaded) || !strings.Contains(err.Error(), "give one of the two entries another name with `name:`") ||
		!strings.Contains(err.Error(), "derived from its source") {
		t.Fatalf("second load: %v", err)
	}
}

func TestLoadErrorCommandModule(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"dsh": `(func (export "dsh_abi_version") (result i32) (i32.const 1))
  (func (export "dsh_alloc") (param i32) (result i32) (i32.const 0))
  (func (export "dsh_init") (param i32 i32) (result i64) (i64.const 0))`,
		"extism": `(import "extism:host/env" "input_length" (func (result i64)))
  (func (export "describe") (result i32) (i32.const 0))
  (func (export "call") (result i32) (i32.const 0))`,
	} {
		src := filepath.Join(dir, name+".wat")
		os.WriteFile(src, []byte("(module\n  "+body+"\n  (memory (export \"memory\") 1)\n  (func (export \"_start\")))"), 0o644)
		out := filepath.Join(dir, name+".wasm")
		checkCBuild(t, guestbuild.CompileWat(out, src))
		_, err := newHost(t).Load(context.Background(), Spec{Name: name, Source: out})
		if !errors.Is(err, ErrABI) || !strings.Contains(err.Error(), "-buildmode=c-shared") || !strings.Contains(err.Error(), "-mexec-model=reactor") {
			t.Errorf("%s command module: %v", name, err)
		}
	}
}
