package plugin

import (
	"context"
	"errors"
	"fmt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// toolBytes is what a tool costs of grants.limits.prompt_bytes: its name,
// description and schema as the model receives them.
func toolBytes(tools []prompt.Tool) int64 {
	var n int64
	for _, t := range tools {
		t = t.Sent()
		n += int64(len(t.Name) + len(t.Description) + len(t.Parameters))
	}
	return n
}

// A community plugin's tools are charged to its prompt_bytes like a dsh
// plugin's: plugin inspect's bounds show what they hold, and a tool list
// past the quota refuses the load, naming the quota and registering
// nothing.
func TestCommunityToolsChargedToPromptBytes(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	p, err := h.Load(ctx, Spec{Name: "v1", Source: communityGuest(t, "mcp-v1")})
	if err != nil {
		t.Fatal(err)
	}
	tools := p.Contribution().Tools
	if used, want := p.Bounds().PromptBytesUsed, toolBytes(tools); used != want || used == 0 {
		t.Fatalf("prompt_bytes_used = %d, want %d (the %d tools' names, descriptions and schemas)", used, want, len(tools))
	}

	// 17 tools of 4 KiB under the default 64 KiB quota: the 16th or 17th
	// is refused (each also has a name and a schema).
	h2 := newHost(t)
	_, err = h2.Load(ctx, Spec{Name: "flood", Source: communityGuest(t, "mcp-v1"),
		Config: cfg(t, map[string]any{"pad_tools": "17", "pad_description": "4096"})})
	if !errors.Is(err, ErrInit) || !strings.Contains(err.Error(), "past grants.limits.prompt_bytes (65536)") || !strings.Contains(err.Error(), `tool "pad_`) {
		t.Fatalf("load over the quota: %v; want ErrInit naming the tool and grants.limits.prompt_bytes", err)
	}
	if got := h2.Registry().Tools(); len(got) != 0 {
		t.Fatalf("a refused load left %d tools registered", len(got))
	}

	// A small quota: one big schema is enough.
	_, err = newHost(t).Load(ctx, Spec{Name: "schema", Source: communityGuest(t, "mcp-v1"),
		Config: cfg(t, map[string]any{"pad_tools": "1", "pad_schema": "4000"}),
		Grants: &config.Grants{Limits: config.Limits{PromptBytes: 4 << 10}}})
	if !errors.Is(err, ErrInit) || !strings.Contains(err.Error(), `tool "pad_0"`) || !strings.Contains(err.Error(), "grants.limits.prompt_bytes (4096)") {
		t.Fatalf("a schema over the quota: %v", err)
	}
}

// The tool list is fixed at load: an agent's call that says the list
// changed fails, and no agent's list changes, the caller's included,
// during the call or after it returns or is cancelled.
func TestCommunityToolListFixedAtLoad(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	p, err := h.Load(ctx, Spec{Name: "v1", Source: communityGuest(t, "mcp-v1"),
		Config: cfg(t, map[string]any{"extra_description": "60000"})})
	if err != nil {
		t.Fatal(err)
	}
	var changes atomic.Int32
	defer h.Registry().OnChange(func(c prompt.Change) error { changes.Add(1); return nil })()
	before := h.Registry().Tools()
	used := p.Bounds().PromptBytesUsed
	a, b := agent("a", "m"), agent("b", "m")
	if res, err := h.CallTool(ctx, b, "echo", []byte(`{"text":"b"}`)); err != nil || res.Text != "b" {
		t.Fatalf("b's echo: %+v, %v", res, err)
	}

	cctx, cancel := context.WithCancel(ctx)
	_, callErr := h.CallTool(cctx, a, "enable_extra", nil)
	cancel()
	// Nothing runs on after the call: a refresh, had there been one, would
	// have changed the registry by now or never.
	if n := changes.Load(); n != 0 {
		t.Fatalf("the registry changed %d times after one agent's call", n)
	}
	if after := h.Registry().Tools(); !slices.EqualFunc(before, after, func(x, y prompt.Tool) bool {
		return x.Name == y.Name && x.Description == y.Description && string(x.Parameters) == string(y.Parameters)
	}) {
		t.Fatalf("the tools every agent sees changed:\n before %d tools\n after  %d tools", len(before), len(after))
	}
	if !errors.Is(callErr, ErrUnsupported) || !strings.Contains(callErr.Error(), "notify_tool_list_changed") {
		t.Fatalf("enable_extra: %v; want ErrUnsupported naming notify_tool_list_changed", callErr)
	}
	if got := p.Bounds().PromptBytesUsed; got != used {
		t.Errorf("prompt_bytes_used %d after the call, want %d", got, used)
	}
	for _, who := range []*prompt.AgentFacts{a, b} {
		if _, err := h.CallTool(ctx, who, "extra", nil); !errors.Is(err, ErrNoTool) {
			t.Errorf("agent %s calls extra: %v, want ErrNoTool", who.ID, err)
		}
		if res, err := h.CallTool(ctx, who, "echo", []byte(`{"text":"still"}`)); err != nil || res.Text != "still" {
			t.Errorf("agent %s's echo after the refusal: %+v, %v", who.ID, res, err)
		}
	}
	if n := changes.Load(); n != 0 {
		t.Fatalf("the registry changed %d times", n)
	}
}

// kernelImportModule is a community module that answers describe with
// {"tools":[]} through the kernel's functions and also declares imp: a
// module that would load and run but for imp.
func kernelImportModule(imp string, ownMemory bool) string {
	mem := `(memory (export "memory") 1)`
	if !ownMemory {
		mem = ""
	}
	return fmt.Sprintf(`(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  %s
  %s
  (data (i32.const 1000) "{\"tools\":[]}")
  (func (export "describe") (result i32)
    (local $off i64) (local $i i32)
    (local.set $off (call $alloc (i64.const 12)))
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (i32.const 12)))
      (call $store_u8 (i64.add (local.get $off) (i64.extend_i32_u (local.get $i))) (i32.load8_u offset=1000 (local.get $i)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))
    (call $output_set (local.get $off) (i64.const 12))
    (i32.const 0))
  (func (export "call") (result i32) (i32.const 0)))`, imp, mem)
}

// A community module may import only functions: the kernel's memory and
// globals, under either module name the host resolves to the kernel,
// refuse the load naming the import.
func TestCommunityKernelMemoryAndGlobalsRefused(t *testing.T) {
	for _, c := range []struct{ name, imp, want string }{
		{"memory", `(import "extism:host/env" "memory" (memory 1))`, "extism:host/env::memory, a memory"},
		{"memory-as-user", `(import "extism:host/user" "memory" (memory 1))`, "extism:host/user::memory, a memory"},
		{"heap", `(import "extism:host/env" "dsh_heap" (global (mut i64)))`, "extism:host/env::dsh_heap, a global"},
		{"out-as-user", `(import "extism:host/user" "dsh_out_off" (global (mut i64)))`, "extism:host/user::dsh_out_off, a global"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "m.wat")
			os.WriteFile(src, []byte(kernelImportModule(c.imp, !strings.Contains(c.imp, "(memory"))), 0o644)
			out := filepath.Join(dir, "m.wasm")
			checkCBuild(t, guestbuild.CompileWat(out, src))
			h := newHost(t)
			_, err := h.Load(context.Background(), Spec{Name: "m", Source: out})
			if !errors.Is(err, ErrABI) || !strings.Contains(err.Error(), "module imports "+c.want) || !strings.Contains(err.Error(), "may import only functions") {
				t.Fatalf("load: %v; want ErrABI naming %s", err, c.want)
			}
		})
	}
	// The same module without the import loads: the refusal is the
	// import's alone.
	dir := t.TempDir()
	src := filepath.Join(dir, "m.wat")
	os.WriteFile(src, []byte(kernelImportModule("", true)), 0o644)
	out := filepath.Join(dir, "m.wasm")
	checkCBuild(t, guestbuild.CompileWat(out, src))
	if _, err := newHost(t).Load(context.Background(), Spec{Name: "m", Source: out}); err != nil {
		t.Fatalf("the module without the import: %v", err)
	}
}
