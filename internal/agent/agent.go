package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

// ToolRunner runs the tools the model calls. The loop knows nothing of
// how: the Wasm plugin host (*plugin.Host) implements it, and so does a
// deployment's runner that serves native Go tools beside the plugins';
// subagent and MCP-client tools come in the same way. Each implementation
// asserts it in its own package.
type ToolRunner interface {
	// CallTool runs the tool called name with args (a JSON object) for
	// the agent described by facts. A tool's own failure is a result
	// with IsError; an error means the call could not be made or the
	// tool's runner failed (a plugin's trap or compute budget,
	// cancellation).
	CallTool(ctx context.Context, facts *prompt.AgentFacts, name string, args []byte) (tool.Result, error)
	// EndAgent releases what the runner holds for the agent.
	EndAgent(ctx context.Context, agentID string)
}

// StepResult is what a completed step produced, for the continuation
// decision.
type StepResult struct {
	Turn, Step int
	// Message is the assistant message of the step.
	Message model.Message
	// ToolCalls are the tool-call parts of Message, in order; each has
	// been answered with a recorded tool result.
	ToolCalls []model.Part
	// Finish is why the model stopped.
	Finish model.FinishReason
}

// ContinueFunc decides, after a step that completed, whether the turn
// runs another step.
type ContinueFunc func(StepResult) bool

// ContinueWhileToolCalls is the default continuation: run another step
// while the model calls tools, so that it sees their results.
func ContinueWhileToolCalls(s StepResult) bool { return len(s.ToolCalls) > 0 }

// Options configure an agent. Session, Provider, Registry and Tools are
// required.
type Options struct {
	// ID identifies the agent to plugins and in events; empty uses the
	// session's id.
	ID string
	// Model is sent with every request and is the {{model}} variable
	// (the deployment's "model" key). Empty leaves it to an agent/request
	// listener that supplies it (a plugin doing so states it on the
	// system-prompt/assemble waterfall too, for {{model}}); when none
	// does, the turn fails with ErrNoModel.
	Model string
	// Depth is 0 for a top-level agent and one more for each subagent
	// level; Parent is the parent agent's id.
	Depth  int
	Parent string
	// MaxSteps caps the steps of one turn; 0, the default, means no cap,
	// as in the reference harness. A turn that reaches the cap ends
	// "max-tokens" (the reference's kind for a cut-short turn), with
	// ErrStepCap in its result.
	MaxSteps int
	// Continue decides whether a turn goes on after a step; nil means
	// ContinueWhileToolCalls.
	Continue ContinueFunc

	// Session records the agent's events. Its header's cwd is the
	// agent's working directory. The caller owns it: the agent flushes
	// it (with fsync) once the user's message is recorded, once an
	// assistant message is recorded (before its tools run), at each
	// step end and at each turn end, but never closes it.
	Session *session.Session
	// Provider answers the model requests.
	Provider model.Provider
	// Registry is where the prompt is assembled from and the tools the
	// model is told about come from. Register the built-in variables in
	// it once (RegisterBuiltinVariables).
	Registry *prompt.Registry
	// Bus carries the loop's events; nil makes a private one.
	Bus *events.Bus
	// Tools runs tool calls.
	Tools ToolRunner
	// Logger receives the loop's diagnostics; nil uses slog.Default().
	Logger *slog.Logger
	// State, when set, persists plugins' host-side state in the session
	// and restores it on resume; give the same store to the plugin host
	// (plugin.Options.State).
	State *PluginState
	// OnEvent, when set, is called with each event the loop records
	// once the session's store holds it (session.Session.OnStored), in
	// order: nobody outside the process sees an event a crash could take
	// back. It runs on the goroutine that flushed (the turn's, or the
	// chunk flusher's), must not block, and may call Cancel.
	OnEvent func(session.Event)
	// ChunkFlush is how long a streamed assistant/chunk may wait for the
	// flush that makes it durable, and so visible to OnEvent: while the
	// model streams, the session is flushed at most this long after the
	// first chunk not yet stored. 0 is DefaultChunkFlush; a negative
	// value leaves chunks to the assistant message's flush.
	ChunkFlush time.Duration
	// Permission asks the user whether a tool call a tools/pre-execute
	// listener wants confirmed ("ask") may run. Nil refuses every such
	// call: with nobody to ask, the call does not run.
	Permission PermissionFunc
	// MaxContinuations bounds the extra steps agent/turn-stopping
	// listeners may ask for in one turn; 0 is DefaultMaxContinuations.
	MaxContinuations int
	// Bounds of each step's prompt assembly (see bounds.go); zero
	// values take the defaults.
	Bounds AssemblyBounds
	// Output bounds what each model call may send back (see
	// OutputBounds); zero values take the defaults.
	Output OutputBounds
}

// Agent drives one conversation: it runs turns on its session, one at a
// time. Its methods are safe for concurrent use.
type Agent struct {
	sess     *session.Session
	provider model.Provider
	registry *prompt.Registry
	bus      *events.Bus
	tools    ToolRunner
	log      *slog.Logger
	onEvent  func(session.Event)
	chunks   time.Duration // ChunkFlush, defaulted
	state    *PluginState
	facts    prompt.AgentFacts
	parentID string // the session's parent session, for request metadata
	maxSteps int
	cont     ContinueFunc
	bounds   AssemblyBounds
	output   OutputBounds

	permission       PermissionFunc
	maxContinuations int

	turnMu   sync.Mutex // held by the running turn
	lastTurn int        // the last turn number in the session; guarded by turnMu

	mu     sync.Mutex
	queue  []session.UserMessage
	cancel context.CancelCauseFunc // of the running turn, nil between turns
	// starting: a Prompt holds the turn but has not started it yet; a
	// Cancel then is kept in pendingCancel and applied when it starts.
	starting      bool
	pendingCancel *cancelCause
	closed        bool
}

// New returns an agent on opts.Session and emits agent/open, whose
// failing listener fails New (ErrListener), then agent/start. Turns
// continue the session's numbering, so an agent on a resumed session picks
// up after its last turn.
func New(ctx context.Context, opts Options) (*Agent, error) {
	var missing []string
	if opts.Session == nil {
		missing = append(missing, "Session")
	}
	if opts.Provider == nil {
		missing = append(missing, "Provider")
	}
	if opts.Registry == nil {
		missing = append(missing, "Registry")
	}
	if opts.Tools == nil {
		missing = append(missing, "Tools")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("agent: new: %w: missing %v", ErrInvalidOptions, missing)
	}
	if opts.Bounds.Timeout < 0 || opts.Bounds.PromptBytes < 0 {
		return nil, fmt.Errorf("agent: new: %w: Bounds %+v may not be negative", ErrInvalidOptions, opts.Bounds)
	}
	if opts.Output.negative() {
		return nil, fmt.Errorf("agent: new: %w: Output %+v may not be negative", ErrInvalidOptions, opts.Output)
	}
	if opts.MaxContinuations < 0 {
		return nil, fmt.Errorf("agent: new: %w: MaxContinuations %d may not be negative", ErrInvalidOptions, opts.MaxContinuations)
	}
	if opts.MaxSteps < 0 || opts.Depth < 0 {
		return nil, fmt.Errorf("agent: new: %w: MaxSteps %d and Depth %d may not be negative", ErrInvalidOptions, opts.MaxSteps, opts.Depth)
	}
	h := opts.Session.Header()
	a := &Agent{
		sess:     opts.Session,
		provider: opts.Provider,
		registry: opts.Registry,
		bus:      opts.Bus,
		tools:    opts.Tools,
		log:      opts.Logger,
		onEvent:  opts.OnEvent,
		chunks:   opts.ChunkFlush,
		parentID: h.ParentSession,
		maxSteps: opts.MaxSteps,
		cont:     opts.Continue,
		bounds:   opts.Bounds.withDefaults(),
		output:   opts.Output.WithDefaults(),

		permission:       opts.Permission,
		maxContinuations: opts.MaxContinuations,
		facts: prompt.AgentFacts{
			ID:      opts.ID,
			Session: h.ID,
			Model:   opts.Model,
			Cwd:     h.Cwd,
			Depth:   opts.Depth,
			Parent:  opts.Parent,
		},
	}
	if a.facts.ID == "" {
		a.facts.ID = h.ID
	}
	if a.maxContinuations == 0 {
		a.maxContinuations = DefaultMaxContinuations
	}
	if a.bus == nil {
		a.bus = events.New(a.log)
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.cont == nil {
		a.cont = ContinueWhileToolCalls
	}
	if a.chunks == 0 {
		a.chunks = DefaultChunkFlush
	}
	last, err := lastTurn(opts.Session.Events())
	if err != nil {
		return nil, fmt.Errorf("agent: new: session %s: %w", h.ID, err)
	}
	a.lastTurn = last
	if opts.State != nil {
		if err := opts.State.attach(opts.Session); err != nil {
			return nil, fmt.Errorf("agent: new: restore plugin state: %w", err)
		}
		a.state = opts.State
	}
	if a.onEvent != nil {
		onEvent := a.onEvent
		opts.Session.OnStored(func(evs []session.Event) {
			for _, e := range evs {
				onEvent(e)
			}
		})
	}
	// agent/open: a listener that cannot set the agent up refuses it.
	// What its instances hold for this agent is let go.
	octx := prompt.WithAgent(ctx, &a.facts)
	if err := a.bus.Emit(octx, events.EventAgentOpen, &AgentEvent{Agent: a.facts}); err != nil {
		a.tools.EndAgent(context.WithoutCancel(ctx), a.facts.ID)
		if a.onEvent != nil {
			opts.Session.OnStored(nil) // the refused agent reads nothing more
		}
		return nil, fmt.Errorf("agent: new: %w: %w", ErrListener, err)
	}
	a.emitContained(ctx, events.EventAgentStart, &AgentEvent{Agent: a.facts})
	return a, nil
}

// lastTurn returns the highest turn number the events start.
func lastTurn(evs []session.Event) (int, error) {
	last := 0
	for _, e := range evs {
		if e.Type != session.TypeTurnStart {
			continue
		}
		ts, err := session.As[session.TurnStart](e)
		if err != nil {
			return 0, err
		}
		last = max(last, ts.Turn)
	}
	return last, nil
}

// Facts returns the agent's facts, as plugins and prompt providers see
// them.
func (a *Agent) Facts() prompt.AgentFacts { return a.facts }

// Enqueue queues a user message for the next turn. A message without a
// source is the user's.
func (a *Agent) Enqueue(m session.UserMessage) error {
	if len(m.Content) == 0 {
		return fmt.Errorf("agent %s: enqueue: %w: the message has no content", a.facts.ID, ErrNoMessage)
	}
	if m.Source.Kind == "" {
		m.Source.Kind = session.SourceUser
	}
	m.Content = slices.Clone(m.Content)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return fmt.Errorf("agent %s: enqueue: %w", a.facts.ID, ErrClosed)
	}
	a.queue = append(a.queue, m)
	return nil
}

// Prompt queues text as a user message and runs a turn. If a turn is
// already running it fails with ErrTurnRunning and queues nothing.
func (a *Agent) Prompt(ctx context.Context, text string) (TurnResult, error) {
	if !a.turnMu.TryLock() {
		return TurnResult{}, fmt.Errorf("agent %s: %w", a.facts.ID, ErrTurnRunning)
	}
	defer a.turnMu.Unlock()
	a.mu.Lock()
	a.starting = true
	a.mu.Unlock()
	if err := a.Enqueue(session.UserMessage{Content: session.TextContent(text)}); err != nil {
		a.mu.Lock()
		a.starting, a.pendingCancel = false, nil
		a.mu.Unlock()
		return TurnResult{}, err
	}
	return a.runTurnLocked(ctx)
}

// Cancel aborts the running turn, if any: its model stream and any tool
// running stop, and the turn ends "aborted" with reason (e.g.
// "session/cancel"). It returns true only if the turn will end "aborted":
// once a turn's end is decided, Cancel returns false.
func (a *Agent) Cancel(reason string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.cancel != nil:
		// Under mu, so that the turn cannot seal its end in between:
		// see turnRun.seal.
		a.cancel(&cancelCause{reason: reason})
		return true
	case a.starting:
		a.pendingCancel = &cancelCause{reason: reason}
		return true
	}
	return false
}

// cancelCause is the cause of a turn context cancelled by Cancel.
type cancelCause struct{ reason string }

func (c *cancelCause) Error() string {
	if c.reason == "" {
		return ErrCancelled.Error()
	}
	return ErrCancelled.Error() + ": " + c.reason
}

func (c *cancelCause) Unwrap() error { return ErrCancelled }

// Close cancels a running turn and waits for it to end, emits agent/end
// and releases the agent's plugin instances. Queued messages are dropped.
// The session stays open. Closing a closed agent does nothing.
func (a *Agent) Close(ctx context.Context) {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.closed = true
	a.queue = nil
	cancel := a.cancel
	a.mu.Unlock()
	if cancel != nil {
		cancel(errDisposed)
	}
	a.turnMu.Lock() // wait for the running turn to end
	a.turnMu.Unlock()
	a.emitContained(ctx, events.EventAgentEnd, &AgentEvent{Agent: a.facts})
	a.tools.EndAgent(context.WithoutCancel(ctx), a.facts.ID)
	if a.state != nil {
		a.state.detach(a.sess)
	}
}

// TurnResult says how a turn ended.
type TurnResult struct {
	// Turn is the turn's number in the session.
	Turn int
	// Steps is the number of steps the turn ran.
	Steps int
	// End is the reason recorded in turn/end.
	End session.EndReason
	// Text is the text of the turn's last assistant message.
	Text string
	// Err is the failure behind an "error", "aborted", "disposed" or
	// step-cap "max-tokens" end: it wraps ErrPrompt, ErrModel,
	// ErrListener, ErrNoModel, ErrCancelled, ErrClosed or ErrStepCap (or
	// the caller's context error) with the cause.
	Err error
}

// RunTurn runs one turn: it takes every queued user message, records
// turn/start and the messages, runs steps until the continuation decision
// says stop, records turn/end and flushes the session.
//
// A turn that fails (the prompt, the model, a listener) or is cancelled
// still ends normally, recorded, with its reason in the result; the agent
// then accepts the next message. RunTurn returns an error only when no
// turn could run (ErrNoMessage, ErrTurnRunning, ErrClosed) or the session
// could not record it.
func (a *Agent) RunTurn(ctx context.Context) (TurnResult, error) {
	if !a.turnMu.TryLock() {
		return TurnResult{}, fmt.Errorf("agent %s: %w", a.facts.ID, ErrTurnRunning)
	}
	defer a.turnMu.Unlock()
	return a.runTurnLocked(ctx)
}

// runTurnLocked is RunTurn with turnMu held.
func (a *Agent) runTurnLocked(ctx context.Context) (TurnResult, error) {
	a.mu.Lock()
	pending := a.pendingCancel
	a.starting, a.pendingCancel = false, nil
	if a.closed {
		a.mu.Unlock()
		return TurnResult{}, fmt.Errorf("agent %s: run turn: %w", a.facts.ID, ErrClosed)
	}
	msgs := a.queue
	a.queue = nil
	if len(msgs) == 0 {
		a.mu.Unlock()
		return TurnResult{}, fmt.Errorf("agent %s: run turn: %w", a.facts.ID, ErrNoMessage)
	}
	turnCtx, cancel := context.WithCancelCause(ctx)
	a.cancel = cancel
	if pending != nil {
		cancel(pending)
	}
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.cancel = nil
		a.mu.Unlock()
		cancel(nil)
	}()
	t := &turnRun{a: a, ctx: turnCtx, turn: a.lastTurn + 1}
	return t.run(msgs)
}

// record appends e to the session; OnEvent sees it once it is stored.
func (a *Agent) record(e session.Event) (session.Event, error) {
	e, err := a.sess.Append(e)
	if err != nil {
		return e, fmt.Errorf("agent %s: record: %w", a.facts.ID, err)
	}
	return e, nil
}

// emitContained emits a lifecycle event; its listeners' failures are
// logged by the bus and do not concern the loop.
func (a *Agent) emitContained(ctx context.Context, event string, payload any) {
	facts := a.facts
	ctx = prompt.WithAgent(context.WithoutCancel(ctx), &facts)
	if err := a.bus.EmitContained(ctx, event, payload); err != nil && errors.Is(err, events.ErrWrongMode) {
		a.log.Error("agent: lifecycle event not emitted", "event", event, "err", err)
	}
}

// generate sends req through the agent/request waterfall to the provider
// and accumulates the answer, passing each valid chunk to onChunk. It is
// the one path to the model: steps and compaction both use it, under the
// agent's OutputBounds. A provider that returns without a finish chunk
// fails with model.ErrStreamCut; one past a bound with
// model.ErrOutputLimit, after onChunk got what was received up to it.
func (a *Agent) generate(ctx context.Context, req *model.Request, onChunk func(model.Chunk) error) (acc *model.Accumulator, err error) {
	out, err := a.bus.Waterfall(ctx, events.EventAgentRequest, req)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrListener, events.EventAgentRequest, err)
	}
	req, ok := out.(*model.Request)
	if !ok || req == nil {
		return nil, fmt.Errorf("%w: %s returned %T, not a request", ErrListener, events.EventAgentRequest, out)
	}
	if req.Model == "" {
		return nil, fmt.Errorf("%w: agent %q has no model: set \"model\" in the deployment configuration or supply one through the %s waterfall",
			ErrNoModel, a.facts.ID, events.EventAgentRequest)
	}
	acc = &model.Accumulator{Limits: a.output.limits()}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: the provider panicked: %v", ErrModel, r)
		}
	}()
	gctx, stop := a.output.context(ctx)
	defer stop()
	err = a.provider.Generate(gctx, req, func(c model.Chunk) error {
		// Record first: a chunk that breaks the stream's rules is part of
		// what the model sent, and the session keeps every chunk, up to
		// the output bound (Fit cuts the one that passes it).
		if err := acc.Err(); err != nil {
			return err // a provider that did not stop at the error
		}
		if onChunk != nil {
			kept, _ := acc.Fit(c)
			if err := onChunk(kept); err != nil {
				return err
			}
		}
		return acc.Add(c)
	})
	if err != nil && ctx.Err() == nil {
		if cause := context.Cause(gctx); errors.Is(cause, model.ErrOutputLimit) {
			err = cause // the time bound, whatever the provider made of it
		}
	}
	if err == nil {
		err = acc.Complete()
	}
	if err != nil {
		return acc, fmt.Errorf("%w: %w", ErrModel, err)
	}
	return acc, nil
}
