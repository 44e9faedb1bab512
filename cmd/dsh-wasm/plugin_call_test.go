package main

import (
	"encoding/json"
	"errors"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/prereq"
)

func buildGuest(t *testing.T, dir string) string {
	t.Helper()
	p, err := guestbuild.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPluginCallCommunity(t *testing.T) {
	v1 := buildGuest(t, "testdata/guests/mcp-v1")
	code, stdout, stderr := runCLI(t, "", "plugin", "call", v1, "echo", `{"text":"hello there"}`)
	if code != 0 || stdout != "hello there\n" || stderr != "" {
		t.Fatalf("echo: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	// An error result: its text on stdout, exit 1.
	code, stdout, stderr = runCLI(t, "", "plugin", "call", v1, "config", `{"key":"absent"}`)
	if code != 1 || stdout != "\n" || !strings.Contains(stderr, "error result") {
		t.Fatalf("error result: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	// --set reaches the plugin's config.
	run := buildGuest(t, "testdata/guests/mcp-run")
	code, stdout, _ = runCLI(t, "", "plugin", "call", "--set", "greeting=Ahoy", run, "greet", `{"name":"Bo"}`)
	if code != 0 || stdout != "Ahoy, Bo\n" {
		t.Fatalf("greet: exit %d stdout %q", code, stdout)
	}
	code, _, stderr = runCLI(t, "", "plugin", "call", run, "nope")
	if code != 1 || !strings.Contains(stderr, `has no tool "nope" (it has [greet run_echo])`) {
		t.Fatalf("unknown tool: exit %d stderr %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "", "plugin", "call", run, "greet", `[1]`)
	if code != 2 || !strings.Contains(stderr, "want a JSON object") {
		t.Fatalf("bad args: exit %d stderr %q", code, stderr)
	}
}

func TestPluginCallDsh(t *testing.T) {
	kit := buildGuest(t, "testdata/guests/testkit")
	code, stdout, stderr := runCLI(t, "", "plugin", "call", "--agent", "ag7", "--set", `tools=["echo"]`, kit, "echo", `{"text":"x"}`)
	if code != 0 || !strings.Contains(stdout, "x") {
		t.Fatalf("exit %d stdout %q stderr %q", code, stdout, stderr)
	}
}

func TestInspectCommunityABI(t *testing.T) {
	for _, c := range []struct{ dir, abi, tool string }{
		{"testdata/guests/mcp-v1", "hyper-mcp-v1", "echo"},
		{"testdata/guests/mcp-v2", "hyper-mcp-v2", "v2_echo"},
		{"testdata/guests/mcp-run", "mcp-run", "greet"},
	} {
		code, stdout, stderr := runCLI(t, "", "plugin", "inspect", buildGuest(t, c.dir))
		if code != 0 {
			t.Fatalf("%s: exit %d %s", c.dir, code, stderr)
		}
		var r inspectReport
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatal(err)
		}
		if r.PluginABI != c.abi || r.ABI != 0 || len(r.Tools) == 0 || r.Tools[0].Name != c.tool || r.Tools[0].Description == "" {
			t.Errorf("%s: %s", c.dir, stdout)
		}
	}
}

func TestInspectRender(t *testing.T) {
	kit := buildGuest(t, "testdata/guests/testkit")
	code, stdout, stderr := runCLI(t, "", "plugin", "inspect", "--render", kit,
		"--set", `sections=[{"name":"kit:static","order":120,"text":"Model {{kit_model}}."},{"name":"kit:dyn","order":130,"dynamic":true}]`,
		"--set", `variables=["kit_model"]`)
	if code != 0 {
		t.Fatalf("exit %d %s", code, stderr)
	}
	var r struct {
		Values   map[string]*string       `json:"variable_values"`
		Rendered []deploy.RenderedSection `json:"rendered_sections"`
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	if v := r.Values["kit_model"]; v == nil || *v != "kit_model:cli" {
		t.Errorf("variable_values = %v", r.Values)
	}
	want := []deploy.RenderedSection{{Name: "kit:static", Text: "Model kit_model:cli."}, {Name: "kit:dyn", Text: "agent inspect runs cli"}}
	if g, w := mustMarshal(t, r.Rendered), mustMarshal(t, want); g != w {
		t.Errorf("rendered\n got %s\nwant %s", g, w)
	}
}

// A variable export that answers status byte 9 is caught by inspect, not
// first by an agent's prompt assembly.
func TestInspectCatchesBadStatusByte(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "badstatus.wat")
	os.WriteFile(src, []byte(`(module
  (import "dsh:host/v1" "variable_register" (func $reg (param i32 i32 i32 i32) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 0) "{\"name\":\"bad_var\"}")
  (data (i32.const 2048) "\09")
  (func (export "dsh_abi_version") (result i32) (i32.const 1))
  (func (export "dsh_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "dsh_init") (param i32 i32) (result i64)
    (drop (call $reg (i32.const 0) (i32.const 18) (i32.const 4096) (i32.const 256)))
    (i64.const 0))
  (func (export "dsh_variable") (param i32 i32) (result i64)
    (i64.const 0x0000080000000001)))`), 0o644)
	wasm := filepath.Join(dir, "badstatus.wasm")
	if err := guestbuild.CompileWat(wasm, src); err != nil {
		if errors.Is(err, guestbuild.ErrNoWat2Wasm) {
			prereq.Missing(t, "%v", err)
		}
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "", "plugin", "inspect", wasm)
	if code != 1 || stdout != "" || !strings.Contains(stderr, "unknown output status 9") || !strings.Contains(stderr, "dsh_variable") {
		t.Fatalf("exit %d stdout %q stderr %q", code, stdout, stderr)
	}
}
