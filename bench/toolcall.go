package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	extism "github.com/extism/go-sdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// text is the 1 KiB each echo takes and returns.
var text = strings.Repeat("abcdefghijklmnopqrstuvwxyz012345", 32)

// escaped is 1 KiB too, every sixteenth byte a quote or a newline: 64
// characters JSON must escape, as in code or command output.
var escaped = func() string {
	b := []byte(text)
	for i := 15; i < len(b); i += 16 {
		b[i] = "\"\n"[(i/16)%2]
	}
	return string(b)
}()

func argsOf(s string) []byte {
	b, _ := json.Marshal(map[string]string{"text": s})
	return b
}

// caller is one way of making the echo call; it returns the echoed text.
type caller struct {
	name    string
	call    func(args []byte, want string) error
	escapes bool // whether the -escaped variant means anything
	close   func()
	na      string
}

func sample(n int, f func() error) ([]time.Duration, time.Duration, error) {
	d := make([]time.Duration, 0, n)
	cpu0 := cpuTime()
	for len(d) < n {
		t0 := time.Now()
		if err := f(); err != nil {
			return nil, 0, err
		}
		d = append(d, time.Since(t0))
	}
	return d, (cpuTime() - cpu0) / time.Duration(n), nil
}

func newHost(cache *plugin.Cache) (*plugin.Host, error) {
	return plugin.New(plugin.Options{Registry: prompt.NewRegistry(nil), Cache: cache, Logger: slog.New(slog.DiscardHandler)})
}

var (
	benchCache       *plugin.Cache
	benchDeployCache *deploy.Cache
	benchCacheDir    string
)

// cache is one compilation cache for the whole run, in a temporary
// directory, so that a row measures warm loads of what an earlier row
// compiled, never another run's files.
func cache() (*plugin.Cache, error) {
	if benchCache != nil {
		return benchCache, nil
	}
	dir, err := os.MkdirTemp("", "dsh-bench-cache-")
	if err != nil {
		return nil, err
	}
	benchCacheDir = dir
	benchCache, err = plugin.NewCache(dir)
	return benchCache, err
}

// deployCache is the run's cache (cache) for deployments: the same
// directory, opened through the root.
func deployCache() (*deploy.Cache, error) {
	if benchDeployCache != nil {
		return benchDeployCache, nil
	}
	if _, err := cache(); err != nil {
		return nil, err
	}
	var err error
	benchDeployCache, err = deploy.NewCache(benchCacheDir)
	return benchDeployCache, err
}

// hostCaller loads source on a host of its own and calls tool through
// Host.CallTool in one agent's warm instance.
func hostCaller(name, source, tool string, spec plugin.Spec) (*caller, error) {
	c, err := cache()
	if err != nil {
		return nil, err
	}
	h, err := newHost(c)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	spec.Source = source
	if _, err := h.Load(ctx, spec); err != nil {
		h.Close(ctx)
		return nil, fmt.Errorf("load %s: %w", source, err)
	}
	facts := &prompt.AgentFacts{ID: "bench", Session: "bench", Model: "m"}
	return &caller{name: name, escapes: true, close: func() { h.Close(ctx) }, call: func(args []byte, want string) error {
		r, err := h.CallTool(ctx, facts, tool, args)
		if err != nil {
			return err
		}
		if r.IsError || r.Text != want {
			return fmt.Errorf("%s answered %.60q (error %v)", tool, r.Text, r.IsError)
		}
		return nil
	}}, nil
}

func toolCallRows(c bconfig) ([]*row, error) {
	var callers []*caller
	defer func() {
		for _, k := range callers {
			if k.close != nil {
				k.close()
			}
		}
	}()
	add := func(k *caller, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", k.name, err)
		}
		callers = append(callers, k)
		return nil
	}
	// native: what a Go program does with the same call, no sandbox.
	callers = append(callers, &caller{name: "native Go func", escapes: true, call: func(args []byte, want string) error {
		var a struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			return err
		}
		if a.Text != want {
			return fmt.Errorf("native echo differs")
		}
		return nil
	}})
	cPath, cErr := guestbuild.Build("testdata/guests/bench-c")
	if cErr == nil {
		k, err := hostCaller("dsh C guest", cPath, "echo_c", plugin.Spec{Name: "c"})
		if err := add(withName(k, "dsh C guest"), err); err != nil {
			return nil, err
		}
	} else if os.Getenv("CI") == "true" {
		return nil, fmt.Errorf("build the C guest (CI=true needs clang): %w", cErr)
	} else {
		callers = append(callers, &caller{name: "dsh C guest", na: "n/a: no C toolchain: " + cErr.Error()})
	}
	kit, err := guestbuild.Build("testdata/guests/testkit")
	if err != nil {
		return nil, err
	}
	k, err := hostCaller("dsh Go guest", kit, "echo_args", plugin.Spec{Name: "kit", Config: json.RawMessage(`{"tools":["echo_args"]}`)})
	if err := add(withName(k, "dsh Go guest"), err); err != nil {
		return nil, err
	}
	if err := add(extismCaller()); err != nil {
		return nil, err
	}
	mcpRun, err := guestbuild.Build("testdata/guests/mcp-run")
	if err != nil {
		return nil, err
	}
	k, err = hostCaller("community mcp.run Go guest on dsh", mcpRun, "run_echo", plugin.Spec{Name: "srv"})
	if err := add(withName(k, "community mcp.run Go guest on dsh"), err); err != nil {
		return nil, err
	}
	if cErr == nil {
		if err := add(rawWazero(cPath)); err != nil {
			return nil, err
		}
	}
	if err := add(mcpStdioCaller()); err != nil {
		return nil, err
	}
	if err := add(forkCaller()); err != nil {
		return nil, err
	}

	var rows []*row
	for _, variant := range []struct {
		suffix, s string
	}{{"", text}, {" escaped", escaped}} {
		args := argsOf(variant.s)
		want := variant.s
		for _, k := range callers {
			if variant.suffix != "" && !k.escapes {
				continue
			}
			r := &row{group: "tool call, 1 KiB in and out" + variant.suffix, name: k.name, unit: "time", base: "native Go func", na: k.na}
			if k.name == "native Go func" {
				r.base = ""
			}
			rows = append(rows, r)
			if k.na != "" {
				continue
			}
			w := want
			if k.name == "fork/exec /bin/cat" || k.name == "raw wazero (1 KiB write, call, read)" {
				w = string(args)
			}
			for range 20 { // warm: instances made, code paths hot
				if err := k.call(args, w); err != nil {
					return nil, fmt.Errorf("%s: %w", k.name, err)
				}
			}
			n := c.perCall
			if k.name == "fork/exec /bin/cat" || strings.HasPrefix(k.name, "MCP") {
				n = max(min(n, 200), c.perCall/10) // slow rows: still 200 samples in the full run
			}
			d, cpu, err := sample(n, func() error { return k.call(args, w) })
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k.name, err)
			}
			r.samples, r.cpu = durs(d), float64(cpu)
		}
	}
	return rows, nil
}

func withName(k *caller, name string) *caller {
	if k == nil {
		return &caller{name: name}
	}
	return k
}

// extismCaller is extism go-sdk's Plugin.Call of bench-pdk's echo, whose
// log host function decodes the request as ours does.
func extismCaller() (*caller, error) {
	k := &caller{name: "extism go-sdk Plugin.Call", escapes: true}
	ctx := context.Background()
	path, err := guestbuild.Build("testdata/guests/bench-pdk")
	if err != nil {
		return k, err
	}
	logFn := extism.NewHostFunctionWithStack("log", func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
		req, err := p.ReadBytes(stack[0])
		if err != nil {
			return
		}
		var r struct{ Level, Message string }
		_ = json.Unmarshal(req, &r)
	}, []extism.ValueType{extism.ValueTypePTR}, nil)
	manifest := extism.Manifest{Wasm: []extism.Wasm{extism.WasmFile{Path: path}}, Memory: &extism.ManifestMemory{MaxPages: config.Limits{}.MemoryPages()}}
	compiled, err := extism.NewCompiledPlugin(ctx, manifest, extism.PluginConfig{EnableWasi: true}, []extism.HostFunction{logFn})
	if err != nil {
		return k, err
	}
	plug, err := compiled.Instance(ctx, extism.PluginInstanceConfig{})
	if err != nil {
		compiled.Close(ctx)
		return k, err
	}
	k.close = func() { plug.Close(ctx); compiled.Close(ctx) }
	k.call = func(args []byte, want string) error {
		rc, out, err := plug.Call("echo", args)
		if err != nil || rc != 0 {
			return fmt.Errorf("echo: rc %d: %v", rc, err)
		}
		if string(out) != want {
			return fmt.Errorf("echo answered %.60q", out)
		}
		return nil
	}
	return k, nil
}

// rawWazero instantiates bench-c directly on wazero, its imports stubbed,
// and times what any host must do at least: write 1 KiB into guest memory,
// call an export, read 1 KiB back. No JSON, so no escaped variant.
func rawWazero(path string) (*caller, error) {
	k := &caller{name: "raw wazero (1 KiB write, call, read)"}
	ctx := context.Background()
	src, err := os.ReadFile(path)
	if err != nil {
		return k, err
	}
	rt := wazero.NewRuntime(ctx)
	cm, err := rt.CompileModule(ctx, src)
	if err != nil {
		rt.Close(ctx)
		return k, err
	}
	hb := rt.NewHostModuleBuilder("dsh:host/v1")
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		if mod != "dsh:host/v1" {
			rt.Close(ctx)
			return k, fmt.Errorf("unexpected import %s.%s", mod, name)
		}
		hb.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) {
			clear(stack)
		}), f.ParamTypes(), f.ResultTypes()).Export(name)
	}
	if _, err := hb.Instantiate(ctx); err != nil {
		rt.Close(ctx)
		return k, err
	}
	m, err := rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName("raw"))
	if err != nil {
		rt.Close(ctx)
		return k, err
	}
	k.close = func() { rt.Close(ctx) }
	alloc, fn := m.ExportedFunction("dsh_alloc"), m.ExportedFunction("dsh_abi_version")
	stack := []uint64{1024}
	if err := alloc.CallWithStack(ctx, stack); err != nil {
		return k, err
	}
	ptr := uint32(stack[0])
	dst := make([]byte, 0, 2048)
	k.call = func(args []byte, want string) error {
		if !m.Memory().Write(ptr, args) {
			return fmt.Errorf("write at %#x", ptr)
		}
		if err := fn.CallWithStack(ctx, stack); err != nil {
			return err
		}
		got, ok := m.Memory().Read(ptr, uint32(len(args)))
		if !ok {
			return fmt.Errorf("read at %#x", ptr)
		}
		dst = append(dst[:0], got...)
		if string(dst) != want {
			return fmt.Errorf("raw round trip differs")
		}
		return nil
	}
	return k, nil
}

// forkCaller starts /bin/cat per call, writes the arguments and reads
// them back: the cost of a tool as a process.
func forkCaller() (*caller, error) {
	k := &caller{name: "fork/exec /bin/cat"}
	if _, err := os.Stat("/bin/cat"); err != nil {
		k.na = "n/a: no /bin/cat"
		return k, nil
	}
	k.call = func(args []byte, want string) error {
		cmd := exec.Command("/bin/cat")
		cmd.Stdin = bytes.NewReader(args)
		out, err := cmd.Output()
		if err != nil {
			return err
		}
		if string(out) != want {
			return fmt.Errorf("cat returned %d bytes", len(out))
		}
		return nil
	}
	return k, nil
}

// mcpChildEnv makes this binary a go-sdk MCP server with a native echo.
const childEnv = "DSH_BENCH_CHILD"

type echoArgs struct {
	Text string `json:"text"`
}

func serveMCPEcho() int {
	srv := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echo text."},
		func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
		})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcp echo server:", err)
		return 1
	}
	return 0
}

// mcpStdioCaller calls the echo of a child process serving MCP on stdio
// with the official go-sdk: what a user picks to give an agent a tool.
func mcpStdioCaller() (*caller, error) {
	name := "MCP go-sdk stdio server, native echo"
	self, err := os.Executable()
	if err != nil {
		return &caller{name: name}, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), childEnv+"=mcp-echo")
	cmd.Stderr = io.Discard
	k, err := connectMCP(cmd, "echo")
	if err != nil {
		return &caller{name: name}, err
	}
	k.name, k.escapes = name, true
	return k, nil
}

func gomaxprocs() int { return runtime.GOMAXPROCS(0) }
