package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/agent"
	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/internal/subagent"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/redact"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/session/filestore"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

// Errors returned by this package, wrapped with detail; test with
// errors.Is.
var (
	// ErrInvalidOptions: New was given options it cannot run with.
	ErrInvalidOptions = errors.New("deploy: invalid options")
	// ErrNoProvider: a session needs a model provider and the deployment
	// has none (no Provider, no NewProvider, and no replay file given).
	ErrNoProvider = errors.New("deploy: no model provider")
	// ErrClosed: the deployment or session is closed.
	ErrClosed = errors.New("deploy: closed")
	// ErrNativeTool: a native tool failed or panicked; the model gets an
	// error result.
	ErrNativeTool = errors.New("deploy: native tool failed")
	// ErrLimit: an inspected prompt went past one of Options.Limits.
	ErrLimit = errors.New("deploy: limit exceeded")
)

// Options configure a Deployment. Only what a deployment cannot run
// without is required: a model provider, given here or per session as a
// replay file.
type Options struct {
	// Model is the model of sessions that name none; it is sent with
	// every request and is the {{model}} variable.
	Model string
	// Persona is the deployment:persona section's text; it may reference
	// variables such as {{model}} and {{cwd}}. Empty renders nothing.
	Persona string

	// Provider answers the model requests of every session without a
	// replay file. When nil, NewProvider makes one at the first such
	// session; when both are nil, such sessions fail with ErrNoProvider.
	Provider model.Provider
	// NewProvider makes the live provider lazily, so that a deployment
	// whose provider needs a key opens (for prompt, tools, replay)
	// without one; the error, e.g. a missing key, fails only the session
	// that needs it.
	NewProvider func() (model.Provider, error)

	// Sections are the embedder's own prompt sections, registered after
	// the harness's and before any plugin's.
	Sections []prompt.Section
	// Tools are the embedder's native Go tools, registered after the
	// sections and before any plugin's tools.
	Tools []Tool
	// Plugins are the Wasm plugins, loaded in order.
	Plugins []PluginSpec

	// SessionsDir is the root sessions persist under; empty means
	// DefaultSessionsDir().
	SessionsDir string
	// Store, when set, is where sessions persist instead of the JSONL
	// store under SessionsDir (for example a pgstore.Store shared by
	// workers). The deployment does not close it.
	Store session.Storage
	// Tenants, when set, holds each tenant's workspace root (serve): to a
	// session of one tenant, the others' roots are host state, which no
	// plugin of it may be granted or see (plugin.HostState).
	Tenants string
	// Compaction, when set, compacts long conversations in every session.
	Compaction *CompactionOptions
	// MaxSteps bounds the steps of one turn; 0 means the loop's default.
	MaxSteps int
	// SubagentDepth is the deepest a child agent of the built-in spawn
	// and fork providers may be (a top-level agent is 0); 0 means
	// subagent.DefaultMaxDepth.
	SubagentDepth int
	// ACPProviders are external ACP agents registered as subagent
	// providers after spawn and fork.
	ACPProviders []ACPProviderOptions
	// Limits are the deployment-wide bounds.
	Limits Limits

	// Logger receives diagnostics and the plugins' log and WASI output;
	// nil discards them.
	Logger *slog.Logger
	// Redactor holds the deployment's secrets (OpenConfig makes it from
	// the file: config.Deployment.Secrets). Every outward path of the
	// deployment goes through it: each event its sessions record (so the
	// log, its followers, exports and the model's messages), the errors
	// and turn results its methods return, and its Logger. Nil redacts
	// nothing.
	Redactor *redact.Redactor
	// Builtins holds the modules behind builtin:NAME sources; nil means
	// none, and a builtin: source then fails to load. The built-ins are
	// opt-in, so that a program loading only its own plugins does not
	// link them: pass guests.All() for every one (about 32 MB, what the
	// CLI does), or only those loaded, e.g. guests.ToolFS or
	// guests.Join(guests.Facts, guests.ToolFS).
	Builtins fs.FS
	// Cache is the plugins' compilation cache; nil opens
	// DefaultCache() (memory when that fails), which Close closes.
	Cache *Cache
	// EagerCompile compiles every plugin as it loads. By default a plugin
	// whose earlier load recorded its registrations in Cache registers
	// from them and compiles when first needed (plugin.Options.LazyCompile).
	EagerCompile bool
}

// Limits are deployment-wide bounds. Zero fields take the runtime's
// defaults (agent.DefaultAssemblyTimeout, agent.DefaultPromptBytes, and
// agent.OutputBounds.WithDefaults for the step output bounds).
// They are the Go form of a deployment file's limits, whose YAML shape is
// config.DeploymentLimits; Open is the one place that translates it.
// SystemPrompt and Tools enforce them, and every session's turns run
// under them (agent.Options.Bounds).
type Limits struct {
	// AssemblyTimeout is the deadline of one prompt assembly: every
	// dynamic section and variable of a step together.
	AssemblyTimeout time.Duration
	// PromptBytes caps the whole rendered system prompt.
	PromptBytes int64
	// StepOutputBytes bounds the bytes one step's model call may send
	// back; past it the step ends with code OUTPUT_LIMIT.
	StepOutputBytes int64
	// StepOutputTime bounds how long one step's model call may stream.
	StepOutputTime time.Duration
	// ToolArgumentBytes bounds the argument text of one tool call.
	ToolArgumentBytes int64
}

// output is the agent's share of the limits.
func (l Limits) output() agent.OutputBounds {
	return agent.OutputBounds{StepBytes: l.StepOutputBytes, StepTime: l.StepOutputTime, ToolArgumentBytes: l.ToolArgumentBytes}
}

// Deployment owns one registry, bus, plugin-state store and plugin host,
// and the sessions made on them. It is safe for concurrent use.
type Deployment struct {
	opts      Options
	log       *slog.Logger // redacted with opts.Redactor
	reg       *prompt.Registry
	bus       *events.Bus
	state     *agent.PluginState
	host      *plugin.Host
	cache     *plugin.Cache
	ownCache  bool
	store     session.Storage
	natives   map[string]Tool
	owners    map[string]string // "section:NAME"/"tool:NAME"/"variable:NAME" → owner
	offCompat func()

	provMu   sync.Mutex
	provider model.Provider

	mu       sync.Mutex
	sessions map[*Session]struct{}
	byID     map[string]*Session
	closed   bool

	subs *subagent.Registry
}

// Owners of registrations, as Explain reports them.
const (
	OwnerHarness    = "harness"
	OwnerDeployment = "deployment"
	// A plugin's registrations are owned by "plugin NAME".
)

// New opens a deployment: it creates the registry, bus, state store and
// plugin host, registers the harness sections and built-in variables,
// then the native sections and tools, then loads the plugins in order,
// and checks that every static section's {{references}} have an owner
// (plugin.Host.CheckReferences). On failure everything it made is
// released.
func New(ctx context.Context, opts Options) (_ *Deployment, err error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	red := opts.Redactor
	logger = slog.New(red.Handler(logger.Handler()))
	defer func() { err = red.Error(err) }()
	if opts.MaxSteps < 0 {
		return nil, fmt.Errorf("%w: MaxSteps %d is negative", ErrInvalidOptions, opts.MaxSteps)
	}
	if opts.Compaction != nil {
		if err := opts.Compaction.loop().Validate(); err != nil {
			return nil, fmt.Errorf("%w: compaction: %w", ErrInvalidOptions, err)
		}
	}
	natives := make(map[string]Tool, len(opts.Tools))
	for i, t := range opts.Tools {
		if t.Run == nil {
			return nil, fmt.Errorf("%w: native tool %d (%q) has no Run", ErrInvalidOptions, i, t.Name)
		}
		if _, dup := natives[t.Name]; dup {
			return nil, fmt.Errorf("%w: native tool %q is given twice", ErrInvalidOptions, t.Name)
		}
		natives[t.Name] = t
	}
	dir := opts.SessionsDir
	if dir == "" && opts.Store == nil {
		if dir, err = DefaultSessionsDir(); err != nil {
			return nil, err
		}
	}
	d := &Deployment{
		opts:     opts,
		log:      logger,
		reg:      prompt.NewRegistry(logger),
		bus:      events.New(logger),
		state:    agent.NewPluginState(),
		store:    opts.Store,
		natives:  natives,
		owners:   map[string]string{},
		sessions: map[*Session]struct{}{},
		byID:     map[string]*Session{},
		provider: opts.Provider,
	}
	if d.store == nil {
		d.store = filestore.New(dir, filestore.Options{})
	}
	if !red.Empty() {
		d.store = redactingStore{d.store, red}
	}
	d.subs = subagent.NewRegistry(d.bus)
	d.cache = opts.Cache.plugin()
	if d.cache == nil {
		d.ownCache = true
		if d.cache, err = plugin.DefaultCache(); err != nil {
			logger.Warn("compilation cache unavailable; compiling in memory", "err", err)
			d.cache, _ = plugin.NewCache("")
		}
	}
	defer func() {
		if err != nil {
			d.Close(context.WithoutCancel(ctx))
		}
	}()
	if err := d.registerOwn(); err != nil {
		return nil, err
	}
	d.host, err = plugin.New(plugin.Options{Registry: d.reg, Bus: d.bus, Logger: logger,
		Builtins: opts.Builtins, Cache: d.cache, State: d.state, Subagents: subagentHost{d},
		LazyCompile: !opts.EagerCompile, HostState: d.hostState()})
	if err != nil {
		return nil, fmt.Errorf("deploy: start the plugin host: %w", err)
	}
	// The plugins' modules are prepared concurrently; their inits run and
	// their registrations commit in the order given (plugin.Host.LoadAll).
	loaded, err := d.host.LoadAll(ctx, specsOf(opts.Plugins))
	for _, p := range loaded {
		c := p.Contribution()
		owner := "plugin " + p.Name()
		for _, s := range c.Sections {
			d.owners["section:"+s.Name] = owner
		}
		for _, v := range c.Variables {
			d.owners["variable:"+v] = owner
		}
		for _, t := range c.Tools {
			d.owners["tool:"+t.Name] = owner
		}
	}
	if err != nil {
		i := len(loaded)
		spec := opts.Plugins[i]
		name := spec.Name
		if name == "" {
			name = plugin.NameFromSource(spec.Source)
		}
		return nil, fmt.Errorf("deploy: plugin %d (%s, %s): %w", i+1, name, spec.Source, err)
	}
	if err := d.registerSubagentProviders(ctx); err != nil {
		return nil, err
	}
	// Everything that registers at open has: a static section that
	// references a variable nobody provides would fail every turn of
	// every agent, so it fails the deployment now, naming plugin, section
	// and variable (*prompt.ReferenceError), and the host checks every
	// later load, reload and registration the same way. With an assemble
	// hook present, which may supply the variable late, it only warns.
	if err := d.host.CheckReferences(ctx); err != nil {
		return nil, fmt.Errorf("deploy: %w", err)
	}
	if opts.Compaction != nil {
		if d.offCompat, err = agent.AttachCompaction(d.bus, opts.Compaction.loop()); err != nil {
			return nil, fmt.Errorf("deploy: compaction: %w", err)
		}
	}
	return d, nil
}

// hostState is the deployment's part of the host's state: the session
// store's directory (created now, so that every jail can hide it) and the
// tenants' roots. The plugin host adds its compile cache.
func (d *Deployment) hostState() plugin.HostState {
	s := plugin.HostState{Tenants: d.opts.Tenants}
	if fs, ok := d.store.(interface{ Dir() string }); ok && fs.Dir() != "" {
		if err := os.MkdirAll(fs.Dir(), 0o700); err != nil {
			d.log.Warn("deploy: cannot create the sessions directory", "dir", fs.Dir(), "err", err)
		}
		s.Dirs = append(s.Dirs, fs.Dir())
	}
	return s
}

// registerOwn registers what the harness and the embedder own, before any
// plugin loads.
func (d *Deployment) registerOwn() error {
	if _, _, err := prompt.RegisterHarnessSections(d.reg, d.opts.Persona); err != nil {
		return fmt.Errorf("deploy: register the harness sections: %w", err)
	}
	d.owners["section:"+prompt.IdentitySection] = OwnerHarness
	d.owners["section:"+prompt.PersonaSection] = OwnerDeployment
	if _, err := agent.RegisterBuiltinVariables(d.reg); err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	d.owners["variable:"+agent.VarModel] = OwnerHarness
	d.owners["variable:"+agent.VarCwd] = OwnerHarness
	err := d.reg.Update(func(tx *prompt.Tx) error {
		for _, s := range d.opts.Sections {
			if _, err := tx.AddSection(s); err != nil {
				return err
			}
			d.owners["section:"+s.Name] = OwnerDeployment
		}
		for _, t := range d.opts.Tools {
			if _, err := tx.AddTool(t.Tool); err != nil {
				return err
			}
			d.owners["tool:"+t.Name] = OwnerDeployment
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("deploy: register native sections and tools: %w", err)
	}
	return nil
}

// Redactor is the deployment's redactor (Options.Redactor): a front end
// that shows what does not pass through the deployment redacts it with
// this one.
func (d *Deployment) Redactor() *redact.Redactor { return d.opts.Redactor }

// Logger is the deployment's logger, which redacts its secrets.
func (d *Deployment) Logger() *slog.Logger { return d.log }

// redactingStore makes every session its store opens record through the
// deployment's redactor (session.Session.SetRedact): the one point every
// event of every session (top-level, subagent, ACP child) is appended
// through.
type redactingStore struct {
	session.Storage
	red *redact.Redactor
}

func (s redactingStore) Create(h session.Header, initial ...session.Event) (*session.Session, error) {
	sess, err := s.Storage.Create(h, initial...)
	if err != nil {
		return nil, err
	}
	sess.SetRedact(s.red.JSON)
	return sess, nil
}

func (s redactingStore) Open(id string) (*session.Session, error) {
	sess, err := s.Storage.Open(id)
	if err != nil {
		return nil, err
	}
	sess.SetRedact(s.red.JSON)
	return sess, nil
}

// Compile compiles, one plugin at a time until ctx is done, the module of
// every plugin that loaded lazily and has not needed it yet: a
// long-running program calls it in the background rather than compile on
// each plugin's first call. It returns what failed (that plugin's first
// call would fail the same way).
func (d *Deployment) Compile(ctx context.Context) error { return d.host.CompileAll(ctx) }

// PluginInstances counts the plugin instances open now, over every plugin
// (each agent that used a plugin holds one of it).
func (d *Deployment) PluginInstances() int {
	n := 0
	for _, name := range d.host.Plugins() {
		if p := d.host.Plugin(name); p != nil {
			n += p.Instances()
		}
	}
	return n
}

// Store is where sessions persist.
func (d *Deployment) Store() session.Storage { return d.store }

// Model is the deployment's default model.
func (d *Deployment) Model() string { return d.opts.Model }

// Owner names who registered a section, tool or variable ("section",
// "tool" or "variable" and its name): OwnerHarness, OwnerDeployment or
// "plugin NAME"; empty when unknown.
func (d *Deployment) Owner(kind, name string) string {
	if o := d.owners[kind+":"+name]; o != "" {
		return o
	}
	// A plugin may register after its load (the subagent tool, when its
	// provider arrives): ask the plugins as they are now.
	if d.host == nil {
		return ""
	}
	for _, pn := range d.host.Plugins() {
		p := d.host.Plugin(pn)
		if p == nil {
			continue
		}
		c := p.Contribution()
		switch kind {
		case "tool":
			for _, t := range c.Tools {
				if t.Name == name {
					return "plugin " + pn
				}
			}
		case "section":
			for _, s := range c.Sections {
				if s.Name == name {
					return "plugin " + pn
				}
			}
		case "variable":
			if slices.Contains(c.Variables, name) {
				return "plugin " + pn
			}
		}
	}
	return ""
}

// liveProvider returns the provider of sessions without a replay file.
func (d *Deployment) liveProvider() (model.Provider, error) {
	d.provMu.Lock()
	defer d.provMu.Unlock()
	if d.provider != nil {
		return d.provider, nil
	}
	if d.opts.NewProvider == nil {
		return nil, ErrNoProvider
	}
	p, err := d.opts.NewProvider()
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("%w: NewProvider returned none", ErrNoProvider)
	}
	d.provider = p
	return p, nil
}

// Close closes every open session, unloads the plugins and releases the
// compilation cache if the deployment opened it. Closing twice does
// nothing.
func (d *Deployment) Close(ctx context.Context) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	open := make([]*Session, 0, len(d.sessions))
	for s := range d.sessions {
		open = append(open, s)
	}
	d.mu.Unlock()
	var errs []error
	for _, s := range open {
		errs = append(errs, s.Close(ctx))
	}
	if d.offCompat != nil {
		d.offCompat()
	}
	if d.host != nil {
		errs = append(errs, d.host.Close(ctx))
	}
	if d.ownCache && d.cache != nil {
		errs = append(errs, d.cache.Close(ctx))
	}
	return errors.Join(errs...)
}

// DefaultSessionsDir is where sessions persist by default:
// $XDG_DATA_HOME/dsh-wasm/sessions, or ~/.local/share/dsh-wasm/sessions.
func DefaultSessionsDir() (string, error) {
	if x := os.Getenv("XDG_DATA_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "dsh-wasm", "sessions"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("deploy: no sessions dir: set sessions in the deployment or $XDG_DATA_HOME: %w", err)
	}
	return filepath.Join(home, ".local", "share", "dsh-wasm", "sessions"), nil
}

// Tool is a native Go tool.
type Tool struct {
	// Tool is what the model is told: the name, the description and the
	// parameters (a JSON Schema object; empty for none).
	prompt.Tool
	// Run runs a call. args is the call's JSON object. A tool's own
	// failure is a result with IsError; a returned error is turned into
	// an error result too, naming the tool.
	Run func(ctx context.Context, call ToolCall) (tool.Result, error)
}

// ToolCall is one call of a native tool.
type ToolCall struct {
	// Agent describes the calling agent (its id, session, model, cwd).
	Agent prompt.AgentFacts
	// Args is the call's arguments, a JSON object.
	Args json.RawMessage
}

// runner runs native tools itself and every other tool in the plugin
// host.
type runner struct{ d *Deployment }

var _ agent.ToolRunner = runner{}

func (r runner) CallTool(ctx context.Context, facts *prompt.AgentFacts, name string, args []byte) (tool.Result, error) {
	if t, ok := r.d.natives[name]; ok {
		return runNative(ctx, t, facts, args)
	}
	return r.d.host.CallTool(ctx, facts, name, args)
}

func (r runner) EndAgent(ctx context.Context, agentID string) { r.d.host.EndAgent(ctx, agentID) }

func runNative(ctx context.Context, t Tool, facts *prompt.AgentFacts, args []byte) (res tool.Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %s panicked: %v", ErrNativeTool, t.Name, p)
		}
	}()
	var f prompt.AgentFacts
	if facts != nil {
		f = *facts
	}
	res, err = t.Run(ctx, ToolCall{Agent: f, Args: slices.Clone(args)})
	if err != nil {
		return tool.Result{}, fmt.Errorf("%w: %s: %w", ErrNativeTool, t.Name, err)
	}
	return res, nil
}
