package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/internal/prereq"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

func init() { seamGroups = append(seamGroups, communitySeamAttacks) }

// loadCommunity loads testdata/guests/mcp-v1 as plugin name with cfg (its
// pad_* and extra_description keys shape the tool list) under the
// workspace grant and default limits, and returns the host's answer.
func (e *env) loadCommunity(name string, cfg map[string]any) (*plugin.Plugin, error) {
	e.t.Helper()
	path, err := guestbuild.Build("testdata/guests/mcp-v1")
	must(e.t, err)
	p, err := e.host.Load(e.ctx, e.spec(name, path, "", cfg, e.fsGrant(), defaultLimits))
	e.recordErr(err)
	return p, err
}

// wantNoToolsOf fails unless the registry holds no tool named with one of
// the prefixes (what a refused load must leave).
func (e *env) wantNoToolsOf(prefixes ...string) {
	e.t.Helper()
	var left []string
	for _, t := range e.host.Registry().Tools() {
		if slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(t.Name, p) }) {
			left = append(left, t.Name)
		}
	}
	if len(left) > 0 {
		e.t.Errorf("%d tools are registered after a refused load, the first %s", len(left), left[0])
	}
}

// sameTools reports whether two tool lists are the same, text and schema.
func sameTools(a, b []prompt.Tool) bool {
	return slices.EqualFunc(a, b, func(x, y prompt.Tool) bool {
		return x.Name == y.Name && x.Description == y.Description && string(x.Parameters) == string(y.Parameters)
	})
}

// communitySeamAttacks are attacks on the seam between a community
// (hyper-mcp, mcp.run) plugin's tool list and the registry every agent
// reads: registration and its quota have one owner (contrib.register),
// whatever the plugin's ABI, and no agent's call changes the list.
func communitySeamAttacks() []hostileAttack {
	return []hostileAttack{
		{name: "community-seam-schema-flood", run: func(e *env) string {
			// One tool whose input schema carries 256 KiB of property
			// description: small in count, large in every request.
			_, err := e.loadCommunity("schemer", map[string]any{"pad_tools": "1", "pad_schema": "262144"})
			e.wantErr("load", err, plugin.ErrInit, `tool "pad_0"`)
			e.wantErr("load", err, plugin.ErrInit, "past grants.limits.prompt_bytes (65536)")
			e.wantNoToolsOf("pad_", "echo")
			return "refused at load: the schema is charged to prompt_bytes; nothing registered"
		}},
		{name: "community-seam-tool-swarm", run: func(e *env) string {
			// Many tools of a few dozen bytes each: no one of them is big,
			// together they pass the quota before the registration limit.
			_, err := e.loadCommunity("swarm", map[string]any{"pad_tools": "1000"})
			e.wantErr("load", err, plugin.ErrInit, "past grants.limits.prompt_bytes (65536)")
			if err != nil && strings.Contains(err.Error(), "registrations") {
				e.t.Errorf("refused by the registration limit, not the quota: %v", err)
			}
			e.wantNoToolsOf("pad_", "echo")
			return "refused at load by prompt_bytes, before the registration limit"
		}},
		{name: "community-seam-growing-description", run: func(e *env) string {
			// After a small load, one agent's call makes the plugin list a
			// tool with a 64000-byte description (still under the quota)
			// and says the list changed: every agent's requests would
			// carry it.
			p, err := e.loadCommunity("grower", map[string]any{"extra_description": "64000"})
			if err != nil {
				e.t.Fatalf("load: %v", err)
			}
			used := p.Bounds().PromptBytesUsed
			if used == 0 {
				e.t.Error("the loaded tools are not charged")
			}
			victim := e.agent("victim")
			if r, err := e.call(victim, "echo", map[string]string{"text": "v"}); err != nil || r.Text != "v" {
				e.t.Fatalf("victim's echo: %+v, %v", r, err)
			}
			before := e.host.Registry().Tools()
			_, err = e.call(e.main, "enable_extra", map[string]string{})
			e.wantErr("enable_extra", err, plugin.ErrUnsupported, "notify_tool_list_changed")
			if after := e.host.Registry().Tools(); !sameTools(before, after) {
				e.t.Errorf("one agent's call changed the tools every agent sees (%d -> %d)", len(before), len(after))
			}
			if got := p.Bounds().PromptBytesUsed; got != used {
				e.t.Errorf("prompt_bytes_used %d -> %d", used, got)
			}
			for _, who := range []*prompt.AgentFacts{victim, e.main} {
				if _, err := e.call(who, "extra", map[string]string{}); !errors.Is(err, plugin.ErrNoTool) {
					e.t.Errorf("%s calls extra: %v, want ErrNoTool", who.ID, err)
				}
			}
			return "notify_tool_list_changed refused; the list stays as loaded for every agent"
		}},
		{name: "community-seam-kernel-output-registers", run: func(e *env) string {
			// The kernel's output registers, imported as globals under the
			// other module name that resolves to the kernel: describe
			// answers by setting them itself instead of calling
			// output_set, a module that otherwise loads and runs.
			dir := e.t.TempDir()
			src, out := filepath.Join(dir, "regs.wat"), filepath.Join(dir, "regs.wasm")
			must(e.t, os.WriteFile(src, []byte(`(module
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/user" "dsh_out_off" (global $off (mut i64)))
  (import "extism:host/user" "dsh_out_len" (global $len (mut i64)))
  (memory (export "memory") 1)
  (data (i32.const 1000) "{\"tools\":[]}")
  (func (export "describe") (result i32)
    (local $p i64) (local $i i32)
    (local.set $p (call $alloc (i64.const 12)))
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (i32.const 12)))
      (call $store_u8 (i64.add (local.get $p) (i64.extend_i32_u (local.get $i))) (i32.load8_u offset=1000 (local.get $i)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))
    (global.set $off (local.get $p))
    (global.set $len (i64.const 12))
    (i32.const 0))
  (func (export "call") (result i32) (i32.const 0)))`), 0o644))
			if err := guestbuild.CompileWat(out, src); errors.Is(err, guestbuild.ErrNoWat2Wasm) {
				prereq.Missing(e.t, "%v", err)
			} else {
				must(e.t, err)
			}
			_, err := e.host.Load(e.ctx, e.spec("regs", out, "", map[string]any{}, e.fsGrant(), defaultLimits))
			e.recordErr(err)
			e.wantErr("load", err, plugin.ErrABI, "module imports extism:host/user::dsh_out_off, a global")
			if e.host.Plugin("regs") != nil {
				e.t.Error("the plugin is loaded")
			}
			return "refused at load, naming the import: a community module may import only functions"
		}},
	}
}
