package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
)

// rawPlugin loads the raw-ABI guest, whose exports lie on request.
func (e *env) rawPlugin() {
	e.t.Helper()
	e.mustLoad("raw", "rawabi", map[string]any{}, defaultLimits)
	e.wantRawOK()
}

func (e *env) wantRawOK() {
	e.t.Helper()
	if r, err := e.call(e.main, "raw_ok", map[string]any{}); err != nil || r.Text != "raw ok" {
		e.t.Errorf("raw_ok: %+v, %v", r, err)
	}
}

// wantBadOutput calls a raw tool whose export lies and checks the host
// refuses its output and recovers.
func (e *env) wantBadOutput(tool, msg string) {
	e.t.Helper()
	r, err := e.call(e.main, tool, map[string]any{})
	e.wantErr(tool, err, plugin.ErrBadOutput, msg)
	if r.Text != "" {
		e.t.Errorf("%s: a result came through: %q", tool, r.Text)
	}
	e.wantRawOK()
}

func moduleAttacks() []hostileAttack {
	return []hostileAttack{
		{name: "export-output-out-of-bounds", run: func(e *env) string {
			e.rawPlugin()
			e.wantBadOutput("raw_oob", "plugin returned bad output: output at 0xffffff00+4096 is outside guest memory")
			return "refused (bad output); the instance was discarded"
		}},
		{name: "export-output-too-large", run: func(e *env) string {
			e.rawPlugin()
			e.wantBadOutput("raw_huge", fmt.Sprintf("%d bytes of output exceed the limit of %d", hostfns.MaxOutputBytes+1, hostfns.MaxOutputBytes))
			return "refused (bad output) before reading it"
		}},
		{name: "export-bad-status", run: func(e *env) string {
			e.rawPlugin()
			e.wantBadOutput("raw_status", "unknown output status 7")
			e.wantBadOutput("raw_novalue", "status 2 is not valid for a tool")
			return "refused (bad output: unknown or misplaced status byte)"
		}},
		{name: "alloc-lies", run: func(e *env) string {
			e.rawPlugin()
			for tool, ptr := range map[string]string{"raw_badalloc": "0xfffffff0", "raw_zeroalloc": "0x0"} {
				if r, err := e.call(e.main, tool, map[string]any{}); err != nil || r.IsError {
					e.t.Fatalf("%s: %+v, %v", tool, r, err)
				}
				e.wantBadOutput("raw_ok", "returned "+ptr+", not")
			}
			return "refused (bad output: dsh_alloc returned no writable buffer)"
		}},
		{name: "abi-version-mismatch", run: func(e *env) string {
			e.t.Setenv("HOSTILE_ABI_VERSION", "2")
			_, err := e.load("raw", "rawabi", map[string]any{}, defaultLimits, "env: [HOSTILE_ABI_VERSION]")
			e.wantErr("load", err, plugin.ErrABI, `plugin "raw": dsh_abi_version: unsupported plugin ABI: the plugin was built for ABI version 2; this host speaks version 1`)
			return "refused (unsupported ABI version 2)"
		}},
		{name: "missing-exports", run: func(e *env) string {
			_, err := e.load("noexports", "noexports", map[string]any{})
			e.wantErr("load", err, plugin.ErrABI, "module does not export dsh_abi_version; is it a dsh:host/v1 plugin?")
			return "refused (unsupported ABI: no dsh_abi_version)"
		}},
		{name: "extism-abi-module", run: func(e *env) string {
			_, err := e.load("extism", "extism", map[string]any{})
			// Community Extism plugins run on the host's Extism kernel, but
			// only those exporting a known tool ABI's pair of functions.
			e.wantErr("load", err, plugin.ErrABI, "an Extism module must export describe and call (hyper-mcp v1, mcp.run) or list_tools and call_tool (hyper-mcp v2); it has _initialize, call")
			return "refused (unsupported ABI: an Extism module that is no known tool ABI)"
		}},
		{name: "unknown-host-import", run: func(e *env) string {
			// The module is refused when it is loaded, before any of its
			// code runs: the ABI defines no such host function.
			_, err := e.load("unknownimport", "unknownimport", map[string]any{})
			if err == nil || !errors.Is(err, plugin.ErrABI) ||
				!strings.Contains(err.Error(), `dsh:host/v1::exec_unrestricted, which ABI version 1 does not define`) {
				e.t.Errorf("load: %v", err)
			}
			if len(e.host.Plugins()) != 0 {
				e.t.Errorf("loaded: %v", e.host.Plugins())
			}
			return "refused at load (unsupported ABI: the import does not exist)"
		}},
		{name: "sha256-pin-mismatch", run: func(e *env) string {
			orig := guestWasm(e.t, "attacker")
			b, err := os.ReadFile(orig)
			must(e.t, err)
			sum := sha256.Sum256(b)
			pin := "sha256:" + hex.EncodeToString(sum[:])
			// A valid module with one more custom section: what a
			// substituted or tampered file looks like.
			tampered := filepath.Join(e.base, "tampered.wasm")
			must(e.t, os.WriteFile(tampered, append(b, 0x00, 0x07, 0x06, 'e', 'v', 'i', 'l', '!', '!'), 0o644))
			_, err = e.host.Load(e.ctx, e.spec("attacker", tampered, pin, map[string]any{"self": "attacker"}, e.fsGrant(), defaultLimits))
			e.recordErr(err)
			e.wantErr("load", err, plugin.ErrDigestMismatch, "pinned "+pin)
			// The genuine module under the same pin loads.
			if _, err := e.host.Load(e.ctx, e.spec("attacker", orig, pin, map[string]any{"self": "attacker"}, e.fsGrant(), defaultLimits)); err != nil {
				e.t.Errorf("the pinned module: %v", err)
			}
			return "refused (sha256 mismatch); the genuine module loads"
		}},
	}
}
