package acpagent_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/dsh-wasm/dsh-wasm/internal/deploytest"
	"github.com/dsh-wasm/dsh-wasm/internal/frontend/acpagent"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

// client records the updates an agent sends.
type client struct {
	mu      sync.Mutex
	updates []acp.SessionUpdate
}

func (c *client) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	c.mu.Lock()
	c.updates = append(c.updates, n.Update)
	c.mu.Unlock()
	return nil
}

func (c *client) take() []acp.SessionUpdate {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.updates
	c.updates = nil
	return u
}

var errNo = errors.New("not offered")

func (*client) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, errNo
}
func (*client) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, errNo
}
func (*client) RequestPermission(context.Context, acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	return acp.RequestPermissionResponse{}, errNo
}
func (*client) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, errNo
}
func (*client) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, errNo
}
func (*client) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, errNo
}
func (*client) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, errNo
}
func (*client) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, errNo
}

// connect serves d on a pipe and returns a client connected to it; the
// agent stops when the test ends.
func connect(t *testing.T, d *deploy.Deployment) (*acp.ClientSideConnection, *client) {
	t.Helper()
	toAgent, fromClient := io.Pipe()
	toClient, fromAgent := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- acpagent.Serve(context.Background(), d, toAgent, fromAgent, acpagent.Options{}) }()
	c := &client{}
	conn := acp.NewClientSideConnection(c, fromClient, toClient)
	conn.SetLogger(slog.New(slog.DiscardHandler))
	t.Cleanup(func() {
		fromClient.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Serve did not return after the client left")
		}
		fromAgent.Close()
	})
	return conn, c
}

func native(name string, result tool.Result) deploy.Tool {
	return deploy.Tool{Tool: prompt.Tool{Name: name, Description: name}, Run: func(context.Context, deploy.ToolCall) (tool.Result, error) {
		return result, nil
	}}
}

func rpcCode(err error) int {
	var re *acp.RequestError
	if errors.As(err, &re) {
		return re.Code
	}
	return 0
}

func kinds(us []acp.SessionUpdate) []string {
	var out []string
	for _, u := range us {
		switch {
		case u.AgentThoughtChunk != nil:
			out = append(out, "thought:"+u.AgentThoughtChunk.Content.Text.Text)
		case u.AgentMessageChunk != nil:
			out = append(out, "message:"+u.AgentMessageChunk.Content.Text.Text)
		case u.UserMessageChunk != nil:
			out = append(out, "user:"+u.UserMessageChunk.Content.Text.Text)
		case u.ToolCall != nil:
			out = append(out, "call:"+string(u.ToolCall.Kind)+":"+u.ToolCall.Title)
		case u.ToolCallUpdate != nil:
			out = append(out, "update:"+string(*u.ToolCallUpdate.Status))
		}
	}
	return out
}

// One connection: setup refusals, a prompt whose events become updates
// (reasoning, text, tool cards with their kinds and a failed status for
// an error result) and end_turn, then a turn whose model fails, which
// answers with a JSON-RPC error. A second connection loads the session
// and gets its history as updates.
func TestBridge(t *testing.T) {
	provider, err := scripted.Provider([]scripted.Answer{
		{Reasoning: "Look first.", Text: "Checking.", Calls: []scripted.Call{
			{ID: "c1", Name: "bash", Arguments: `{"command":"make test","description":"Run the tests"}`},
			{ID: "c2", Name: "read", Arguments: `{"file_path":"/w/x.txt"}`},
		}},
		{Text: "All done."},
	})
	if err != nil {
		t.Fatal(err)
	}
	d, err := deploy.New(context.Background(), deploy.Options{
		Model: "m", Provider: provider, SessionsDir: t.TempDir(), Cache: deploytest.Cache(t),
		Tools: []deploy.Tool{
			native("bash", tool.Result{Text: "FAIL\n[exit code: 2]"}),
			native("read", tool.Result{Text: "no such file", IsError: true}),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	ctx := context.Background()
	conn, c := connect(t, d)

	init, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	if err != nil || !init.AgentCapabilities.LoadSession || init.AgentInfo == nil ||
		init.AgentInfo.Name != acpagent.AgentName || init.AgentInfo.Version != acpagent.AgentVersion {
		t.Fatalf("initialize = %+v, %v", init, err)
	}
	cwd := t.TempDir()
	for name, req := range map[string]acp.NewSessionRequest{
		"mcp servers": {Cwd: cwd, McpServers: []acp.McpServer{{Stdio: &acp.McpServerStdio{Name: "x", Command: "/bin/x", Args: []string{}, Env: []acp.EnvVariable{}}}}},
		"extra dirs":  {Cwd: cwd, McpServers: []acp.McpServer{}, AdditionalDirectories: []string{"/etc"}},
		"relative":    {Cwd: "work", McpServers: []acp.McpServer{}},
	} {
		if _, err := conn.NewSession(ctx, req); rpcCode(err) != -32602 {
			t.Errorf("session/new with %s = %v, want invalid params", name, err)
		}
	}
	ns, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: ns.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("go")}})
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt = %+v, %v", res, err)
	}
	got := strings.Join(kinds(c.take()), " | ")
	want := "thought:Look | thought: first. | message:Checking. | call:execute:make test | update:completed | call:read:Read /w/x.txt | update:failed | message:All | message: done."
	if got != want {
		t.Errorf("updates:\n got %s\nwant %s", got, want)
	}
	// Turn 2 has no recorded answer: the model call fails, and so does the
	// prompt, with a JSON-RPC error.
	if _, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: ns.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("more")}}); rpcCode(err) != -32603 {
		t.Errorf("failing turn = %v, want an internal error", err)
	}
	c.take()
	if _, err := conn.CloseSession(ctx, acp.CloseSessionRequest{SessionId: ns.SessionId}); err != nil {
		t.Fatal(err)
	}

	conn2, c2 := connect(t, d)
	if _, err := conn2.LoadSession(ctx, acp.LoadSessionRequest{SessionId: ns.SessionId, Cwd: cwd, McpServers: []acp.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	got = strings.Join(kinds(c2.take()), " | ")
	want = "user:go | thought:Look first. | message:Checking. | call:execute:make test | update:completed | call:read:Read /w/x.txt | update:failed | message:All done. | user:more"
	if got != want {
		t.Errorf("loaded history:\n got %s\nwant %s", got, want)
	}
	if _, err := conn2.LoadSession(ctx, acp.LoadSessionRequest{SessionId: "no-such-session", Cwd: cwd, McpServers: []acp.McpServer{}}); rpcCode(err) != -32602 {
		t.Errorf("loading an unknown session = %v", err)
	}
}
