package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"testing"

	kernel "github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/abi/extism"
	extism "github.com/extism/go-sdk"
)

// BenchmarkCommunityToolCall compares, in one run, a 1 KiB echo through
// the Extism ABI on our host and on extism go-sdk, with the same module
// and the same input on both sides:
//
//   - "go-pdk": testdata/guests/mcp-run's run_echo tool, a Go guest on go-pdk
//     v1.1.3 (it decodes the arguments with package jsonobj and answers a
//     CallToolResult holding the text);
//   - "rust-pdk-shape": testdata/wat/rust-pdk-hyper-mcp.wat, which moves
//     the input in and the output out 8 bytes per kernel call as the Rust
//     PDK does, and does no JSON work of its own, so it shows the ABI's
//     own cost.
//
// "dsh" is Host.CallTool: build the call input, run the guest's call
// export through our kernel, turn the CallToolResult into a tool result.
// "go-sdk" is Plugin.Call of the same export with the same input; its
// result is only checked, not converted. The target is a p50-ns
// of at most 10 µs for dsh/go-pdk.
//
//	go test ./internal/plugin -run '^$' -bench CommunityToolCall -benchtime 2s -count 3
func BenchmarkCommunityToolCall(b *testing.B) {
	ctx := context.Background()
	args, _ := json.Marshal(map[string]string{"text": benchText})
	input, _ := json.Marshal(map[string]any{"params": map[string]any{"name": "run_echo", "arguments": json.RawMessage(args)}})
	watInput, _ := json.Marshal(map[string]any{"params": map[string]any{"name": "wat_echo", "arguments": json.RawMessage(args)}})
	quoted, _ := json.Marshal(benchText)
	guests := []struct {
		name, path, tool, want string
		input, wantRaw         []byte
	}{
		{"go-pdk", communityGuest(b, "mcp-run"), "run_echo", benchText, input, quoted},
		{"rust-pdk-shape", watPlugin(b), "wat_echo", "wat ok", watInput, []byte(benchText)},
	}
	for _, g := range guests {
		b.Run("dsh/"+g.name, func(b *testing.B) {
			h := newHost(b)
			if _, err := h.Load(ctx, Spec{Name: "srv", Source: g.path, ABI: ABIHyperMCPv1}); err != nil {
				b.Fatal(err)
			}
			facts := agent("bench", "m")
			call := func() error {
				r, err := h.CallTool(ctx, facts, g.tool, args)
				if err != nil {
					return err
				}
				if r.IsError || r.Text != g.want {
					return fmt.Errorf("%s = %.40q (error %v)", g.tool, r.Text, r.IsError)
				}
				return nil
			}
			if err := call(); err != nil {
				b.Fatal(err)
			}
			loop(b, call)
			reportLatency(b, call)
		})
		b.Run("go-sdk/"+g.name, func(b *testing.B) {
			plug := goSDKCommunity(b, g.path)
			call := func() error {
				rc, out, err := plug.Call("call", g.input)
				if err != nil || rc != 0 {
					return fmt.Errorf("call: rc %d, %v", rc, err)
				}
				if !bytes.Contains(out, g.wantRaw) {
					return fmt.Errorf("call = %.60q", out)
				}
				return nil
			}
			if err := call(); err != nil {
				b.Fatal(err)
			}
			loop(b, call)
			reportLatency(b, call)
		})
	}
}

// goSDKCommunity is a warm go-sdk instance of a community module, with
// no-op stand-ins for every extism:host/user function our kernel serves
// (go-sdk refuses to instantiate a module with an unresolved import).
func goSDKCommunity(b *testing.B, path string) *extism.Plugin {
	b.Helper()
	ctx := context.Background()
	var fns []extism.HostFunction
	for _, g := range kernel.GoFuncs {
		if !containsString(kernel.UserFuncs, g.Name) {
			continue
		}
		params := make([]extism.ValueType, len(g.Params))
		copy(params, g.Params)
		results := make([]extism.ValueType, len(g.Results))
		copy(results, g.Results)
		fns = append(fns, extism.NewHostFunctionWithStack(g.Name, func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
			clear(stack)
		}, params, results))
	}
	manifest := extism.Manifest{
		Wasm:   []extism.Wasm{extism.WasmFile{Path: path}},
		Memory: &extism.ManifestMemory{MaxPages: config.Limits{}.MemoryPages()},
	}
	compiled, err := extism.NewCompiledPlugin(ctx, manifest, extism.PluginConfig{EnableWasi: true,
		RuntimeConfig: sharedCache(b).m.RuntimeConfig(false)}, fns)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { compiled.Close(context.Background()) })
	plug, err := compiled.Instance(ctx, extism.PluginInstanceConfig{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { plug.Close(context.Background()) })
	return plug
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
