package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// plainMCPEnv makes the test binary a plain go-sdk MCP server with a
// native Go echo tool on stdio: the benchmark's baseline.
const plainMCPEnv = "DSH_WASM_TEST_PLAIN_MCP"

type echoArgs struct {
	Text string `json:"text"`
}

func servePlainMCP() int {
	srv := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echo text."},
		func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
		})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

func benchConnect(b *testing.B, cmd *exec.Cmd) *mcp.ClientSession {
	b.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

// BenchmarkMCPEcho: one tools/call of a 1 KiB echo through `dsh-wasm mcp`
// (the testkit's Wasm echo) and through a plain go-sdk server with a
// native Go echo, both child processes on stdio, alternating in one run.
// It reports each side's median and their ratio.
//
//	go test ./cmd/dsh-wasm -run '^$' -bench MCPEcho -benchtime 2000x
func BenchmarkMCPEcho(b *testing.B) {
	dir := b.TempDir()
	cfgFile := filepath.Join(dir, "dsh.yml")
	src := "model: m\nplugins:\n  - {name: kit, source: " + testkitPath(b) + ", config: {tools: [echo]}}\n"
	if err := os.WriteFile(cfgFile, []byte(src), 0o600); err != nil {
		b.Fatal(err)
	}
	dsh := benchConnect(b, exec.Command(binary(b), "mcp", "--config", cfgFile, "--cwd", dir))
	plainCmd := exec.Command(os.Args[0])
	plainCmd.Env = append(os.Environ(), plainMCPEnv+"=1")
	plain := benchConnect(b, plainCmd)

	payload := strings.Repeat("0123456789abcdef", 64) // 1 KiB
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": payload}}
	ctx := context.Background()
	once := func(cs *mcp.ClientSession) time.Duration {
		start := time.Now()
		r, err := cs.CallTool(ctx, params)
		d := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if r.IsError || len(r.Content) != 1 || r.Content[0].(*mcp.TextContent).Text != payload {
			b.Fatalf("echo answered %+v", r)
		}
		return d
	}
	for range 20 { // warm both: instances made, code paths hot
		once(dsh)
		once(plain)
	}
	var ds, ps []time.Duration
	b.ResetTimer()
	for range b.N {
		ds = append(ds, once(dsh))
		ps = append(ps, once(plain))
	}
	b.StopTimer()
	md, mp := median(ds), median(ps)
	b.ReportMetric(float64(md.Microseconds()), "dsh-µs-p50")
	b.ReportMetric(float64(mp.Microseconds()), "plain-µs-p50")
	b.ReportMetric(float64(md)/float64(mp), "ratio")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
