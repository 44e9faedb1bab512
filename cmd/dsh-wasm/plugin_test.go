package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/pgtest"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

// TestMain points the default compilation cache at the tests' shared
// cache, so that each module compiles once per machine, not once per run.
func TestMain(m *testing.M) {
	if os.Getenv(plainMCPEnv) == "1" { // the MCP benchmark's baseline server
		os.Exit(servePlainMCP())
	}
	if os.Getenv(nofileEnv) != "" { // a child under a descriptor limit
		os.Exit(execUnderNofile())
	}
	if os.Getenv(plugin.EnvCacheDir) == "" && os.Getenv(plugin.EnvCache) == "" {
		dir, err := guestbuild.CacheDir()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Setenv(plugin.EnvCacheDir, filepath.Join(dir, "wazero"))
	}
	code := m.Run()
	removeBinary()
	pgtest.Stop()
	os.Exit(code)
}

func inspect(t *testing.T, args ...string) inspectReport {
	t.Helper()
	code, stdout, stderr := runCLI(t, "", append([]string{"plugin", "inspect"}, args...)...)
	if code != 0 || stderr != "" {
		t.Fatalf("inspect %v: exit %d stderr %q", args, code, stderr)
	}
	var r inspectReport
	d := json.NewDecoder(strings.NewReader(stdout))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		t.Fatalf("inspect %v: output is not a report: %v\n%s", args, err, stdout)
	}
	return r
}

func TestInspectBuiltinFacts(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "guests", "facts.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	code, stdout, stderr := runCLI(t, "", "plugin", "inspect", "builtin:facts")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d stderr %q", code, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
	}
	want := map[string]any{
		"name":          "facts",
		"sha256":        "sha256:" + hex.EncodeToString(sum[:]),
		"abi":           float64(1),
		"plugin_abi":    "dsh",
		"sections":      []any{},
		"variables":     []any{"date", "platform"},
		"tools":         []any{},
		"subscriptions": []any{},
		"capabilities":  map[string]any{},
		"bounds": map[string]any{"call_timeout": "30s", "host_bytes_per_call": float64(256 << 20), "init_timeout": "10s",
			"log_bytes_per_minute": float64(1 << 20), "max_registrations": float64(1024), "memory_bytes": float64(128 << 20),
			"prompt_bytes": float64(64 << 10), "prompt_bytes_used": float64(0), "registrations": float64(2),
			"small_request_bytes": float64(4096), "state_bytes_per_session": float64(16 << 20), "wall_timeout": "15m0s"},
		"prompt_order": []any{float64(1), float64(math.MaxInt)},
		"events":       []any{},
		"dangling":     []any{},
		"exec":         jsonValue(t, deploy.ExecEnforced()),
	}
	if g, w := mustMarshal(t, got), mustMarshal(t, want); g != w {
		t.Fatalf("report\n got %s\nwant %s", g, w)
	}
}

func TestInspectConfigValues(t *testing.T) {
	// facts validates its config in dsh_init, so it shows how a VALUE was
	// taken: linux/arm64 is not JSON, so a string; 42 is JSON, a number.
	r := inspect(t, "builtin:facts", "--set", "platform=linux/arm64", "--set", `timezone="Asia/Tokyo"`)
	if r.Name != "facts" || !slices.Equal(r.Variables, []string{"date", "platform"}) {
		t.Fatalf("report %+v", r)
	}
	code, stdout, stderr := runCLI(t, "", "plugin", "inspect", "--set", "platform=42", "builtin:facts")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "cannot unmarshal number") {
		t.Fatalf("exit %d stdout %q stderr %q", code, stdout, stderr)
	}
}

func TestInspectWithoutUsableCache(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, []byte("not a module"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(plugin.EnvCacheDir, filepath.Join(notDir, "cache")) // cannot be created
	// The host starts with an in-memory cache and gets as far as compiling
	// the module (a tiny non-module, so the test compiles nothing big).
	code, stdout, stderr := runCLI(t, "", "plugin", "inspect", notDir)
	if code != 1 || stdout != "" || !strings.Contains(stderr, "unsupported plugin ABI") {
		t.Fatalf("exit %d stdout %q stderr %q; want the module refused, not the cache", code, stdout, stderr)
	}
}

func TestInspectTestkit(t *testing.T) {
	kit, err := guestbuild.Build("testdata/guests/testkit")
	if err != nil {
		t.Fatal(err)
	}
	r := inspect(t, "--set", `sections=[{"name":"kit:static","order":120,"text":"Static on {{model}} for {{from_elsewhere}}."},{"name":"kit:dyn","order":130,"dynamic":true}]`,
		kit, // flags may follow SOURCE
		"--set", `tools=["echo","counter"]`,
		"--set", `variables=["kit_model"]`,
		"--set", `subscribe=[{"event":"turn/start"}]`,
		"--set", `needs={"env":["HOME"],"net":["example.com"]}`)
	want := inspectReport{
		Name:      deploy.PluginNameFromSource(kit),
		SHA256:    "sha256:" + fileDigest(t, kit),
		ABI:       1,
		PluginABI: "dsh",
		Sections: []inspectSection{
			{Name: "kit:static", Order: 120, Text: "Static on {{model}} for {{from_elsewhere}}."},
			{Name: "kit:dyn", Order: 130, Dynamic: true},
		},
		Variables: []string{"kit_model"},
		Tools: []prompt.Tool{
			{Name: "echo", Description: "testkit tool echo", Parameters: json.RawMessage(`{"type":"object"}`)},
			{Name: "counter", Description: "testkit tool counter", Parameters: json.RawMessage(`{"type":"object"}`)},
		},
		Subscriptions: []hostfns.SubscribeRequest{{Event: "turn/start", Mode: "listen"}},
		// Declared needs are reported, not refused: nothing is granted.
		Capabilities: hostfns.Capabilities{Env: []string{"HOME"}, Net: []string{"example.com"}},
		// The defaults, and what the registrations hold: the static
		// section's 43 bytes and the two tools' names, descriptions and
		// schemas (4+17+17 + 7+20+17).
		Bounds: deploy.PluginBounds{MemoryBytes: 128 << 20, CallTimeout: "30s", InitTimeout: "10s", WallTimeout: "15m0s",
			HostBytesPerCall: 256 << 20, PromptBytes: 64 << 10, PromptBytesUsed: 125, LogBytesPerMinute: 1 << 20,
			Registrations: 6, MaxRegistrations: 1024, StateBytesPerSession: 16 << 20, SmallRequestBytes: 4096},
		PromptOrder: [2]int{1, math.MaxInt},
		Events:      []string{},
		// {{model}} is the harness's; from_elsewhere must come from
		// another plugin of the deployment.
		Dangling: []prompt.Dangling{{Section: "kit:static", Owner: "plugin " + deploy.PluginNameFromSource(kit), Variable: "from_elsewhere"}},
		Exec:     deploy.ExecEnforced(),
	}
	if g, w := mustMarshal(t, r), mustMarshal(t, want); g != w {
		t.Fatalf("report\n got %s\nwant %s", g, w)
	}
}

// jsonValue is v as encoding/json decodes it into an any.
func jsonValue(t *testing.T, v any) any {
	t.Helper()
	var out any
	if err := json.Unmarshal([]byte(mustMarshal(t, v)), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestInspectExecLimits: inspect reports the exec limits and how this
// machine enforces them, apart from the kill mode.
func TestInspectExecLimits(t *testing.T) {
	code, stdout, stderr := runCLI(t, "", "plugin", "inspect", "builtin:facts")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r struct {
		Exec struct {
			Mode      string `json:"mode"`
			Processes struct {
				Limit      int64  `json:"limit"`
				By         string `json:"by"`
				Unenforced string `json:"unenforced"`
			} `json:"processes"`
			Memory struct {
				Limit      int64  `json:"limit"`
				By         string `json:"by"`
				Unenforced string `json:"unenforced"`
			} `json:"memory"`
			FileBytes struct {
				Limit int64  `json:"limit"`
				By    string `json:"by"`
			} `json:"file_bytes"`
			Capabilities string `json:"capabilities"`
			Scope        string `json:"scope"`
		} `json:"exec"`
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	x, sys := r.Exec, deploy.ExecEnforced()
	if x.Mode != string(sys.Mode) || x.Processes.Limit != int64(config.DefaultExecProcesses) ||
		x.Memory.Limit != int64(config.DefaultExecMemory) || x.FileBytes.Limit != int64(config.DefaultExecFileBytes) ||
		x.FileBytes.By != "RLIMIT_FSIZE" || x.Capabilities == "" || x.Scope == "" {
		t.Errorf("exec report %+v", x)
	}
	if (x.Processes.By == "") == (x.Processes.Unenforced == "") || (x.Memory.By == "") == (x.Memory.Unenforced == "") {
		t.Errorf("each limit says how it is enforced or why not: %+v", x)
	}
	if x.Processes.By != sys.Processes.By || x.Memory.By != sys.Memory.By {
		t.Errorf("report %+v, system %+v", x, sys)
	}
}

func TestInspectRefused(t *testing.T) {
	kit, err := guestbuild.Build("testdata/guests/testkit")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	notWasm := filepath.Join(dir, "notes.wasm")
	if err := os.WriteFile(notWasm, []byte("just text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"missing file", []string{filepath.Join(dir, "absent.wasm")}, "no such file"},
		{"not wasm", []string{notWasm}, "unsupported plugin ABI"},
		{"unknown builtin", []string{"builtin:nope"}, `no built-in plugin "nope" (have facts, hooks-claude, hooks-codex, subagent, tool-bash, tool-fs, tool-todo, tool-web)`},
		{"init fails", []string{kit, "--set", "init_fail=refused\non purpose"}, `refused\non purpose`},
		{"init traps", []string{kit, "--set", "init_trap=true"}, "plugin trapped"},
		{"bad config for facts", []string{"builtin:facts", "--set", "timezone=Local"}, `timezone "Local"`},
		{"claims a harness name", []string{kit, "--set", `sections=[{"name":"harness:identity","order":5,"text":"x"}]`}, "name reserved for the harness"},
		{"claims model", []string{kit, "--set", `variables=["model"]`}, "name reserved for the harness"},
		{"order before the persona", []string{kit, "--set", `sections=[{"name":"kit:first","order":-1000000,"text":"x"}]`}, "outside grants.prompt.order [1, max]"},
		{"malformed template", []string{kit, "--set", `sections=[{"name":"kit:s","order":5,"text":"{{ model }}"}]`}, "invalid template"},
		{"waterfall without grant", []string{kit, "--set", `subscribe=[{"event":"system-prompt/assemble","mode":"waterfall"}]`}, "not granted the system-prompt/assemble waterfall"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", append([]string{"plugin", "inspect"}, tc.args...)...)
			if code != 1 || stdout != "" {
				t.Fatalf("exit %d stdout %q stderr %q; want exit 1, no stdout", code, stdout, stderr)
			}
			if !strings.HasPrefix(stderr, "error: ") || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("stderr %q: want one line starting error: containing %q", stderr, tc.stderr)
			}
		})
	}
}

func TestPluginUsageErrors(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"no source", []string{"plugin", "inspect"}, "accepts 1 arg(s), received 0"},
		{"two sources", []string{"plugin", "inspect", "a.wasm", "b.wasm"}, "accepts 1 arg(s), received 2"},
		{"set without equals", []string{"plugin", "inspect", "--set", "platform", "builtin:facts"}, `--set "platform": want KEY=VALUE`},
		{"set without key", []string{"plugin", "inspect", "--set", "=1", "builtin:facts"}, "want KEY=VALUE"},
		{"repeated key", []string{"plugin", "inspect", "--set", "a=1", "--set", "a=2", "builtin:facts"}, `key "a" is given more than once`},
		{"unknown flag", []string{"plugin", "inspect", "--bogus", "builtin:facts"}, "unknown flag: --bogus"},
		{"unknown subcommand", []string{"plugin", "nope"}, `unknown command "nope" for "dsh-wasm plugin"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", tc.args...)
			if code != 2 || stdout != "" {
				t.Fatalf("exit %d stdout %q stderr %q; want exit 2, no stdout", code, stdout, stderr)
			}
			if !strings.HasPrefix(stderr, "error: ") || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("stderr %q: want one line starting error: containing %q", stderr, tc.stderr)
			}
		})
	}
}

func TestPluginHelp(t *testing.T) {
	for _, args := range [][]string{{"plugin"}, {"plugin", "--help"}, {"plugin", "inspect", "--help"}, {"help", "plugin", "inspect"}} {
		code, stdout, stderr := runCLI(t, "", args...)
		if code != 0 || !strings.Contains(stdout, "Usage:") || stderr != "" {
			t.Fatalf("%v: exit %d stdout %q stderr %q", args, code, stdout, stderr)
		}
	}
	_, stdout, _ := runCLI(t, "", "plugin", "--help")
	if !strings.Contains(stdout, "builtin:facts") {
		t.Fatalf("plugin help does not list the built-ins:\n%s", stdout)
	}
}

func TestConfigObject(t *testing.T) {
	got, err := configObject([]string{"s=plain", "n=42", "b=true", `q="quoted"`, "o={\"k\":[1]}", "e=", "eq=a=b", "bad={"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"b":true,"bad":"{","e":"","eq":"a=b","n":42,"o":{"k":[1]},"q":"quoted","s":"plain"}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if got, err := configObject(nil); err != nil || got != nil {
		t.Fatalf("no flags: %s, %v; want nil (the host passes {})", got, err)
	}
}

func fileDigest(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A community (hyper-mcp) plugin's tools are charged to its prompt_bytes:
// inspect shows what its names, descriptions and schemas hold.
func TestInspectCommunityPromptBytes(t *testing.T) {
	src, err := guestbuild.Build("testdata/guests/mcp-v1")
	if err != nil {
		t.Fatal(err)
	}
	r := inspect(t, src)
	var want int64
	for _, tool := range r.Tools {
		// The report is indented; the schema is charged as registered.
		var schema bytes.Buffer
		if err := json.Compact(&schema, tool.Sent().Parameters); err != nil {
			t.Fatal(err)
		}
		want += int64(len(tool.Name) + len(tool.Description) + schema.Len())
	}
	if r.PluginABI != "hyper-mcp-v1" || len(r.Tools) == 0 || want == 0 || r.Bounds.PromptBytesUsed != want {
		t.Fatalf("inspect: abi %s, %d tools, prompt_bytes_used %d, want %d", r.PluginABI, len(r.Tools), r.Bounds.PromptBytesUsed, want)
	}
}
