package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/dsh-wasm/dsh-wasm/internal/subagent"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// ACPProviderOptions configure a provider whose children are external
// agents speaking the Agent Client Protocol over stdio.
type ACPProviderOptions struct {
	// Name is the provider's registry name; empty means "acp".
	Name string
	// Command is the agent's argv, e.g. ["dsh-wasm", "acp", "--config",
	// "agent.yml"]. Each child is a process of its own.
	Command []string
	// Env is added to the process's environment (KEY=VALUE).
	Env []string
	// AllowPermissions answers the agent's permission requests with its
	// first "allow" option. False (the default) rejects every request.
	AllowPermissions bool
	// MaxDepth is the provider's depth limit; 0 means the default.
	MaxDepth int
	// Stderr receives the agent's standard error; nil discards it.
	Stderr io.Writer
}

// ErrACPAgent: the external ACP agent failed to start, to answer or to
// finish a turn.
var ErrACPAgent = errors.New("deploy: ACP agent failed")

// newACPProvider returns a provider that runs each child as the external
// ACP agent in opts.Command, acting as its ACP client. The child does not
// inherit the parent's context. Its transcript (the prompt and the final
// answer) is kept in d's store as a session of its own naming the parent.
func (d *Deployment) newACPProvider(opts ACPProviderOptions) (subagent.Provider, error) {
	if len(opts.Command) == 0 || opts.Command[0] == "" {
		return nil, fmt.Errorf("%w: ACP provider: no command", ErrInvalidOptions)
	}
	if opts.Name == "" {
		opts.Name = "acp"
	}
	return &acpProvider{d: d, opts: opts}, nil
}

type acpProvider struct {
	d    *Deployment
	opts ACPProviderOptions
}

func (p *acpProvider) Name() string { return p.opts.Name }
func (p *acpProvider) Capabilities() subagent.Capabilities {
	return subagent.Capabilities{MaxDepth: p.opts.MaxDepth}
}
func (p *acpProvider) InheritsParentContext() bool { return false }

func (p *acpProvider) Start(ctx context.Context, req subagent.Request) (subagent.Run, error) {
	cwd := req.Parent.Cwd
	if cwd == "" {
		cwd = os.TempDir()
	}
	cwd, err := filepath.Abs(cwd)
	if err != nil {
		return nil, fmt.Errorf("%w: cwd: %w", ErrACPAgent, err)
	}
	cmd := exec.Command(p.opts.Command[0], p.opts.Command[1:]...)
	cmd.Dir = cwd
	cmd.Env = append(os.Environ(), p.opts.Env...)
	cmd.Stderr = p.opts.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrACPAgent, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrACPAgent, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: start %s: %w", ErrACPAgent, p.opts.Command[0], err)
	}
	sess, err := p.d.store.Create(session.Header{Cwd: req.Parent.Cwd, ParentSession: req.Parent.Session})
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("deploy: ACP child session: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	r := &acpRun{p: p, cmd: cmd, stdin: stdin, sess: sess, cancel: cancel, done: make(chan struct{})}
	r.client = &acpClient{allow: p.opts.AllowPermissions}
	r.conn = acp.NewClientSideConnection(r.client, stdin, stdout)
	r.conn.SetLogger(p.d.log)
	go r.run(runCtx, cwd, req.Prompt)
	return r, nil
}

type acpRun struct {
	p      *acpProvider
	cmd    *exec.Cmd
	stdin  io.Closer
	conn   *acp.ClientSideConnection
	client *acpClient
	sess   *session.Session
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	sessionID acp.SessionId // the agent's session, once made
	cancelled bool

	res subagent.Result
	err error
}

func (r *acpRun) ID() string { return r.sess.Header().ID }

func (r *acpRun) run(ctx context.Context, cwd, text string) {
	defer close(r.done)
	defer r.cancel()
	r.res.ChildSession = r.ID()
	r.record(text)
	stop, err := r.converse(ctx, cwd, text)
	r.res.Text = r.client.lastMessage()
	r.res.StopReason = stop
	r.err = err
	if r.isCancelled() && stop != subagent.StopCompleted {
		r.res.StopReason, r.err = subagent.StopAborted, nil
	}
	r.finish()
	// Closing stdin asks the agent to exit; one that does not is killed.
	_ = r.stdin.Close()
	exited := make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = r.cmd.Process.Kill()
		<-exited
	}
}

func (r *acpRun) converse(ctx context.Context, cwd, text string) (string, error) {
	if _, err := r.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		return subagent.StopError, fmt.Errorf("%w: initialize: %w", ErrACPAgent, err)
	}
	ns, err := r.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		return subagent.StopError, fmt.Errorf("%w: session/new: %w", ErrACPAgent, err)
	}
	r.mu.Lock()
	r.sessionID = ns.SessionId
	cancelled := r.cancelled
	r.mu.Unlock()
	if cancelled {
		return subagent.StopAborted, nil
	}
	resp, err := r.conn.Prompt(ctx, acp.PromptRequest{SessionId: ns.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
	if err != nil {
		return subagent.StopError, fmt.Errorf("%w: session/prompt: %w", ErrACPAgent, err)
	}
	return stopReason(resp.StopReason), nil
}

// stopReason maps an ACP stop reason to the session's turn-end kinds.
func stopReason(s acp.StopReason) string {
	switch s {
	case acp.StopReasonEndTurn:
		return subagent.StopCompleted
	case acp.StopReasonCancelled:
		return subagent.StopAborted
	case acp.StopReasonMaxTokens, acp.StopReasonMaxTurnRequests:
		return session.EndMaxTokens
	}
	return string(s)
}

func (r *acpRun) isCancelled() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cancelled
}

// Cancel sends session/cancel to the agent; an agent that does not end
// its turn within a grace period is stopped with the run's context.
func (r *acpRun) Cancel(reason string) {
	r.mu.Lock()
	if r.cancelled {
		r.mu.Unlock()
		return
	}
	r.cancelled = true
	id := r.sessionID
	r.mu.Unlock()
	if id != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = r.conn.Cancel(ctx, acp.CancelNotification{SessionId: id})
		cancel()
	}
	go func() {
		select {
		case <-r.done:
		case <-time.After(5 * time.Second):
			r.cancel()
			_ = r.cmd.Process.Kill()
		}
	}()
}

func (r *acpRun) Wait(ctx context.Context) (subagent.Result, error) {
	select {
	case <-r.done:
		return r.res, r.err
	case <-ctx.Done():
		return subagent.Result{}, ctx.Err()
	}
}

// record writes the child's turn start and prompt to its session file;
// finish writes its answer and end. The agent keeps its own detailed
// session; this one is the parent's record of the child.
func (r *acpRun) record(text string) {
	src := session.Source{Kind: session.SourceUser}
	for _, p := range []session.Payload{
		session.TurnStart{Turn: 1, Trigger: &session.Trigger{Kind: session.TriggerMessage, Source: &src}},
		session.UserMessage{Content: session.TextContent(text), Source: src},
		session.StepStart{Turn: 1, Step: 1},
	} {
		if _, err := r.sess.Append(session.NewEvent(p)); err != nil {
			r.p.d.log.Warn("ACP child session", "err", err)
		}
	}
	_ = r.sess.Flush()
}

func (r *acpRun) finish() {
	end := session.EndReason{Kind: r.res.StopReason}
	if r.err != nil {
		end = session.EndReason{Kind: session.EndError, Step: 1, Message: r.err.Error()}
	}
	evs := []session.Payload{}
	if r.res.Text != "" {
		evs = append(evs, session.AssistantMessage{Turn: 1, Step: 1, Content: session.Parts{{Type: model.BlockText, Text: r.res.Text}}})
	}
	evs = append(evs, session.StepEnd{Turn: 1, Step: 1}, session.TurnEnd{Turn: 1, Reason: end})
	for _, p := range evs {
		if _, err := r.sess.Append(session.NewEvent(p)); err != nil {
			r.p.d.log.Warn("ACP child session", "err", err)
		}
	}
	if err := r.sess.Close(); err != nil {
		r.p.d.log.Warn("ACP child session", "err", err)
	}
}

// acpClient is our side of the connection: it collects the agent's last
// message and answers permission requests by policy. It offers no file
// system and no terminal (the initialize request advertises none).
type acpClient struct {
	allow bool

	mu   sync.Mutex
	text strings.Builder // the agent's message since its last tool call
}

func (c *acpClient) lastMessage() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.text.String()
}

func (c *acpClient) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	u := n.Update
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case u.AgentMessageChunk != nil:
		if t := u.AgentMessageChunk.Content.Text; t != nil {
			c.text.WriteString(t.Text)
		}
	case u.ToolCall != nil:
		// What came before a tool call is not the final answer.
		c.text.Reset()
	}
	return nil
}

// RequestPermission picks the first option of the policy's kind: allow
// (once, else always) when allowed, reject (once, else always)
// otherwise; with no such option the request is cancelled, which denies
// it.
func (c *acpClient) RequestPermission(_ context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	want := []acp.PermissionOptionKind{acp.PermissionOptionKindRejectOnce, acp.PermissionOptionKindRejectAlways}
	if c.allow {
		want = []acp.PermissionOptionKind{acp.PermissionOptionKindAllowOnce, acp.PermissionOptionKindAllowAlways}
	}
	for _, k := range want {
		for _, o := range p.Options {
			if o.Kind == k {
				return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{
					Selected: &acp.RequestPermissionOutcomeSelected{OptionId: o.OptionId}}}, nil
			}
		}
	}
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Cancelled: &acp.RequestPermissionOutcomeCancelled{}}}, nil
}

var errNoClientFS = errors.New("this client offers no file system or terminal")

func (c *acpClient) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, errNoClientFS
}
func (c *acpClient) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, errNoClientFS
}
func (c *acpClient) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, errNoClientFS
}
func (c *acpClient) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, errNoClientFS
}
func (c *acpClient) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, errNoClientFS
}
func (c *acpClient) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, errNoClientFS
}
func (c *acpClient) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, errNoClientFS
}
