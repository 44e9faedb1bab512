package deploy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/subagent"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// Names of the built-in subagent providers every deployment registers.
const (
	// ProviderSpawn starts a fresh child that does not see the parent's
	// conversation.
	ProviderSpawn = "spawn"
	// ProviderFork starts a child seeded with the parent's completed
	// turns.
	ProviderFork = "fork"
)

// ErrNoParent: a subagent was asked for by an agent whose session is not
// open in this deployment.
var ErrNoParent = errors.New("deploy: the parent session is not open here")

// The registry of subagent providers is not API: an embedder adds ACP
// agents with Options.ACPProviders. Tests outside this package reach it
// through subagent.Of.
func init() {
	subagent.Of = func(deployment any) *subagent.Registry {
		if d, ok := deployment.(*Deployment); ok {
			return d.subs
		}
		return nil
	}
}

// registerSubagentProviders registers spawn and fork, after the plugins
// loaded, so that a plugin reacting to subagent/provider-added sees them
// arrive (and may refuse them).
func (d *Deployment) registerSubagentProviders(ctx context.Context) error {
	caps := subagent.Capabilities{MaxDepth: d.opts.SubagentDepth}
	for _, p := range []subagent.Provider{
		&localProvider{d: d, name: ProviderSpawn, caps: caps},
		&localProvider{d: d, name: ProviderFork, fork: true, caps: caps},
	} {
		if err := d.subs.Register(ctx, p); err != nil {
			return fmt.Errorf("deploy: %w", err)
		}
	}
	for _, o := range d.opts.ACPProviders {
		if o.MaxDepth == 0 {
			o.MaxDepth = d.opts.SubagentDepth
		}
		if o.Stderr == nil {
			o.Stderr = logWriter{d.log, o.Name}
		}
		p, err := d.newACPProvider(o)
		if err != nil {
			return err
		}
		if err := d.subs.Register(ctx, p); err != nil {
			return fmt.Errorf("deploy: %w", err)
		}
	}
	return nil
}

func (d *Deployment) sessionByID(id string) *Session {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.byID[id]
}

// localProvider runs children in this deployment: a fresh agent (spawn)
// or one seeded with the parent's completed turns (fork). Each child has
// its own session file, with parentSession (and seedLength for a fork),
// and its own plugin instances, as any agent does.
type localProvider struct {
	d    *Deployment
	name string
	fork bool
	caps subagent.Capabilities
}

func (p *localProvider) Name() string                        { return p.name }
func (p *localProvider) Capabilities() subagent.Capabilities { return p.caps }
func (p *localProvider) InheritsParentContext() bool         { return p.fork }

func (p *localProvider) Start(ctx context.Context, req subagent.Request) (subagent.Run, error) {
	parent := p.d.sessionByID(req.Parent.Session)
	if parent == nil {
		return nil, fmt.Errorf("%w: %q", ErrNoParent, req.Parent.Session)
	}
	child, err := p.d.newSession(ctx, SessionOptions{}, &childSpec{
		parent: parent, fork: p.fork, depth: req.Parent.Depth + 1, agent: req.Parent.ID})
	if err != nil {
		return nil, err
	}
	// The child's turn runs on a context of its own: the parent's tool
	// call context carries that call's state (its plugin instance, its
	// session's sinks). Cancel, which the registry calls when the
	// parent's context ends, stops it.
	runCtx, cancel := context.WithCancel(context.Background())
	r := &localRun{child: child, cancel: cancel, done: make(chan struct{})}
	go r.run(runCtx, req.Prompt)
	return r, nil
}

type localRun struct {
	child  *Session
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	res subagent.Result
	err error
}

func (r *localRun) run(ctx context.Context, text string) {
	defer close(r.done)
	defer r.cancel()
	tr, err := r.child.Prompt(ctx, text)
	r.res = subagent.Result{ChildSession: r.child.ID(), StopReason: string(tr.End.Kind), Text: tr.Text}
	// A child turn that ran but did not complete is a result, with its
	// stop reason, not a failed run.
	var te *TurnError
	if err != nil && !errors.As(err, &te) {
		r.err = err
	} else if tr.Err != nil && r.res.StopReason == subagent.StopCompleted {
		r.err = tr.Err
	}
	if cerr := r.child.Close(context.Background()); cerr != nil && r.err == nil {
		r.err = cerr
	}
}

func (r *localRun) ID() string { return r.child.ID() }

func (r *localRun) Cancel(reason string) {
	r.once.Do(func() {
		r.child.Cancel(reason)
		r.cancel()
	})
}

func (r *localRun) Wait(ctx context.Context) (subagent.Result, error) {
	select {
	case <-r.done:
		return r.res, r.err
	case <-ctx.Done():
		return subagent.Result{}, ctx.Err()
	}
}

// subagentHost serves the plugins' subagent_providers and subagent_run.
type subagentHost struct{ d *Deployment }

func (h subagentHost) Providers() []hostfns.SubagentProvider {
	infos := h.d.subs.Providers()
	out := make([]hostfns.SubagentProvider, 0, len(infos))
	for _, i := range infos {
		out = append(out, hostfns.SubagentProvider{Name: i.Name, InheritsParentContext: i.InheritsParentContext,
			OutputSchema: i.Capabilities.OutputSchema, ToolFilter: i.Capabilities.ToolFilter, MaxDepth: i.Capabilities.MaxDepth})
	}
	return out
}

func (h subagentHost) Run(ctx context.Context, parent prompt.AgentFacts, req hostfns.SubagentRunRequest) (hostfns.SubagentRunResponse, error) {
	res, err := h.d.subs.Run(ctx, req.Provider, subagent.Request{Parent: parent, Description: req.Description, Prompt: req.Prompt})
	if err != nil {
		return hostfns.SubagentRunResponse{}, err
	}
	return hostfns.SubagentRunResponse{StopReason: res.StopReason, Text: res.Text, ChildSession: res.ChildSession}, nil
}

// logWriter sends an ACP child's standard error to the logger, a line per
// write.
type logWriter struct {
	log  *slog.Logger
	name string
}

func (w logWriter) Write(b []byte) (int, error) {
	w.log.Info("ACP subagent stderr", "provider", w.name, "text", strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
