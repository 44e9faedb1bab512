package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpServeRows times one tools/call of a 1 KiB echo through `dsh-wasm
// mcp` (testkit's Wasm echo_args, in the MCP session's own agent) and
// through a plain go-sdk stdio server with a native Go echo, both child
// processes, the calls alternating.
func mcpServeRows(c bconfig) ([]*row, error) {
	group := "dsh-wasm mcp tools/call over stdio, 1 KiB echo"
	bin, err := dshBinary()
	if err != nil {
		return nil, err
	}
	kit, err := guestbuild.Build("testdata/guests/testkit")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "dsh-bench-mcp-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	src, _ := json.Marshal(kit)
	cfgFile := filepath.Join(dir, "dsh.yml")
	if err := os.WriteFile(cfgFile, []byte("model: m\nplugins:\n  - {name: kit, source: "+string(src)+", config: {tools: [echo_args]}}\n"), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "mcp", "--config", cfgFile, "--cwd", dir)
	cmd.Env = append(os.Environ(), "DSH_WASM_CACHE_DIR="+filepath.Join(dir, "cache"))
	cmd.Stderr = io.Discard
	dsh, err := connectMCP(cmd, "echo_args")
	if err != nil {
		return nil, fmt.Errorf("dsh-wasm mcp: %w", err)
	}
	defer dsh.close()
	plain, err := mcpStdioCaller()
	if err != nil {
		return nil, err
	}
	defer plain.close()
	args := argsOf(text)
	for range 20 {
		if err := dsh.call(args, text); err != nil {
			return nil, err
		}
		if err := plain.call(args, text); err != nil {
			return nil, err
		}
	}
	base := &row{group: group, name: "plain go-sdk server, native Go echo", unit: "time"}
	ours := &row{group: group, name: "dsh-wasm mcp, testkit's Wasm echo", unit: "time", base: base.name}
	n := max(min(c.perCall, 200), c.perCall/10)
	for range n {
		t0 := time.Now()
		if err := plain.call(args, text); err != nil {
			return nil, err
		}
		base.samples = append(base.samples, float64(time.Since(t0)))
		t0 = time.Now()
		if err := dsh.call(args, text); err != nil {
			return nil, err
		}
		ours.samples = append(ours.samples, float64(time.Since(t0)))
	}
	return []*row{base, ours}, nil
}

// connectMCP starts cmd as an MCP server on stdio and calls tool with the
// echo's arguments.
func connectMCP(cmd *exec.Cmd, tool string) (*caller, error) {
	k := &caller{name: tool}
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, err
	}
	k.close = func() { cs.Close() }
	k.call = func(args []byte, want string) error {
		var a map[string]any
		if err := json.Unmarshal(args, &a); err != nil {
			return err
		}
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: a})
		if err != nil {
			return err
		}
		if r.IsError || len(r.Content) != 1 {
			return fmt.Errorf("%s answered %+v", tool, r)
		}
		if t, ok := r.Content[0].(*mcp.TextContent); !ok || t.Text != want {
			return fmt.Errorf("%s answered other text", tool)
		}
		return nil
	}
	return k, nil
}
