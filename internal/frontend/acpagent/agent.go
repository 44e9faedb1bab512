// Package acpagent serves a deployment as an agent of the Agent Client
// Protocol (ACP) on a pair of streams, usually stdio, with
// github.com/coder/acp-go-sdk.
//
// Methods: initialize (advertising loadSession), session/new (the cwd
// comes from the client; MCP servers and additional directories are
// refused), session/load (the history is replayed as updates before the
// answer), session/prompt and session/cancel. A turn's events become
// session/update notifications as they are recorded; its end maps to a
// stop reason as the reference harness maps it (completed → end_turn,
// aborted, rejected, interrupted → cancelled, max-tokens → max_tokens),
// and a turn that ends in error answers the prompt with a JSON-RPC
// error.
//
// Only protocol frames are written to the output stream: logs, and the
// plugins' output, go to the deployment's logger.
package acpagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"

	acp "github.com/coder/acp-go-sdk"

	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// Options configure Serve.
type Options struct {
	// Replay, when set, answers every session's model from this recorded
	// session file instead of the live provider.
	Replay string
	// Name and Version are the agentInfo the agent reports.
	Name, Version string
	// Logger receives the bridge's and the SDK's diagnostics; nil
	// discards them.
	Logger *slog.Logger
}

// Serve runs the agent on in and out until in ends or ctx is done, then
// closes every session it opened.
// AgentName and AgentVersion are the agent info initialize sends unless
// Options say otherwise: the reference harness's, so that a client that
// knows the reference's agent knows this one as the same (this agent
// speaks the reference's ACP updates, card for card).
const (
	AgentName    = "deepseek-harness-acp"
	AgentVersion = "0.0.1"
)

func Serve(ctx context.Context, d *deploy.Deployment, in io.Reader, out io.Writer, opts Options) error {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Name == "" {
		opts.Name = AgentName
	}
	if opts.Version == "" {
		opts.Version = AgentVersion
	}
	a := &agent{d: d, opts: opts, log: opts.Logger, sessions: map[acp.SessionId]*sessionState{}}
	conn := acp.NewAgentSideConnection(a, out, in)
	conn.SetLogger(opts.Logger)
	a.conn = conn
	select {
	case <-conn.Done():
	case <-ctx.Done():
	}
	return a.closeAll(context.WithoutCancel(ctx))
}

type agent struct {
	d    *deploy.Deployment
	opts Options
	log  *slog.Logger
	conn *acp.AgentSideConnection

	mu       sync.Mutex
	terminal bool // the client asked for terminal cards
	sessions map[acp.SessionId]*sessionState
}

type sessionState struct {
	s  *deploy.Session
	tr *translator
	mu sync.Mutex // one prompt's updates at a time
}

var (
	_ acp.Agent       = (*agent)(nil)
	_ acp.AgentLoader = (*agent)(nil)
)

func (a *agent) closeAll(ctx context.Context) error {
	a.mu.Lock()
	all := a.sessions
	a.sessions = map[acp.SessionId]*sessionState{}
	a.mu.Unlock()
	var errs []error
	for _, st := range all {
		errs = append(errs, st.s.Close(ctx))
	}
	return errors.Join(errs...)
}

func (a *agent) Initialize(_ context.Context, req acp.InitializeRequest) (acp.InitializeResponse, error) {
	if v, ok := req.ClientCapabilities.Meta["terminal_output"].(bool); ok {
		a.mu.Lock()
		a.terminal = v
		a.mu.Unlock()
	}
	return acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentInfo:       &acp.Implementation{Name: a.opts.Name, Version: a.opts.Version},
		// Text prompts only, as the reference: no images, audio or
		// embedded resources (false is the protocol's default, so the
		// wire carries an empty promptCapabilities).
		AgentCapabilities: acp.AgentCapabilities{
			LoadSession:        true,
			PromptCapabilities: acp.PromptCapabilities{Image: false, Audio: false, EmbeddedContext: false},
		},
		AuthMethods: []acp.AuthMethod{},
	}, nil
}

func (a *agent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

// checkSetup refuses what this agent cannot honour rather than silently
// ignoring it.
func checkSetup(cwd string, mcp []acp.McpServer, dirs []string) error {
	if len(dirs) > 0 {
		return invalidParams("additionalDirectories is not supported in this MVP")
	}
	if len(mcp) > 0 {
		return invalidParams("mcpServers is not supported: give tools to this agent as plugins in its deployment")
	}
	if cwd == "" || !filepath.IsAbs(cwd) {
		return invalidParams(fmt.Sprintf("cwd %q must be an absolute path", cwd))
	}
	return nil
}

func invalidParams(msg string) *acp.RequestError {
	return &acp.RequestError{Code: -32602, Message: "Invalid params: " + msg}
}

func (a *agent) NewSession(ctx context.Context, req acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	if err := checkSetup(req.Cwd, req.McpServers, req.AdditionalDirectories); err != nil {
		return acp.NewSessionResponse{}, err
	}
	var id acp.SessionId
	st, err := a.open(ctx, deploy.SessionOptions{Cwd: req.Cwd, Replay: a.opts.Replay,
		Permission: func(ctx context.Context, r deploy.PermissionRequest) (bool, error) {
			return a.askPermission(ctx, id, r)
		}})
	if err != nil {
		return acp.NewSessionResponse{}, err
	}
	id = acp.SessionId(st.s.ID())
	return acp.NewSessionResponse{SessionId: acp.SessionId(st.s.ID())}, nil
}

func (a *agent) open(ctx context.Context, o deploy.SessionOptions) (*sessionState, error) {
	s, err := a.d.NewSession(ctx, o)
	if err != nil {
		a.log.Error("acp: open session", "err", err)
		if errors.Is(err, deploy.ErrInvalidOptions) || errors.Is(err, session.ErrNotFound) {
			return nil, invalidParams(err.Error())
		}
		return nil, acp.NewInternalError(map[string]any{"error": err.Error()})
	}
	a.mu.Lock()
	st := &sessionState{s: s, tr: newTranslator(s.Cwd(), a.terminal)}
	a.sessions[acp.SessionId(s.ID())] = st
	a.mu.Unlock()
	return st, nil
}

func (a *agent) LoadSession(ctx context.Context, req acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	if err := checkSetup(req.Cwd, req.McpServers, req.AdditionalDirectories); err != nil {
		return acp.LoadSessionResponse{}, err
	}
	a.mu.Lock()
	_, open := a.sessions[req.SessionId]
	a.mu.Unlock()
	if open {
		return acp.LoadSessionResponse{}, invalidParams(fmt.Sprintf("session %s is already open", req.SessionId))
	}
	st, err := a.open(ctx, deploy.SessionOptions{Resume: string(req.SessionId), Cwd: req.Cwd, Replay: a.opts.Replay,
		Permission: func(ctx context.Context, r deploy.PermissionRequest) (bool, error) {
			return a.askPermission(ctx, req.SessionId, r)
		}})
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	tr := newTranslator(st.s.Cwd(), st.tr.terminal)
	for _, e := range st.s.History() {
		for _, u := range tr.history(e) {
			if err := a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: req.SessionId, Update: u}); err != nil {
				return acp.LoadSessionResponse{}, err
			}
		}
	}
	return acp.LoadSessionResponse{}, nil
}

func (a *agent) session(id acp.SessionId) (*sessionState, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.sessions[id]
	if st == nil {
		return nil, invalidParams(fmt.Sprintf("no session %q", id))
	}
	return st, nil
}

func (a *agent) Prompt(ctx context.Context, req acp.PromptRequest) (acp.PromptResponse, error) {
	st, err := a.session(req.SessionId)
	if err != nil {
		return acp.PromptResponse{}, err
	}
	text := promptText(req.Prompt)
	if text == "" {
		return acp.PromptResponse{}, invalidParams("the prompt has no text")
	}
	st.mu.Lock()
	defer st.mu.Unlock()

	stream := st.s.Follow()
	pumpCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	send := func(e session.Event) {
		for _, u := range st.tr.live(e) {
			if err := a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: req.SessionId, Update: u}); err != nil {
				a.log.Warn("acp: session update not sent", "err", err)
			}
		}
	}
	go func() {
		defer close(done)
		for {
			e, err := stream.Next(pumpCtx)
			if err != nil {
				return
			}
			send(e)
		}
	}()
	// The turn runs on a context of its own: session/cancel, not the
	// request's context, is how a client stops it.
	res, err := st.s.Prompt(context.WithoutCancel(ctx), text)
	stop()
	<-done
	for e, ok := stream.TryNext(); ok; e, ok = stream.TryNext() {
		send(e)
	}
	// A turn that ran but did not complete (a *deploy.TurnError) answers
	// with its stop reason below; any other error means no turn ran.
	var te *deploy.TurnError
	if err != nil && !errors.As(err, &te) {
		return acp.PromptResponse{}, acp.NewInternalError(map[string]any{"error": err.Error()})
	}
	switch res.End.Kind {
	case session.EndCompleted:
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
	case session.EndMaxTokens:
		return acp.PromptResponse{StopReason: acp.StopReasonMaxTokens}, nil
	case session.EndError:
		// The user gets "turn failed: " and the turn's recorded message
		// (the provider's own, for a model API error), as the reference
		// words it; the log keeps the whole chain.
		a.log.Error("acp: turn failed", "session", req.SessionId, "err", res.Err)
		msg := res.End.Message
		if msg == "" && res.Err != nil {
			msg = res.Err.Error() // the loop records one for every failure; this is only a guard
		}
		return acp.PromptResponse{}, &acp.RequestError{Code: -32603, Message: "Internal error: turn failed: " + msg,
			Data: map[string]any{"reason": res.End.Reason}}
	default: // aborted, rejected, interrupted, disposed
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	}
}

// promptText joins the prompt's text blocks and names its resource links.
func promptText(blocks []acp.ContentBlock) string {
	var parts []string
	for _, b := range blocks {
		switch {
		case b.Text != nil:
			parts = append(parts, b.Text.Text)
		case b.ResourceLink != nil:
			parts = append(parts, "@"+b.ResourceLink.Uri)
		}
	}
	return strings.Join(parts, "\n")
}

func (a *agent) Cancel(_ context.Context, n acp.CancelNotification) error {
	st, err := a.session(n.SessionId)
	if err != nil {
		return nil // a notification has no answer; a late cancel is harmless
	}
	st.s.Cancel("session/cancel")
	return nil
}

func (a *agent) CloseSession(ctx context.Context, req acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	a.mu.Lock()
	st := a.sessions[req.SessionId]
	delete(a.sessions, req.SessionId)
	a.mu.Unlock()
	if st == nil {
		return acp.CloseSessionResponse{}, invalidParams(fmt.Sprintf("no session %q", req.SessionId))
	}
	return acp.CloseSessionResponse{}, st.s.Close(ctx)
}

func (a *agent) ListSessions(context.Context, acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, acp.NewMethodNotFound("session/list")
}

func (a *agent) ResumeSession(context.Context, acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, acp.NewMethodNotFound("session/resume")
}

func (a *agent) SetSessionConfigOption(context.Context, acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound("session/set_config_option")
}

func (a *agent) SetSessionMode(context.Context, acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, acp.NewMethodNotFound("session/set_mode")
}

// Permission options of session/request_permission.
const (
	permAllow  acp.PermissionOptionId = "allow"
	permReject acp.PermissionOptionId = "reject"
)

// askPermission maps a hook's "ask" onto session/request_permission: the
// call runs only when the client picks the allow option. A cancelled
// request, a refusal or a failed request refuses it.
func (a *agent) askPermission(ctx context.Context, id acp.SessionId, r deploy.PermissionRequest) (bool, error) {
	title := r.Name
	if r.Reason != "" {
		title = r.Name + ": " + r.Reason
	}
	pending := acp.ToolCallStatusPending
	var raw any
	if json.Valid([]byte(r.Arguments)) {
		raw = json.RawMessage(r.Arguments)
	}
	resp, err := a.conn.RequestPermission(ctx, acp.RequestPermissionRequest{
		SessionId: id,
		ToolCall:  acp.ToolCallUpdate{ToolCallId: acp.ToolCallId(r.CallID), Title: &title, Status: &pending, RawInput: raw},
		Options: []acp.PermissionOption{
			{OptionId: permAllow, Name: "Allow once", Kind: acp.PermissionOptionKindAllowOnce},
			{OptionId: permReject, Name: "Reject", Kind: acp.PermissionOptionKindRejectOnce},
		},
	})
	if err != nil {
		return false, fmt.Errorf("acpagent: session/request_permission: %w", err)
	}
	return resp.Outcome.Selected != nil && resp.Outcome.Selected.OptionId == permAllow, nil
}
