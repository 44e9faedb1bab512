// Package subagent is the registry of subagent providers: the native Go
// components that start child agents (spawn, fork, an external ACP agent).
//
// Registering a provider emits subagent/provider-added through the bus's
// plain (propagating) emit: a listener that fails, a plugin that cannot
// take the provider say, fails the registration, and the provider is
// removed again. Unregistering emits subagent/provider-removed through
// the contained emit: every listener runs and the removal always
// completes. Each run emits subagent/start and subagent/end, contained
// too, so an observer can never stop a child or its accounting.
package subagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"

	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// Errors, wrapped with detail; test with errors.Is or errors.As.
var (
	// ErrUnknownProvider: no provider of that name is registered.
	ErrUnknownProvider = errors.New("subagent: unknown provider")
	// ErrUnsupported: the request needs a capability the provider lacks
	// (see CapabilityError for which).
	ErrUnsupported = errors.New("subagent: unsupported capability")
	// ErrDepth: starting the child would go past the depth limit.
	ErrDepth = errors.New("subagent: depth limit reached")
	// ErrDuplicate: a provider of that name is already registered.
	ErrDuplicate = errors.New("subagent: provider already registered")
	// ErrInvalid: a provider or request is malformed.
	ErrInvalid = errors.New("subagent: invalid")
)

// CapabilityError names the capability a request needed and the provider
// lacks. It wraps ErrUnsupported.
type CapabilityError struct {
	Provider   string
	Capability string // "output_schema", "tool_filter" or "depth"
	Detail     string
}

func (e *CapabilityError) Error() string {
	return fmt.Sprintf("subagent: provider %q does not support %s: %s", e.Provider, e.Capability, e.Detail)
}

func (e *CapabilityError) Unwrap() error { return ErrUnsupported }

// Capabilities are what a provider can do; Registry.Start checks a
// request against them before the provider sees it.
type Capabilities struct {
	// OutputSchema: the provider can make the child answer in a given
	// JSON Schema.
	OutputSchema bool `json:"outputSchema"`
	// ToolFilter: the provider can restrict the child's tools.
	ToolFilter bool `json:"toolFilter"`
	// MaxDepth is the deepest a child of this provider may be: a parent
	// at depth d starts a child at d+1, refused when d+1 > MaxDepth. Zero
	// means DefaultMaxDepth.
	MaxDepth int `json:"maxDepth"`
}

// DefaultMaxDepth is the depth limit of a provider that sets none.
const DefaultMaxDepth = 3

func (c Capabilities) maxDepth() int {
	if c.MaxDepth <= 0 {
		return DefaultMaxDepth
	}
	return c.MaxDepth
}

// Provider starts child agents.
type Provider interface {
	// Name is the provider's registry name, e.g. "spawn".
	Name() string
	// Capabilities are checked by Registry.Start before Start is called.
	Capabilities() Capabilities
	// InheritsParentContext says whether the child sees the parent's
	// completed turns. It is a descriptive fact (tools word themselves
	// from it); nothing validates against it.
	InheritsParentContext() bool
	// Start starts a child for req. The run ends when ctx is cancelled,
	// when Cancel is called, or when the child's turn ends.
	Start(ctx context.Context, req Request) (Run, error)
}

// Request is what a child is asked to do.
type Request struct {
	// Parent is the calling agent; its Depth is checked against the
	// provider's limit and its Session names the parent session.
	Parent prompt.AgentFacts
	// Description is a short label of the task (for titles and logs).
	Description string
	// Prompt is the child's first user message.
	Prompt string
	// OutputSchema, when set, is the JSON Schema the answer must match;
	// it needs Capabilities.OutputSchema.
	OutputSchema json.RawMessage
	// Tools, when set, restricts the child to these tools; it needs
	// Capabilities.ToolFilter.
	Tools []string
}

// Stop reasons of a child, as the session's turn/end records them.
const (
	StopCompleted = "completed"
	StopAborted   = "aborted"
	StopError     = "error"
)

// Result is how a child ended.
type Result struct {
	// ChildSession is the id of the child's session, when it has one.
	ChildSession string `json:"childSession,omitempty"`
	// StopReason is the child's turn-end reason: StopCompleted when it
	// finished, otherwise why not.
	StopReason string `json:"stopReason"`
	// Text is the child's last assistant message text.
	Text string `json:"text"`
}

// Run is one child in progress.
type Run interface {
	// ID identifies the run (the child's session id when it has one).
	ID() string
	// Wait blocks until the child ends, or ctx is done (which does not
	// stop the child).
	Wait(ctx context.Context) (Result, error)
	// Cancel asks the child to stop; Wait then returns its aborted end.
	Cancel(reason string)
}

// Info is what the registry tells about a provider.
type Info struct {
	Name                  string       `json:"name"`
	InheritsParentContext bool         `json:"inheritsParentContext"`
	Capabilities          Capabilities `json:"capabilities"`
}

// ProviderEvent is the payload of subagent/provider-added and
// subagent/provider-removed.
type ProviderEvent struct {
	Provider Info `json:"provider"`
}

// StartEvent is the payload of subagent/start.
type StartEvent struct {
	Provider      string `json:"provider"`
	ID            string `json:"id"`
	ParentSession string `json:"parentSession,omitempty"`
	Description   string `json:"description,omitempty"`
}

// EndEvent is the payload of subagent/end.
type EndEvent struct {
	Provider   string `json:"provider"`
	ID         string `json:"id"`
	StopReason string `json:"stopReason"`
	// LastMessage is the child's last assistant message text.
	LastMessage string `json:"lastMessage"`
	Error       string `json:"error,omitempty"`
}

// Registry holds the providers of one deployment. It is safe for
// concurrent use.
type Registry struct {
	bus *events.Bus

	mu        sync.Mutex
	providers map[string]Provider
	order     []string
}

// NewRegistry returns an empty registry emitting on bus.
func NewRegistry(bus *events.Bus) *Registry {
	return &Registry{bus: bus, providers: map[string]Provider{}}
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

func info(p Provider) Info {
	return Info{Name: p.Name(), InheritsParentContext: p.InheritsParentContext(), Capabilities: p.Capabilities()}
}

// Register adds p and emits subagent/provider-added. A listener's failure
// removes p again and is returned.
func (r *Registry) Register(ctx context.Context, p Provider) error {
	if p == nil {
		return fmt.Errorf("%w: nil provider", ErrInvalid)
	}
	name := p.Name()
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w: provider name %q (want [a-z][a-z0-9_-]{0,63})", ErrInvalid, name)
	}
	r.mu.Lock()
	if _, dup := r.providers[name]; dup {
		r.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrDuplicate, name)
	}
	r.providers[name] = p
	r.order = append(r.order, name)
	r.mu.Unlock()
	if err := r.bus.Emit(ctx, events.EventProviderAdded, ProviderEvent{Provider: info(p)}); err != nil {
		r.remove(name, p)
		// The listeners that took the provider learn that it is gone.
		_ = r.bus.EmitContained(context.WithoutCancel(ctx), events.EventProviderRemoved, ProviderEvent{Provider: info(p)})
		return fmt.Errorf("subagent: register %q: rolled back: %w", name, err)
	}
	return nil
}

func (r *Registry) remove(name string, p Provider) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.providers[name] != p {
		return false
	}
	delete(r.providers, name)
	r.order = slices.DeleteFunc(r.order, func(n string) bool { return n == name })
	return true
}

// Unregister removes the provider named name and emits
// subagent/provider-removed to every listener; listeners' failures are
// joined in the error, and the provider is gone regardless.
func (r *Registry) Unregister(ctx context.Context, name string) error {
	r.mu.Lock()
	p, ok := r.providers[name]
	r.mu.Unlock()
	if !ok || !r.remove(name, p) {
		return fmt.Errorf("%w: %q", ErrUnknownProvider, name)
	}
	if err := r.bus.EmitContained(ctx, events.EventProviderRemoved, ProviderEvent{Provider: info(p)}); err != nil {
		return fmt.Errorf("subagent: unregister %q: listeners failed (the provider is removed): %w", name, err)
	}
	return nil
}

// Providers lists the registered providers in registration order.
func (r *Registry) Providers() []Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Info, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, info(r.providers[n]))
	}
	return out
}

// Lookup returns the provider named name.
func (r *Registry) Lookup(name string) (Provider, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.providers[name]
	return p, ok
}

// Check validates req against the capabilities of the provider named
// name, without starting anything.
func (r *Registry) Check(name string, req Request) (Provider, error) {
	p, ok := r.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownProvider, name)
	}
	c := p.Capabilities()
	if len(req.OutputSchema) > 0 && !c.OutputSchema {
		return nil, &CapabilityError{Provider: name, Capability: "output_schema", Detail: "the child cannot be held to an output schema"}
	}
	if req.Tools != nil && !c.ToolFilter {
		return nil, &CapabilityError{Provider: name, Capability: "tool_filter", Detail: "the child's tools cannot be restricted"}
	}
	if d := req.Parent.Depth + 1; d > c.maxDepth() {
		return nil, fmt.Errorf("%w: provider %q: a child at depth %d exceeds the limit %d", ErrDepth, name, d, c.maxDepth())
	}
	if req.Prompt == "" {
		return nil, fmt.Errorf("%w: empty prompt", ErrInvalid)
	}
	return p, nil
}

// Start checks req, starts a child on the named provider and emits
// subagent/start; subagent/end follows when the run ends.
func (r *Registry) Start(ctx context.Context, name string, req Request) (Run, error) {
	p, err := r.Check(name, req)
	if err != nil {
		return nil, err
	}
	run, err := p.Start(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("subagent: start on %q: %w", name, err)
	}
	_ = r.bus.EmitContained(context.WithoutCancel(ctx), events.EventSubagentStart, StartEvent{
		Provider: name, ID: run.ID(), ParentSession: req.Parent.Session, Description: req.Description})
	return &observed{Run: run, r: r, provider: name, ctx: context.WithoutCancel(ctx)}, nil
}

// Run starts a child and waits for it. Cancelling ctx cancels the child.
func (r *Registry) Run(ctx context.Context, name string, req Request) (Result, error) {
	run, err := r.Start(ctx, name, req)
	if err != nil {
		return Result{}, err
	}
	stop := context.AfterFunc(ctx, func() { run.Cancel("parent cancelled") })
	defer stop()
	return run.Wait(context.WithoutCancel(ctx))
}

// observed emits subagent/end once, when the run's end is first seen.
type observed struct {
	Run
	r        *Registry
	provider string
	ctx      context.Context
	once     sync.Once
}

func (o *observed) Wait(ctx context.Context) (Result, error) {
	res, err := o.Run.Wait(ctx)
	if err != nil && ctx.Err() != nil {
		return res, err // the wait ended, not the run
	}
	o.once.Do(func() {
		ev := EndEvent{Provider: o.provider, ID: o.ID(), StopReason: res.StopReason, LastMessage: res.Text}
		if err != nil {
			ev.Error = err.Error()
			if ev.StopReason == "" {
				ev.StopReason = StopError
			}
		}
		_ = o.r.bus.EmitContained(o.ctx, events.EventSubagentEnd, ev)
	})
	return res, err
}

// Of returns the registry of providers of a deployment (a
// *deploy.Deployment), or nil for anything else. runtime/deploy sets it;
// it is the seam through which tests outside that package register and
// run providers, since the registry is not part of the root's API.
var Of func(deployment any) *Registry
