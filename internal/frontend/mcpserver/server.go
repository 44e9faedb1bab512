// Package mcpserver serves a deployment's tools and prompt sections over
// the Model Context Protocol, on the official go-sdk
// (github.com/modelcontextprotocol/go-sdk). Each MCP session is its own
// agent identity on the deployment (deploy.Agent): its own plugin
// instances and state, under the plugins' grants, with `workspace`
// grants resolved to one workspace root.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
)

// ErrInvalidOptions: New was given options it cannot run with.
var ErrInvalidOptions = errors.New("mcpserver: invalid options")

// Options configure a Server.
type Options struct {
	// Deployment supplies the tools and sections; the Server does not
	// close it.
	Deployment *deploy.Deployment
	// Workspace is the root `workspace` fs grants resolve to for every
	// session, and the {{cwd}} variable. Empty mounts no workspace.
	Workspace string
	// Name and Version are the server's implementation info.
	Name, Version string
	// Logger receives the server's own diagnostics; nil discards them.
	Logger *slog.Logger
}

// Server is an MCP server over one deployment.
type Server struct {
	d    *deploy.Deployment
	opts Options
	log  *slog.Logger
	srv  *mcp.Server
	stop func()

	mu      sync.Mutex
	agents  map[*mcp.ServerSession]*agent
	ended   map[*mcp.ServerSession]bool
	tools   []string // names served now
	prompts []string
	closed  bool
	syncMu  sync.Mutex // one refresh at a time
	probe   *deploy.Agent
}

// New builds the server: the deployment's tools and plugin sections are
// served at once, and kept in step with the registry afterwards.
func New(ctx context.Context, opts Options) (*Server, error) {
	if opts.Deployment == nil {
		return nil, fmt.Errorf("%w: no deployment", ErrInvalidOptions)
	}
	if opts.Name == "" {
		opts.Name = "dsh-wasm"
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	s := &Server{d: opts.Deployment, opts: opts, log: opts.Logger,
		agents: map[*mcp.ServerSession]*agent{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	probe, err := s.d.NewAgent(deploy.AgentOptions{Cwd: opts.Workspace, Prefix: "mcp-list"})
	if err != nil {
		return nil, fmt.Errorf("mcpserver: workspace: %w", err)
	}
	s.probe = probe
	s.srv = mcp.NewServer(&mcp.Implementation{Name: opts.Name, Version: opts.Version}, &mcp.ServerOptions{
		Logger: s.log,
		Capabilities: &mcp.ServerCapabilities{
			Tools:   &mcp.ToolCapabilities{ListChanged: true},
			Prompts: &mcp.PromptCapabilities{ListChanged: true},
			Logging: &mcp.LoggingCapabilities{},
		},
		InitializedHandler: func(_ context.Context, req *mcp.InitializedRequest) { s.agentFor(req.Session) },
	})
	if err := s.refresh(ctx, deploy.Changes{Tools: true, Sections: true}); err != nil {
		probe.Close(ctx)
		return nil, err
	}
	s.stop = s.d.Watch(func(c deploy.Changes) {
		if err := s.refresh(context.Background(), c); err != nil {
			s.log.Warn("mcp: refresh after a registry change", "err", err)
		}
	})
	return s, nil
}

// MCP returns the go-sdk server, to run on a transport.
func (s *Server) MCP() *mcp.Server { return s.srv }

// Close stops following the registry and releases every session's
// plugin instances.
func (s *Server) Close(ctx context.Context) {
	s.stop()
	s.mu.Lock()
	s.closed = true
	agents := s.agents
	s.agents = map[*mcp.ServerSession]*agent{}
	s.mu.Unlock()
	for _, a := range agents {
		a.Close(ctx)
	}
	s.probe.Close(ctx)
}

// agentFor returns the session's agent, made at its first use; its
// instances are released when the session ends (a request racing the end
// makes an agent that is released at once, since Wait has returned).
func (s *Server) agentFor(ss *mcp.ServerSession) (*agent, error) {
	if ss == nil {
		return nil, errors.New("mcpserver: a request without a session")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, deploy.ErrClosed
	}
	if a := s.agents[ss]; a != nil {
		return a, nil
	}
	da, err := s.d.NewAgent(deploy.AgentOptions{Cwd: s.opts.Workspace, Prefix: "mcp"})
	if err != nil {
		return nil, err
	}
	a := &agent{Agent: da}
	s.agents[ss] = a
	go func() {
		_ = ss.Wait()
		s.mu.Lock()
		if s.agents[ss] == a {
			delete(s.agents, ss)
		}
		s.mu.Unlock()
		a.Close(context.Background())
	}()
	return a, nil
}

// agent is a session's agent and the calls the client cancelled that are
// still stopping.
type agent struct {
	*deploy.Agent
	mu        sync.Mutex
	cancelled []chan struct{}
}

// stopping records a cancelled call until done is closed.
func (a *agent) stopping(done chan struct{}) {
	a.mu.Lock()
	a.cancelled = append(a.cancelled, done)
	a.mu.Unlock()
}

// drained waits until every cancelled call has stopped, or ctx ends.
func (a *agent) drained(ctx context.Context) error {
	a.mu.Lock()
	waits := slices.Clone(a.cancelled)
	a.mu.Unlock()
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	a.mu.Lock()
	a.cancelled = slices.DeleteFunc(a.cancelled, func(c chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	})
	a.mu.Unlock()
	return nil
}

// refresh brings the served tools and prompts in line with the registry.
func (s *Server) refresh(ctx context.Context, c deploy.Changes) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	var errs []error
	if c.Tools {
		errs = append(errs, s.syncTools(ctx))
	}
	if c.Sections {
		errs = append(errs, s.syncPrompts(ctx))
	}
	return errors.Join(errs...)
}

func (s *Server) syncTools(ctx context.Context) error {
	specs, err := s.d.Tools(ctx, deploy.PromptOptions{Cwd: s.opts.Workspace})
	if err != nil {
		return fmt.Errorf("mcpserver: list tools: %w", err)
	}
	var names []string
	var errs []error
	for _, t := range specs {
		if err := s.addTool(t); err != nil {
			errs = append(errs, err)
			continue
		}
		names = append(names, t.Name)
	}
	var gone []string
	for _, n := range s.tools {
		if !slices.Contains(names, n) {
			gone = append(gone, n)
		}
	}
	if len(gone) > 0 {
		s.srv.RemoveTools(gone...)
	}
	s.tools = names
	return errors.Join(errs...)
}

// addTool serves one tool under exactly the name, description and input
// schema the model is told.
func (s *Server) addTool(t prompt.Tool) (err error) {
	var schema map[string]any
	if err := json.Unmarshal(t.Parameters, &schema); err != nil || schema["type"] != "object" {
		return fmt.Errorf("mcpserver: tool %s: parameters are not a JSON Schema object, which MCP requires; not served", t.Name)
	}
	defer func() {
		if p := recover(); p != nil { // the SDK panics on a tool it refuses
			err = fmt.Errorf("mcpserver: tool %s: %v", t.Name, p)
		}
	}()
	name := t.Name
	s.srv.AddTool(&mcp.Tool{Name: name, Description: t.Description, InputSchema: t.Parameters},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return s.callTool(ctx, req, name)
		})
	return nil
}

func (s *Server) callTool(ctx context.Context, req *mcp.CallToolRequest, name string) (*mcp.CallToolResult, error) {
	a, err := s.agentFor(req.Session)
	if err != nil {
		return nil, err
	}
	args := []byte(req.Params.Arguments)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	// A call the client cancelled may still be stopping its guest when
	// the next call comes; that one waits, so it does not meet the
	// discarded instance.
	if err := a.drained(ctx); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	stop := context.AfterFunc(ctx, func() { a.stopping(done) })
	ctx = withSession(ctx, req.Session)
	res, err := a.CallTool(ctx, name, args)
	close(done)
	stop()
	if err != nil {
		if ctx.Err() != nil {
			// Cancelled by the client: the SDK sends no answer for it.
			return nil, fmt.Errorf("tool %s cancelled: %w", name, ctx.Err())
		}
		return errorResult(fmt.Sprintf("tool %s failed: %v", name, err)), nil
	}
	if res.IsError {
		return errorResult(res.Text), nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Text}}}, nil
}

func errorResult(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// syncPrompts serves every plugin's sections as prompts named like the
// sections (tool:bash, …). A prompt's arguments are the variables its
// text references that a session cannot fill itself.
func (s *Server) syncPrompts(ctx context.Context) error {
	asm, err := s.probe.Assemble(ctx)
	if err != nil {
		return fmt.Errorf("mcpserver: list prompts: %w", err)
	}
	var names []string
	for _, sec := range asm.Sections {
		owner := s.d.Owner("section", sec.Name)
		if !strings.HasPrefix(owner, "plugin ") {
			continue // the harness's and the deployment's own text
		}
		var args []*mcp.PromptArgument
		refs, _ := prompt.References(sec.Name, sec.Text)
		for _, v := range refs {
			if val, ok := asm.Variables[v]; ok && val.OK {
				continue
			}
			args = append(args, &mcp.PromptArgument{Name: v, Required: true,
				Description: fmt.Sprintf("the {{%s}} variable, which has no value outside a model session", v)})
		}
		name := sec.Name
		s.srv.AddPrompt(&mcp.Prompt{Name: name, Arguments: args,
			Description: fmt.Sprintf("Guidance the %s contributes to the system prompt (section %s, order %d).", owner, name, sec.Order)},
			func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return s.getPrompt(ctx, req, name, args)
			})
		names = append(names, name)
	}
	var gone []string
	for _, n := range s.prompts {
		if !slices.Contains(names, n) {
			gone = append(gone, n)
		}
	}
	if len(gone) > 0 {
		s.srv.RemovePrompts(gone...)
	}
	s.prompts = names
	return nil
}

// getPrompt renders one section strictly with the session's facts and
// the arguments given for the variables listed as arguments: any other
// argument, or a reference left without a value, is an error.
func (s *Server) getPrompt(ctx context.Context, req *mcp.GetPromptRequest, name string, declared []*mcp.PromptArgument) (*mcp.GetPromptResult, error) {
	a, err := s.agentFor(req.Session)
	if err != nil {
		return nil, err
	}
	for k := range req.Params.Arguments {
		if !slices.ContainsFunc(declared, func(p *mcp.PromptArgument) bool { return p.Name == k }) {
			return nil, fmt.Errorf("prompt %s: argument %q is not one of its arguments (%s)", name, k, argNames(declared))
		}
	}
	asm, err := a.Assemble(withSession(ctx, req.Session))
	if err != nil {
		return nil, fmt.Errorf("prompt %s: %w", name, err)
	}
	i := slices.IndexFunc(asm.Sections, func(x prompt.AssembledSection) bool { return x.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("prompt %s: the section is no longer registered", name)
	}
	for k, v := range req.Params.Arguments {
		if cur, ok := asm.Variables[k]; ok && cur.OK {
			continue // the session's own value wins
		}
		asm.SetVariable(k, v)
	}
	text, err := prompt.RenderText(name, asm.Sections[i].Text, asm.Variables)
	if err != nil {
		return nil, fmt.Errorf("prompt %s: %w", name, err)
	}
	return &mcp.GetPromptResult{
		Description: fmt.Sprintf("Section %s, order %d.", name, asm.Sections[i].Order),
		Messages:    []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}},
	}, nil
}

func argNames(args []*mcp.PromptArgument) string {
	if len(args) == 0 {
		return "none"
	}
	names := make([]string, len(args))
	for i, a := range args {
		names[i] = a.Name
	}
	return strings.Join(names, ", ")
}

// Serve serves one session over r and w (a client's pipe, standard
// input and output) until the client disconnects or ctx ends.
func (s *Server) Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	return s.srv.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(r), Writer: nopCloser{w}})
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
