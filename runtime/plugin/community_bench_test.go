package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
)

// BenchmarkCommunityToolCall compares, in one run, a 1 KiB echo through
// the Extism ABI along two paths on the same go-pdk guest
// (testdata/guests/mcp-run, tool "echo"): our Extism kernel on our host
// ("dsh-kernel": Host.CallTool, i.e. build the MCP call input, run the
// guest's call export, turn its CallToolResult into a tool result) and
// extism go-sdk's Plugin.Call of the same export with the same input
// ("go-sdk"). Compare the p50-ns metrics; the target is ≤ 10 µs
// for dsh-kernel.
//
//	go test ./runtime/plugin -run '^$' -bench CommunityToolCall -benchtime 2s -count 3
func BenchmarkCommunityToolCall(b *testing.B) {
	ctx := context.Background()
	path := communityGuest(b, "mcp-run")
	args, _ := json.Marshal(map[string]string{"text": benchText})
	input, _ := json.Marshal(map[string]any{"params": map[string]any{"name": "echo", "arguments": json.RawMessage(args)}})
	want, _ := json.Marshal(benchText)

	b.Run("dsh-kernel", func(b *testing.B) {
		h := newHost(b)
		if _, err := h.Load(ctx, Spec{Name: "srv", Source: path}); err != nil {
			b.Fatal(err)
		}
		facts := agent("bench", "m")
		call := func() error {
			r, err := h.CallTool(ctx, facts, "echo", args)
			if err != nil {
				return err
			}
			if r.IsError || r.Text != benchText {
				return fmt.Errorf("echo = %.40q (error %v)", r.Text, r.IsError)
			}
			return nil
		}
		if err := call(); err != nil {
			b.Fatal(err)
		}
		loop(b, call)
		reportLatency(b, call)
	})

	b.Run("go-sdk", func(b *testing.B) {
		legacy := extism.NewHostFunctionWithStack("config_get", func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
			stack[0] = 0
		}, []extism.ValueType{extism.ValueTypePTR}, []extism.ValueType{extism.ValueTypePTR})
		manifest := extism.Manifest{
			Wasm:   []extism.Wasm{extism.WasmFile{Path: path}},
			Memory: &extism.ManifestMemory{MaxPages: DefaultMemoryPages},
		}
		compiled, err := extism.NewCompiledPlugin(ctx, manifest, extism.PluginConfig{EnableWasi: true,
			RuntimeConfig: wazero.NewRuntimeConfig().WithCompilationCache(sharedCache(b).c)}, []extism.HostFunction{legacy})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { compiled.Close(context.Background()) })
		plug, err := compiled.Instance(ctx, extism.PluginInstanceConfig{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { plug.Close(context.Background()) })
		call := func() error {
			rc, out, err := plug.Call("call", input)
			if err != nil || rc != 0 {
				return fmt.Errorf("call: rc %d, %v", rc, err)
			}
			if !bytes.Contains(out, want) {
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
