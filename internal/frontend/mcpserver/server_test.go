package mcpserver_test

import (
	"context"
	"encoding/json"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-wasm/dsh-wasm/internal/deploytest"
	"github.com/dsh-wasm/dsh-wasm/internal/frontend/mcpserver"
	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
)

func kit(t *testing.T, cfg map[string]any) deploy.PluginSpec {
	t.Helper()
	path, err := guestbuild.Build("testdata/guests/testkit")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(cfg)
	return deploy.PluginSpec{Name: "kit", Source: path, Config: b}
}

// serve opens a deployment of spec (no model: the kit's variable then
// has no value) and connects an in-memory client.
func serve(t *testing.T, spec deploy.PluginSpec, opts *mcp.ClientOptions) (*deploy.Deployment, *mcp.ClientSession, string) {
	t.Helper()
	ctx := context.Background()
	d, err := deploy.New(ctx, deploy.Options{Plugins: []deploy.PluginSpec{spec}, SessionsDir: t.TempDir(), Cache: deploytest.Cache(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(ctx) })
	ws := t.TempDir()
	srv, err := mcpserver.New(ctx, mcpserver.Options{Deployment: d, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(ctx) })
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return d, cs, ws
}

// A plugin whose tools change (here reloaded with another tool list)
// makes the server send notifications/tools/list_changed, and the new
// list is served.
func TestToolListChanged(t *testing.T) {
	changed := make(chan struct{}, 8)
	d, cs, _ := serve(t, kit(t, map[string]any{"tools": []string{"echo"}}), &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	ctx := context.Background()
	names := func() []string {
		lt, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, tool := range lt.Tools {
			n = append(n, tool.Name)
		}
		return n
	}
	if got := names(); !slices.Equal(got, []string{"echo"}) {
		t.Fatalf("tools = %v", got)
	}
	k := kit(t, map[string]any{"tools": []string{"echo", "counter"}})
	if _, err := plugin.HostOf(d).Reload(ctx, plugin.Spec{Name: k.Name, Source: k.Source, Config: k.Config}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/tools/list_changed after the plugin's tools changed")
	}
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(names(), []string{"counter", "echo"}) {
		if time.Now().After(deadline) {
			t.Fatalf("tools after the change = %v", names())
		}
		time.Sleep(20 * time.Millisecond)
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "counter", Arguments: map[string]any{}})
	if err != nil || r.IsError || r.Content[0].(*mcp.TextContent).Text != "1" {
		t.Fatalf("counter = %+v, %v", r, err)
	}
}

// A plugin section is a prompt; a variable the session cannot fill is an
// argument, the session's facts fill the rest, and rendering is strict.
func TestPromptArguments(t *testing.T) {
	_, cs, ws := serve(t, kit(t, map[string]any{"variables": []string{"ticket"},
		"sections": []map[string]any{{"name": "kit:guide", "order": 150, "text": "Ticket {{ticket}} in {{cwd}}."}}}), nil)
	ctx := context.Background()
	lp, err := cs.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(lp.Prompts, func(p *mcp.Prompt) bool { return p.Name == "kit:guide" })
	if i < 0 {
		t.Fatalf("no kit:guide prompt")
	}
	args := lp.Prompts[i].Arguments
	if len(args) != 1 || args[0].Name != "ticket" || !args[0].Required {
		t.Fatalf("arguments = %+v, want only ticket, required", args)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "kit:guide"}); err == nil || !strings.Contains(err.Error(), "ticket") {
		t.Errorf("without the argument: %v, want a strict render error naming ticket", err)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "kit:guide", Arguments: map[string]string{"ticket": "T-1", "cwd": "/etc"}}); err == nil ||
		!strings.Contains(err.Error(), `argument "cwd" is not one of its arguments (ticket)`) {
		t.Errorf("overriding cwd: %v", err)
	}
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "kit:guide", Arguments: map[string]string{"ticket": "T-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := gp.Messages[0].Content.(*mcp.TextContent).Text; got != "Ticket T-1 in "+ws+"." {
		t.Errorf("rendered = %q", got)
	}
}

// The plugin's call timeout applies per call, and every failure is an
// error result with its message, never a protocol error or a dead server.
func TestCallFailuresAreErrorResults(t *testing.T) {
	spec := kit(t, map[string]any{"tools": []string{"spin", "trap", "fail", "counter"}})
	spec.Grants = &config.Grants{Limits: config.Limits{CallTimeout: 300 * time.Millisecond}}
	_, cs, _ := serve(t, spec, nil)
	ctx := context.Background()
	for name, want := range map[string]string{"spin": "budget", "trap": "trap", "fail": "the tool failed on purpose", "nope": "nope"} {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		if name == "nope" {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("unknown tool: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		msg := r.Content[0].(*mcp.TextContent).Text
		if !r.IsError || !strings.Contains(msg, want) {
			t.Errorf("%s = isError %v %q, want an error result with %q", name, r.IsError, msg, want)
		}
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "counter", Arguments: map[string]any{}})
	if err != nil || r.IsError {
		t.Fatalf("counter after the failures = %+v, %v", r, err)
	}
}
