package plugin

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/abi/extism"
	"github.com/dsh-wasm/dsh-wasm/internal/syncbuf"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

func communityGuest(t testing.TB, name string) string {
	t.Helper()
	p, err := guestbuild.Build("testdata/guests/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func loggingHost(t testing.TB) (*Host, *syncbuf.Buffer) {
	t.Helper()
	buf := &syncbuf.Buffer{}
	h, err := New(Options{Registry: prompt.NewRegistry(nil), Cache: sharedCache(t),
		Logger: slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h, buf
}

func TestCommunityV1DescribeAndCall(t *testing.T) {
	ctx := context.Background()
	h, logs := loggingHost(t)
	p, err := h.Load(ctx, Spec{Name: "v1", Source: communityGuest(t, "mcp-v1")})
	if err != nil {
		t.Fatal(err)
	}
	if p.ABI() != ABIHyperMCPv1 {
		t.Errorf("ABI = %q, want %q (it imports hyper-mcp host functions)", p.ABI(), ABIHyperMCPv1)
	}
	tools := p.Contribution().Tools
	if len(tools) != 11 || tools[0].Name != "echo" || tools[0].Description != "Echo the text back." || !strings.Contains(string(tools[0].Parameters), `"text"`) {
		t.Fatalf("tools = %+v", tools)
	}
	if _, ok := registryTool(h, "read_file"); !ok {
		t.Error("read_file is not in the registry")
	}
	res, err := h.CallTool(ctx, agent("a1", "m"), "echo", []byte(`{"text":"hi \"there\" \u00e9"}`))
	if err != nil || res.IsError || res.Text != `hi "there" é` {
		t.Fatalf("echo = %+v, %v", res, err)
	}
	// Progress and logging notifications go to the log.
	if l := logs.String(); !strings.Contains(l, "mcp progress") || !strings.Contains(l, `progressToken`) || !strings.Contains(l, "mcp logging message") {
		t.Errorf("notifications not logged:\n%s", l)
	}
	res, err = h.CallTool(ctx, agent("a1", "m"), "media", nil)
	if err != nil || res.Text != "look:\n[image: image/png, 10 bytes]\n[resource: file:///r.txt, text/plain, 5 bytes]" {
		t.Fatalf("media = %+v, %v", res, err)
	}
	res, err = h.CallTool(ctx, agent("a1", "m"), "nosuch_in_plugin", []byte(`{}`))
	if !errors.Is(err, ErrNoTool) {
		t.Errorf("unknown tool: %+v, %v", res, err)
	}
	res, err = h.CallTool(ctx, agent("a1", "m"), "echo", []byte(`[1]`))
	if err != nil || !res.IsError || !strings.Contains(res.Text, "JSON object") {
		t.Errorf("array arguments: %+v, %v", res, err)
	}
}

func TestCommunityV2NeedsContext(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	p, err := h.Load(ctx, Spec{Name: "v2", Source: communityGuest(t, "mcp-v2")})
	if err != nil {
		t.Fatal(err)
	}
	if p.ABI() != ABIHyperMCPv2 {
		t.Fatalf("ABI = %q", p.ABI())
	}
	// The guest itself refuses list_tools without the context, as real v2
	// plugins do, so the load above proves the host sent one.
	in, err := p.loadInstance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, msg, failed, err := in.invokeExtism(ctx, &callState{}, "list_tools", time.Minute, []byte(`{}`))
	if err != nil || !failed || !strings.Contains(msg, "missing field `context`") {
		t.Fatalf("list_tools({}) = %q failed=%v err=%v; the guest must refuse it", msg, failed, err)
	}
	if got := len(p.Contribution().Tools); got != 3 {
		t.Fatalf("%d tools", got)
	}
	a := agent("a", "m")
	res, err := h.CallTool(ctx, a, "v2_echo", []byte(`{"text":"two"}`))
	if err != nil || res.Text != "two" {
		t.Fatalf("v2_echo = %+v, %v", res, err)
	}
	res, err = h.CallTool(ctx, a, "v2_whoami", nil)
	if err != nil || !strings.HasPrefix(res.Text, "id=") || res.Text == "id=" {
		t.Fatalf("v2_whoami = %+v, %v", res, err)
	}
	// Extism vars live with the instance: an agent's calls count on.
	for want := range []string{"1", "2"} {
		res, err = h.CallTool(ctx, a, "v2_counter", nil)
		if err != nil || res.Text != []string{"1", "2"}[want] {
			t.Fatalf("v2_counter call %d = %+v, %v", want+1, res, err)
		}
	}
	res, err = h.CallTool(ctx, a, "v2_unknown_tool_never_listed", nil)
	if !errors.Is(err, ErrNoTool) {
		t.Fatalf("unlisted: %+v %v", res, err)
	}
}

func TestCommunityMCPRunLegacyConfig(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	p, err := h.Load(ctx, Spec{Name: "srv", Source: communityGuest(t, "mcp-run"), Config: cfg(t, map[string]any{"greeting": "Hello"})})
	if err != nil {
		t.Fatal(err)
	}
	if p.ABI() != ABIMCPRun {
		t.Fatalf("ABI = %q", p.ABI())
	}
	res, err := h.CallTool(ctx, agent("a", "m"), "greet", []byte(`{"name":"Ann"}`))
	if err != nil || res.IsError || res.Text != "Hello, Ann" {
		t.Fatalf("greet = %+v, %v", res, err)
	}
}

func TestCommunityUnsupportedHostFunction(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	if _, err := h.Load(ctx, Spec{Name: "v1", Source: communityGuest(t, "mcp-v1")}); err != nil {
		t.Fatal(err)
	}
	a := agent("a", "m")
	_, err := h.CallTool(ctx, a, "sample", nil)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "create_message") {
		t.Fatalf("sample: %v, want ErrUnsupported naming create_message", err)
	}
	if res, err := h.CallTool(ctx, a, "echo", []byte(`{"text":"still here"}`)); err != nil || res.Text != "still here" {
		t.Fatalf("after the failure: %+v, %v", res, err)
	}
}

func netGrants(hosts ...string) *config.Grants {
	return &config.Grants{Net: config.NetGrant{AllowedHosts: hosts, AllowPrivate: true}}
}

func TestCommunityHTTPThroughNetguard(t *testing.T) {
	ctx := context.Background()
	var canaryHits int
	var mu sync.Mutex
	canary := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		canaryHits++
		mu.Unlock()
		w.Write([]byte("canary secret"))
	}))
	defer canary.Close()
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, canary.URL+"/stolen", http.StatusFound)
			return
		}
		w.Write([]byte("hello"))
	}))
	defer allowed.Close()
	h := newHost(t)
	_, err := h.Load(ctx, Spec{Name: "v1", Source: communityGuest(t, "mcp-v1"),
		Grants: netGrants(strings.TrimPrefix(allowed.URL, "http://"))})
	if err != nil {
		t.Fatal(err)
	}
	a := agent("a", "m")
	res, err := h.CallTool(ctx, a, "fetch", []byte(`{"url":"`+allowed.URL+`/"}`))
	if err != nil || res.Text != "200 hello" {
		t.Fatalf("granted host: %+v, %v", res, err)
	}
	for _, url := range []string{canary.URL + "/direct", allowed.URL + "/redirect"} {
		res, err = h.CallTool(ctx, a, "fetch", []byte(`{"url":"`+url+`"}`))
		if err == nil || !strings.Contains(err.Error(), "host not allowed") || strings.Contains(res.Text, "canary") {
			t.Errorf("fetch %s: %+v, %v; want a contained host-not-allowed error", url, res, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if canaryHits != 0 {
		t.Errorf("the unlisted host was reached %d times", canaryHits)
	}
	// Without a grant: refused too.
	h2 := newHost(t)
	if _, err := h2.Load(ctx, Spec{Name: "v1", Source: communityGuest(t, "mcp-v1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := h2.CallTool(ctx, a, "fetch", []byte(`{"url":"`+allowed.URL+`/"}`)); !errors.Is(err, ErrNotGranted) {
		t.Errorf("no grant: %v", err)
	}
}

func TestCommunityFSJail(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dir := filepath.Join(root, "granted")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(root, "secret.txt")
	os.WriteFile(secret, []byte("TOP SECRET"), 0o600)
	os.WriteFile(filepath.Join(dir, "ok.txt"), []byte("inside"), 0o600)
	if err := os.Symlink("../secret.txt", filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	h := newHost(t)
	_, err := h.Load(ctx, Spec{Name: "v1", Source: communityGuest(t, "mcp-v1"),
		Grants: &config.Grants{FS: []config.FSGrant{{Path: dir, Mode: config.ModeRW}}}})
	if err != nil {
		t.Fatal(err)
	}
	a := agent("a", "m")
	res, err := h.CallTool(ctx, a, "read_file", []byte(`{"path":"`+filepath.Join(dir, "ok.txt")+`"}`))
	if err != nil || res.IsError || res.Text != "inside" {
		t.Fatalf("granted file: %+v, %v", res, err)
	}
	for _, path := range []string{filepath.Join(dir, "escape"), secret, filepath.Join(dir, "..", "secret.txt")} {
		res, err = h.CallTool(ctx, a, "read_file", []byte(`{"path":"`+path+`"}`))
		if err != nil || !res.IsError || strings.Contains(res.Text, "SECRET") {
			t.Errorf("read %s: %+v, %v; want an error result without the secret", path, res, err)
		}
	}
}

// watPlugin builds the checked-in .wat module that imports exactly the
// Rust PDK's kernel imports and hyper-mcp's host_fn! set.
func watPlugin(t testing.TB) string {
	t.Helper()
	root, err := guestbuild.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "rust-pdk-hyper-mcp.wasm")
	checkCBuild(t, guestbuild.CompileWat(out, filepath.Join(root, "testdata", "wat", "rust-pdk-hyper-mcp.wat")))
	return out
}

func TestCommunityRustPDKImports(t *testing.T) {
	ctx := context.Background()
	path := watPlugin(t)
	for _, abi := range []string{ABIHyperMCPv1, ABIHyperMCPv2} {
		t.Run(abi, func(t *testing.T) {
			h := newHost(t)
			p, err := h.Load(ctx, Spec{Name: "wat", Source: path, ABI: abi})
			if err != nil {
				t.Fatal(err)
			}
			if p.ABI() != abi {
				t.Fatalf("ABI = %q", p.ABI())
			}
			if tools := p.Contribution().Tools; len(tools) != 1 || tools[0].Name != "wat_echo" {
				t.Fatalf("tools = %+v", tools)
			}
			res, err := h.CallTool(ctx, agent("a", "m"), "wat_echo", []byte(`{"text":"x"}`))
			if err != nil || res.IsError || res.Text != "wat ok" {
				t.Fatalf("wat_echo = %+v, %v", res, err)
			}
		})
	}
	// Detected without the abi key: describe and call plus hyper-mcp
	// imports make it hyper-mcp v1.
	h := newHost(t)
	p, err := h.Load(ctx, Spec{Name: "wat", Source: path})
	if err != nil || p.ABI() != ABIHyperMCPv1 {
		t.Fatalf("detected: %v, %v", p, err)
	}
}

func TestCommunityLogCap(t *testing.T) {
	ctx := context.Background()
	h, logs := loggingHost(t)
	if _, err := h.Load(ctx, Spec{Name: "v1", Source: communityGuest(t, "mcp-v1")}); err != nil {
		t.Fatal(err)
	}
	if res, err := h.CallTool(ctx, agent("a", "m"), "biglog", nil); err != nil || res.Text != "logged" {
		t.Fatalf("biglog: %+v, %v", res, err)
	}
	l := logs.String()
	if !strings.Contains(l, strings.Repeat("x", extism.MaxLog)) || strings.Contains(l, strings.Repeat("x", extism.MaxLog+1)) {
		t.Errorf("the 100000-byte message was not cut at %d bytes", extism.MaxLog)
	}
}

func TestCommunityPrivateKernelModuleRefused(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "sneaky.wat")
	os.WriteFile(src, []byte(`(module
  (import "dsh:extism-go" "var_get" (func (param i64) (result i64)))
  (import "extism:host/env" "input_length" (func (result i64)))
  (memory (export "memory") 1)
  (func (export "describe") (result i32) (i32.const 0))
  (func (export "call") (result i32) (i32.const 0)))`), 0o644)
	out := filepath.Join(dir, "sneaky.wasm")
	checkCBuild(t, guestbuild.CompileWat(out, src))
	_, err := newHost(t).Load(context.Background(), Spec{Name: "sneaky", Source: out})
	if !errors.Is(err, ErrABI) || !strings.Contains(err.Error(), "dsh:extism-go::var_get, which this host does not provide") {
		t.Fatalf("load: %v", err)
	}
}

func TestCommunityBadImportSignature(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "bad.wat")
	os.WriteFile(src, []byte(`(module
  (import "extism:host/user" "notify_tool_list_changed" (func (param i64)))
  (memory (export "memory") 1)
  (func (export "describe") (result i32) (i32.const 0))
  (func (export "call") (result i32) (i32.const 0)))`), 0o644)
	out := filepath.Join(dir, "bad.wasm")
	checkCBuild(t, guestbuild.CompileWat(out, src))
	h := newHost(t)
	_, err := h.Load(context.Background(), Spec{Name: "bad", Source: out})
	if !errors.Is(err, ErrABI) || !strings.Contains(err.Error(), "notify_tool_list_changed as [i64] -> []; the host defines it as [] -> []") {
		t.Fatalf("load: %v", err)
	}
}

func registryTool(h *Host, name string) (prompt.Tool, bool) {
	for _, t := range h.Registry().Tools() {
		if t.Name == name {
			return t, true
		}
	}
	return prompt.Tool{}, false
}

func TestCommunityByteLimits(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	if _, err := h.Load(ctx, Spec{Name: "v1", Source: communityGuest(t, "mcp-v1")}); err != nil {
		t.Fatal(err)
	}
	a := agent("a", "m")
	res, err := h.CallTool(ctx, a, "setvar", []byte(`{"size":"1000"}`))
	if err != nil || res.Text != "stored 1000" {
		t.Fatalf("a small var: %+v, %v", res, err)
	}
	_, err = h.CallTool(ctx, a, "setvar", []byte(`{"size":"1048577"}`))
	if err == nil || !strings.Contains(err.Error(), "var_set: vars would hold 1048580 bytes; the limit is 1048576") {
		t.Fatalf("a var past the limit: %v", err)
	}
	// Config past its limit refuses the load.
	big := strings.Repeat("x", extism.MaxConfigBytes)
	_, err = newHost(t).Load(ctx, Spec{Name: "v1", Source: communityGuest(t, "mcp-v1"), Config: cfg(t, map[string]any{"k": big})})
	if !errors.Is(err, ErrSource) || !strings.Contains(err.Error(), "exceeds the Extism config limit") {
		t.Fatalf("big config: %v", err)
	}
}

// An agent's end closes its guest and its kernel: nothing stays reachable
// from the host's module map.
func TestCommunityInstancesClose(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	p, err := h.Load(ctx, Spec{Name: "v2", Source: communityGuest(t, "mcp-v2")})
	if err != nil {
		t.Fatal(err)
	}
	modules := func() int {
		n := 0
		p.byModule.Range(func(any, any) bool { n++; return true })
		return n
	}
	for _, id := range []string{"a", "b"} {
		if _, err := h.CallTool(ctx, agent(id, "m"), "v2_echo", []byte(`{"text":"x"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.Instances(); got != 3 || modules() != 6 {
		t.Fatalf("%d instances, %d modules; want 3 and 6 (a guest and a kernel each)", got, modules())
	}
	h.EndAgent(ctx, "a")
	h.EndAgent(ctx, "b")
	if got := p.Instances(); got != 1 || modules() != 2 {
		t.Fatalf("after the agents ended: %d instances, %d modules; want 1 and 2", got, modules())
	}
	if err := h.Unload(ctx, "v2"); err != nil {
		t.Fatal(err)
	}
	if modules() != 0 {
		t.Fatalf("after unload: %d modules", modules())
	}
}

// The Extism kernel's memory is capped at a quarter of the plugin's
// memory grant (docs/SECURITY.md, community ABIs): its memory's maximum
// is that share, and an input past it fails the call with the reason,
// before the guest sees any of it.
func TestCommunityKernelMemoryIsAQuarterOfTheGrant(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	const grant = 1024 // pages: 64 MiB
	p, err := h.Load(ctx, Spec{Name: "v1", Source: communityGuest(t, "mcp-v1"), Grants: &config.Grants{Limits: config.Limits{Memory: grant * config.WasmPageSize}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := p.kernel.ExportedMemories()["memory"].Max(); !ok || got != grant/4 {
		t.Fatalf("the kernel's memory is capped at %d pages (capped: %v), want %d: a quarter of the grant", got, ok, grant/4)
	}
	a := agent("a", "m")
	if res, err := h.CallTool(ctx, a, "echo", []byte(`{"text":"small"}`)); err != nil || res.Text != "small" {
		t.Fatalf("a small input: %+v, %v", res, err)
	}
	big := strings.Repeat("x", grant/4*65536+1)
	_, err = h.CallTool(ctx, a, "echo", []byte(`{"text":"`+big+`"}`))
	if err == nil || !strings.Contains(err.Error(), "do not fit in the Extism kernel's memory") {
		t.Fatalf("an input past the kernel's share: %v; want it refused by the kernel's cap", err)
	}
}
