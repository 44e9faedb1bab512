package main

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
)

// newCommunityEnv: a deployment of the community-ABI test guests, a
// hyper-mcp v1 plugin (Go PDK) and a v2 one, each under a memory limit.
func newCommunityEnv(t *testing.T) *mcpEnv {
	t.Helper()
	e := newMCPEnv(t) // for its workspace and directories
	var src strings.Builder
	src.WriteString("model: test-model\nplugins:\n")
	for _, g := range []string{"mcp-v1", "mcp-v2"} {
		p, err := guestbuild.Build("testdata/guests/" + g)
		if err != nil {
			t.Fatal(err)
		}
		src.WriteString("  - {name: " + strings.ReplaceAll(g, "-", "") + ", source: " + p + ", grants: {limits: {memory: 32MiB, call_timeout: 20s}}}\n")
	}
	if err := os.WriteFile(e.config, []byte(src.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

func TestMCPCommunityStdio(t *testing.T) {
	e := newCommunityEnv(t)
	ev := &events{}
	exerciseCommunity(t, e, connectStdio(t, e, ev), ev)
}

func TestMCPCommunityHTTP(t *testing.T) {
	e := newCommunityEnv(t)
	url := startHTTP(t, e, []string{"DSH_WASM_MCP_TOKEN=tok"})
	ev := &events{}
	cs, err := connectHTTP(t, url, "tok", ev)
	if err != nil {
		t.Fatal(err)
	}
	exerciseCommunity(t, e, cs, ev)
}

// exerciseCommunity: hyper-mcp plugins' tools are served and called
// unmodified; a plugin's notify_tool_list_changed is refused and changes
// no list; the memory limit holds.
func exerciseCommunity(t *testing.T, e *mcpEnv, cs *mcp.ClientSession, ev *events) {
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
	got := names()
	for _, want := range []string{"echo", "enable_extra", "grow", "v2_echo"} {
		if !slices.Contains(got, want) {
			t.Fatalf("tools %v lack %s", got, want)
		}
	}
	if slices.Contains(got, "extra") {
		t.Fatal("extra listed before the plugin enabled it")
	}
	if r := call(t, cs, "echo", map[string]any{"text": "from v1"}); r.IsError || text(t, r) != "from v1" {
		t.Errorf("v1 echo = %v %q", r.IsError, text(t, r))
	}
	if r := call(t, cs, "v2_echo", map[string]any{"text": "from v2"}); r.IsError || !strings.Contains(text(t, r), "from v2") {
		t.Errorf("v2 echo = %v %q", r.IsError, text(t, r))
	}

	// A community plugin's tool list is fixed at load: a call that says
	// it changed fails, and no client's list changes (one client's call
	// must not change what another sees).
	if r := call(t, cs, "enable_extra", map[string]any{}); !r.IsError || !strings.Contains(text(t, r), "notify_tool_list_changed") {
		t.Fatalf("enable_extra = %v %q, want an error result naming notify_tool_list_changed", r.IsError, text(t, r))
	}
	if after := names(); !slices.Equal(after, got) {
		t.Fatalf("tools changed after enable_extra:\n before %v\n after  %v", got, after)
	}
	select {
	case <-ev.changed:
		t.Fatal("notifications/tools/list_changed after a refused notify_tool_list_changed")
	default:
	}

	// grow allocates without end: the 32 MiB limit ends the call as an
	// error result, and the plugin answers the next call.
	if r := call(t, cs, "grow", map[string]any{}); !r.IsError {
		t.Errorf("grow under a memory limit = %q, want an error result", text(t, r))
	}
	if r := call(t, cs, "echo", map[string]any{"text": "still here"}); r.IsError || text(t, r) != "still here" {
		t.Errorf("echo after grow = %v %q", r.IsError, text(t, r))
	}
}
