package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpEnv is one deployment served over MCP: a workspace, a directory
// beside it that no grant names, and the deployment file.
type mcpEnv struct {
	config, workspace, outside string
	sentinel                   string // a file in outside
}

// newMCPEnv writes a deployment with the fs and bash tools on the
// workspace and the testkit's echo and spin tools, whose call timeout is
// far longer than any test: a spin that the cancellation did not
// interrupt would hold the kit's instance past the test's deadline.
func newMCPEnv(t *testing.T) *mcpEnv {
	t.Helper()
	root := t.TempDir()
	e := &mcpEnv{workspace: filepath.Join(root, "ws"), outside: filepath.Join(root, "outside"),
		config: filepath.Join(root, "dsh.yml")}
	for _, d := range []string{e.workspace, e.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.sentinel = filepath.Join(e.outside, "keep.txt")
	if err := os.WriteFile(e.sentinel, []byte("untouched\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := "model: test-model\nplugins:\n" +
		"  - source: builtin:tool-fs\n    grants: {fs: [{path: workspace, mode: rw}]}\n" +
		"  - source: builtin:tool-bash\n    grants:\n      fs: [{path: workspace, mode: rw}]\n      exec: {allowed: true, timeout: 30s}\n" +
		"  - name: kit\n    source: " + testkitPath(t) + "\n    config: {tools: [echo, spin]}\n    grants: {limits: {call_timeout: 10m}}\n"
	if err := os.WriteFile(e.config, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

// events collects what the server sends unasked.
type events struct {
	mu          sync.Mutex
	logs        []*mcp.LoggingMessageParams
	toolChanges int
	changed     chan struct{}
}

func (ev *events) options() *mcp.ClientOptions {
	ev.changed = make(chan struct{}, 16)
	return &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			ev.mu.Lock()
			ev.logs = append(ev.logs, r.Params)
			ev.mu.Unlock()
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			ev.mu.Lock()
			ev.toolChanges++
			ev.mu.Unlock()
			ev.changed <- struct{}{}
		},
	}
}

// connectStdio starts `dsh-wasm mcp` as a child process and connects the
// SDK's client to its standard input and output.
func connectStdio(t *testing.T, e *mcpEnv, ev *events) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(binary(t), "mcp", "--config", e.config, "--cwd", e.workspace)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, ev.options())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr: %s", err, stderr.String())
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// startHTTP starts `dsh-wasm mcp --listen 127.0.0.1:0` with env added and
// returns its URL once it listens.
func startHTTP(t *testing.T, e *mcpEnv, env []string, extra ...string) string {
	t.Helper()
	args := append([]string{"mcp", "--config", e.config, "--cwd", e.workspace, "--listen", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	return startHTTPCmd(t, cmd)
}

// startHTTPCmd starts cmd, an MCP server over HTTP, and returns its URL
// once it listens.
func startHTTPCmd(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	urlc := make(chan string, 1)
	var tail bytes.Buffer
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if u, ok := strings.CutPrefix(line, "dsh-wasm: MCP on "); ok {
				urlc <- u
			} else {
				tail.WriteString(line + "\n")
			}
		}
		close(urlc)
	}()
	select {
	case u, ok := <-urlc:
		if !ok {
			t.Fatalf("the server exited before listening: %s", tail.String())
		}
		return u
	case <-time.After(60 * time.Second):
		t.Fatal("the server did not listen within 60s")
	}
	return ""
}

// bearer adds a token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func connectHTTP(t *testing.T, url, token string, ev *events) (*mcp.ClientSession, error) {
	t.Helper()
	hc := &http.Client{Transport: bearer{token, http.DefaultTransport}}
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, ev.options())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func TestMCPStdio(t *testing.T) {
	e := newMCPEnv(t)
	ev := &events{}
	exerciseMCP(t, e, connectStdio(t, e, ev), ev)
}

func TestMCPHTTP(t *testing.T) {
	e := newMCPEnv(t)
	url := startHTTP(t, e, []string{"DSH_WASM_MCP_TOKEN=tok-a,tok-b"})
	ev := &events{}
	cs, err := connectHTTP(t, url, "tok-a", ev)
	if err != nil {
		t.Fatal(err)
	}
	exerciseMCP(t, e, cs, ev)
}

func text(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	var b strings.Builder
	for _, c := range r.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			t.Fatalf("content %T, want text", c)
		}
		b.WriteString(tc.Text)
	}
	return b.String()
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return r
}

// exerciseMCP runs what every transport must do.
func exerciseMCP(t *testing.T, e *mcpEnv, cs *mcp.ClientSession, ev *events) {
	ctx := context.Background()

	// The tools are exactly what `dsh-wasm tools` prints.
	code, out, errOut := runCLI(t, "", "tools", "--config", e.config)
	if code != 0 {
		t.Fatalf("tools: exit %d: %s", code, errOut)
	}
	var want []map[string]any
	if err := json.Unmarshal([]byte(out), &want); err != nil {
		t.Fatal(err)
	}
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lt.Tools) != len(want) {
		t.Fatalf("listed %d tools, dsh-wasm tools prints %d", len(lt.Tools), len(want))
	}
	// MCP lists tools by name; the model's order is not part of MCP.
	for _, tool := range lt.Tools {
		got := map[string]any{"name": tool.Name, "description": tool.Description, "parameters": tool.InputSchema}
		b, _ := json.Marshal(got)
		var norm map[string]any
		json.Unmarshal(b, &norm)
		i := slices.IndexFunc(want, func(w map[string]any) bool { return w["name"] == tool.Name })
		if i < 0 || !reflect.DeepEqual(norm, want[i]) {
			t.Errorf("tool %s:\n got %v\nwant %v", tool.Name, norm, want[max(i, 0)])
		}
	}

	// bash runs in the workspace; its exit-code marker comes back.
	r := call(t, cs, "bash", map[string]any{"command": "pwd; echo made > made.txt; exit 3"})
	if got := text(t, r); !strings.Contains(got, "[exit code: 3]") || !strings.Contains(got, e.workspace) {
		t.Errorf("bash = %q, want the workspace and [exit code: 3]", got)
	}
	if b, err := os.ReadFile(filepath.Join(e.workspace, "made.txt")); err != nil || string(b) != "made\n" {
		t.Errorf("made.txt = %q, %v", b, err)
	}

	// An escaping write is refused as an error result, and nothing
	// outside the workspace changes.
	for _, p := range []string{"../outside/evil.txt", filepath.Join(e.outside, "evil.txt"), e.sentinel} {
		r = call(t, cs, "write", map[string]any{"file_path": p, "content": "pwned"})
		if !r.IsError || !strings.Contains(text(t, r), "outside") {
			t.Errorf("write %s: isError=%v %q, want a refusal", p, r.IsError, text(t, r))
		}
	}
	entries, _ := os.ReadDir(e.outside)
	if b, _ := os.ReadFile(e.sentinel); len(entries) != 1 || string(b) != "untouched\n" {
		t.Errorf("outside the workspace changed: %d entries, sentinel %q", len(entries), b)
	}

	// A tool's own error is isError with its message.
	r = call(t, cs, "read", map[string]any{"file_path": "missing.txt"})
	if !r.IsError || !strings.Contains(text(t, r), "missing.txt") {
		t.Errorf("read missing = %v %q", r.IsError, text(t, r))
	}

	// Plugin logs reach the client at its level.
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	// Protocol 2026-07-28 carries the level on each request instead.
	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"},
		Meta: mcp.Meta{mcp.MetaKeyLogLevel: "debug"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.IsError || text(t, r) != "hello" {
		t.Fatalf("echo = %v %q", r.IsError, text(t, r))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ev.mu.Lock()
		found := slices.ContainsFunc(ev.logs, func(p *mcp.LoggingMessageParams) bool {
			m, _ := p.Data.(map[string]any)
			return p.Logger == "plugin kit" && p.Level == "debug" && m["msg"] == "echo"
		})
		ev.mu.Unlock()
		if found {
			break
		}
		if time.Now().After(deadline) {
			ev.mu.Lock()
			for _, l := range ev.logs {
				t.Logf("log: %s %s %v", l.Level, l.Logger, l.Data)
			}
			ev.mu.Unlock()
			t.Fatal("the kit's debug log never reached the client")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A spinning tool is interrupted by the client's cancellation, and
	// the same plugin answers the next call.
	sctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(sctx, &mcp.CallToolParams{Name: "spin", Arguments: map[string]any{}})
		errc <- err
	}()
	time.Sleep(500 * time.Millisecond)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled spin: %v", err)
	}
	r = call(t, cs, "echo", map[string]any{"text": "after"})
	if r.IsError || text(t, r) != "after" {
		t.Errorf("echo after the cancelled spin = %v %q", r.IsError, text(t, r))
	}

	// The plugins' sections are prompts, rendered for this session.
	lp, err := cs.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(lp.Prompts, func(p *mcp.Prompt) bool { return p.Name == "tool:bash" })
	if i < 0 {
		t.Fatalf("no tool:bash prompt in %d prompts", len(lp.Prompts))
	}
	if slices.ContainsFunc(lp.Prompts, func(p *mcp.Prompt) bool { return strings.HasPrefix(p.Name, "harness:") }) {
		t.Error("the harness's own sections are served as prompts")
	}
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "tool:bash"})
	if err != nil {
		t.Fatal(err)
	}
	if len(gp.Messages) != 1 || !strings.Contains(gp.Messages[0].Content.(*mcp.TextContent).Text, "[exit code: N]") {
		t.Errorf("tool:bash prompt = %+v", gp.Messages)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "tool:bash", Arguments: map[string]string{"model": "x"}}); err == nil ||
		!strings.Contains(err.Error(), `argument "model" is not one of its arguments`) {
		t.Errorf("an undeclared argument: %v", err)
	}
}

// Each MCP session is its own agent: the kit's state is not shared.
func TestMCPSessionsAreSeparateAgents(t *testing.T) {
	e := newMCPEnv(t)
	url := startHTTP(t, e, nil)
	var sessions []*mcp.ClientSession
	evs := []*events{{}, {}}
	for i := range 2 {
		cs, err := connectHTTP(t, url, "", evs[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, cs)
	}
	// A plugin's log during session 0's call goes to session 0 only.
	if _, err := sessions[0].CallTool(context.Background(), &mcp.CallToolParams{Name: "echo",
		Arguments: map[string]any{"text": "x"}, Meta: mcp.Meta{mcp.MetaKeyLogLevel: "debug"}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs[0].mu.Lock()
		n := len(evs[0].logs)
		evs[0].mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("session 0 never got its call's log")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	evs[1].mu.Lock()
	if len(evs[1].logs) != 0 {
		t.Errorf("session 1 got session 0's logs: %+v", evs[1].logs[0])
	}
	evs[1].mu.Unlock()
	// bash's background tasks are per agent: a task started in one
	// session is unknown in the other.
	r := call(t, sessions[0], "bash", map[string]any{"command": "sleep 30", "run_in_background": true})
	got := text(t, r)
	id := got[strings.LastIndex(got, " ")+1:]
	if !strings.HasPrefix(id, "bash-") {
		t.Fatalf("background start = %q", got)
	}
	r = call(t, sessions[1], "bash_output", map[string]any{"task_id": id})
	if !r.IsError {
		t.Errorf("session 2 sees session 1's task %s: %q", id, text(t, r))
	}
	r = call(t, sessions[0], "bash_kill", map[string]any{"task_id": id})
	if r.IsError {
		t.Errorf("session 1 cannot kill its own task: %q", text(t, r))
	}
}

// Over HTTP: no token, a foreign Origin, a foreign Host, and another
// token on a session are all refused; a non-loopback address without a
// token does not start.
func TestMCPHTTPRefusals(t *testing.T) {
	e := newMCPEnv(t)
	url := startHTTP(t, e, []string{"DSH_WASM_MCP_TOKEN=tok-a,tok-b"})
	if _, err := connectHTTP(t, url, "", &events{}); err == nil {
		t.Error("a client without the token connected")
	}
	if _, err := connectHTTP(t, url, "wrong", &events{}); err == nil {
		t.Error("a client with a wrong token connected")
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	post := func(body string, hdr map[string]string, host string) *http.Response {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if resp := post(init, nil, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %s", resp.Status)
	}
	if resp := post(init, map[string]string{"Authorization": "Bearer tok-c"}, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong token: %s", resp.Status)
	}
	if resp := post(init, map[string]string{"Authorization": "Bearer tok-a", "Origin": "http://evil.example"}, ""); resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Origin: %s", resp.Status)
	}
	port := url[strings.LastIndex(url, ":")+1 : len(url)-1]
	if resp := post(init, map[string]string{"Authorization": "Bearer tok-a"}, "evil.example:"+port); resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Host: %s", resp.Status)
	}
	own := strings.TrimSuffix(url, "/")
	resp := post(init, map[string]string{"Authorization": "Bearer tok-a", "Origin": own}, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("own Origin with the token: %s", resp.Status)
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatal("no session id")
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if resp := post(list, map[string]string{"Authorization": "Bearer tok-b", "Mcp-Session-Id": sid}, ""); resp.StatusCode != http.StatusForbidden {
		t.Errorf("another token on the session: %s", resp.Status)
	}

	for in, want := range map[string]string{"8765": "127.0.0.1:8765", ":0": "127.0.0.1:0", "0.0.0.0:1": "0.0.0.0:1", "[::1]:2": "[::1]:2"} {
		if got, err := loopbackByDefault(in); err != nil || got != want {
			t.Errorf("--listen %s binds %s, %v; want %s", in, got, err, want)
		}
	}
	code, _, errOut := runCLI(t, "", "mcp", "--config", e.config, "--listen", "0.0.0.0:0", "--token-env", "DSH_WASM_TEST_NO_SUCH_VAR")
	if code != 2 || !strings.Contains(errOut, "needs a bearer token in $DSH_WASM_TEST_NO_SUCH_VAR") {
		t.Errorf("non-loopback without a token: exit %d, %q", code, errOut)
	}
}

func TestMCPUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"mcp"}, "--config FILE is required"},
		{[]string{"mcp", "--config", "x.yml", "--listen", "a:b:c"}, `--listen "a:b:c": want HOST:PORT or PORT`},
		{[]string{"mcp", "--config", "x.yml", "extra"}, "extra"},
	} {
		code, out, errOut := runCLI(t, "", c.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, out, errOut, c.want)
		}
	}
}
