package plugin

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/budget"
	"github.com/dsh-wasm/dsh-wasm/internal/pluginstate"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

// Options configure a Host. The zero value of every field but Registry
// has a working default.
type Options struct {
	// Registry receives the plugins' sections, variables and tools.
	Registry *prompt.Registry
	// Bus carries events to and from plugins; nil makes a private one.
	Bus *events.Bus
	// Logger receives plugin logs, tagged plugin=<name>.
	Logger *slog.Logger
	// Builtins holds the modules behind "builtin:NAME" sources, as
	// NAME.wasm at its root.
	Builtins fs.FS
	// Cache is the compilation cache. Nil uses DefaultCache().
	Cache *Cache
	// State keeps plugins' host-side state; nil keeps it in memory.
	State pluginstate.Store
	// Subagents serves subagent_providers and subagent_run; nil lists no
	// provider and runs no child.
	Subagents Subagents
	// LazyCompile lets a plugin register from the manifest its last load
	// recorded in Cache, when nothing its init could see has changed, and
	// compile its module only when something first needs its code (see
	// manifest.go for what is recorded, and when). It needs a Cache with
	// a directory; otherwise every plugin compiles as it loads.
	LazyCompile bool
	// HostState is the host's own state on disk, besides the Cache's
	// directory, which the host adds: no grant may lie in it, and every
	// jail hides it (see HostState).
	HostState HostState
}

// Spec says what plugin to load and what it may do.
type Spec struct {
	// Name identifies the plugin; empty derives it from Source.
	Name string
	// Source is "builtin:NAME" or a file path.
	Source string
	// SHA256, when set ("sha256:<hex>" or bare hex), pins the module.
	SHA256 string
	// Config is the plugin's config as JSON; empty means {}.
	Config json.RawMessage
	// Grants are the plugin's whole policy: what it may do (its
	// filesystem roots, mounted through a jail, exec, net, the host
	// environment variables it may read) and the limits it runs under.
	// Zero fields take the defaults, resolved by config.Grants.Effective
	// as for a YAML entry. The plugin's declared needs are checked against
	// them; without Grants, only a plugin that declares no needs loads,
	// under the default limits.
	Grants *config.Grants
	// Inspect loads the plugin to look at it alone: without refusing it
	// for its needs, nor for references to variables that other plugins
	// of a deployment would provide (Dangling lists them).
	Inspect bool
	// ABI is the plugin's ABI, one of config.ABIs; empty detects it from
	// the module's imports and exports.
	ABI string

	// checkNeeds, when set, replaces the check of the plugin's declared
	// capabilities against Grants; an error refuses the load (tests).
	checkNeeds func(hostfns.Capabilities) error
	// noInterrupt skips the interrupt instrumentation, forcing the
	// WithCloseOnContextDone fallback (tests and benchmarks).
	noInterrupt bool
}

// runLimits are the bounds a loaded plugin runs under, in the units the
// host uses; limitsOf derives them from its effective grants.
type runLimits struct {
	// MemoryPages caps linear memory, in 64 KiB pages.
	MemoryPages uint32
	// CallTimeout is the compute budget of one call: guest code and the
	// host's work for it, not waits another grant bounds.
	CallTimeout time.Duration
	// InitTimeout is the compute budget of dsh_init and dsh_setup, which
	// counts every wait.
	InitTimeout time.Duration
	// WallTimeout caps one export call's wall-clock time, waits included.
	WallTimeout time.Duration
	// MaxRegistrations caps sections + variables + tools + subscriptions.
	MaxRegistrations int
	// HostBytes caps the bytes the host reads and produces for one
	// export call's host functions (requests and responses).
	HostBytes int64
	// PromptBytes caps the plugin's prompt text: its static sections,
	// tool descriptions and schemas, plus, in each assembly, its dynamic
	// sections and variable values.
	PromptBytes int64
	// LogBytes caps what the plugin logs per minute (log and stdio);
	// the rest is dropped.
	LogBytes int64
	// StateBytes caps the plugin's host-side state in one session (with
	// a pluginstate.Store that implements pluginstate.LimitedStore, as the
	// built-in ones do).
	StateBytes int64
	// NoSnapshot makes every instance run the module's initialiser instead
	// of starting from an image of a freshly initialised instance (see
	// image.go).
	NoSnapshot bool
}

// effectiveGrants resolves the spec's grants (none when nil) through
// config.Grants.Effective, the one place defaults are applied.
func (s Spec) effectiveGrants() config.Grants {
	var g config.Grants
	if s.Grants != nil {
		g = *s.Grants
	}
	return g.Effective()
}

// limitsOf converts effective grants' limits to the host's units.
func limitsOf(g config.Grants) runLimits {
	l := g.Limits
	return runLimits{MemoryPages: l.MemoryPages(), CallTimeout: l.CallTimeout, InitTimeout: l.InitTimeout,
		WallTimeout: l.WallTimeout, MaxRegistrations: l.MaxRegistrations, HostBytes: int64(l.HostBytes),
		PromptBytes: int64(l.PromptBytes), LogBytes: int64(l.LogBytes), StateBytes: int64(l.StateBytes),
		NoSnapshot: l.Snapshot != nil && !*l.Snapshot}
}

// Host loads plugins and calls into them. It is safe for concurrent use.
type Host struct {
	reg      *prompt.Registry
	bus      *events.Bus
	log      *slog.Logger
	builtins fs.FS
	cache    *Cache
	ownCache bool
	state    pluginstate.Store
	// subagents serves subagent_providers and subagent_run.
	subagents Subagents
	lazy      bool // Options.LazyCompile
	// hostState is Options.HostState with the cache's directory, resolved
	// once by New: the one list of what plugins may not reach.
	hostState HostState

	wd *budget.Watchdog // enforces the compute budgets of calls in progress
	// workdirs are the agents' opened working directories (BindWorkdir).
	workdirs workdirs

	mu      sync.RWMutex
	plugins map[string]*Plugin
	// tools indexes tool names to the loaded plugin that registered them
	// (guarded by mu); entries are hints that toolOwner checks.
	tools  map[string]*Plugin
	closed bool
	// loading is the plugin a Load or Reload is initialising (guarded by
	// mu), so that Close can stop its dsh_init rather than wait for it.
	loading *Plugin
	// loadMu serialises loads, unloads and reloads, which are registry
	// updates that may run guest code.
	loadMu sync.Mutex
	// refsChecked: CheckReferences ran; later loads and registrations
	// are checked at once. Atomic: it is read under the registry's and a
	// contribution's locks, where h.mu may not be taken.
	refsChecked atomic.Bool
}

// New returns a host.
func New(opts Options) (*Host, error) {
	if opts.Registry == nil {
		return nil, errors.New("plugin.New: Options.Registry is required")
	}
	h := &Host{reg: opts.Registry, bus: opts.Bus, log: opts.Logger, builtins: opts.Builtins,
		cache: opts.Cache, state: opts.State, subagents: opts.Subagents, lazy: opts.LazyCompile, plugins: map[string]*Plugin{}, tools: map[string]*Plugin{}, wd: budget.NewWatchdog(classifyTrap)}
	if h.bus == nil {
		h.bus = events.New(h.log)
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.state == nil {
		h.state = pluginstate.NewMemory()
	}
	if h.cache == nil {
		c, err := DefaultCache()
		if err != nil {
			return nil, err
		}
		h.cache, h.ownCache = c, true
	}
	h.hostState = opts.HostState.resolved(h.cache.Dir())
	return h, nil
}

// Registry returns the registry the host registers into.
func (h *Host) Registry() *prompt.Registry { return h.reg }

// Bus returns the host's event bus.
func (h *Host) Bus() *events.Bus { return h.bus }

// State returns the host-side plugin state store.
func (h *Host) State() pluginstate.Store { return h.state }

// Load loads a plugin, runs its init and commits its contribution.
func (h *Host) Load(ctx context.Context, spec Spec) (*Plugin, error) {
	h.loadMu.Lock()
	defer h.loadMu.Unlock()
	name, err := h.checkLoad(spec)
	if err != nil {
		return nil, err
	}
	p, err := h.prepare(ctx, name, spec)
	if err != nil {
		return nil, fmt.Errorf("load plugin %q: %w", name, err)
	}
	return h.commitLoad(ctx, name, p)
}

// checkLoad returns the name spec loads under, or why it cannot load:
// the host is closed, the name is invalid or already taken.
func (h *Host) checkLoad(spec Spec) (string, error) {
	name, err := h.checkName(spec)
	if err != nil {
		return "", err
	}
	h.mu.RLock()
	_, dup := h.plugins[name]
	h.mu.RUnlock()
	if dup {
		return "", fmt.Errorf("load plugin %q: %w: a plugin's name is its entry's name, or else derived from its source (%s gives %q); give one of the two entries another name with `name:`", name, ErrAlreadyLoaded, spec.Source, NameFromSource(spec.Source))
	}
	return name, nil
}

// commitLoad runs a prepared plugin's init and commits its contribution;
// on failure it closes p. loadMu is held.
func (h *Host) commitLoad(ctx context.Context, name string, p *Plugin) (*Plugin, error) {
	h.setLoading(p)
	defer h.setLoading(nil)
	dangling := h.reg.Dangling()
	err := h.initUpdate(ctx, p, nil, func(tx *prompt.Tx) error {
		if err := p.runInit(ctx, tx); err != nil {
			return err
		}
		return h.checkNewDangling(p, tx, dangling)
	})
	if err != nil {
		p.close(errDiscarded)
		return nil, fmt.Errorf("load plugin %q: %w", name, err)
	}
	h.mu.Lock()
	if h.closed {
		// Close ran while this load was in progress: undo it rather than
		// leave a plugin nobody will unload.
		h.mu.Unlock()
		h.reg.Update(func(tx *prompt.Tx) error { return p.contrib.removeAll(tx) })
		p.close(errHostDown)
		return nil, fmt.Errorf("load plugin %q: %w", name, ErrClosed)
	}
	h.plugins[name] = p
	h.mu.Unlock()
	p.saveManifest()
	p.activate()
	h.bus.EmitContained(ctx, events.EventPluginLoaded, PluginEvent{Name: name})
	return p, nil
}

// initUpdate runs fn, which runs p's init, in a registry update. When p
// registered from a manifest that no longer replays (manifest.go), the
// update is undone, undo (if any) runs, and p is compiled and updated
// again with its real dsh_init: a manifest can make a load faster, never
// make it fail.
func (h *Host) initUpdate(ctx context.Context, p *Plugin, undo func(), fn func(tx *prompt.Tx) error) error {
	err := h.reg.Update(fn)
	if p.manifest == nil || !errors.Is(err, errReplayDiverged) {
		return err
	}
	p.log.Debug("loads eagerly: its recorded init no longer replays", "err", err)
	h.cache.dropManifest(p.key)
	p.manifest = nil
	if undo != nil {
		undo()
	}
	if err := p.ensureCompiled(ctx); err != nil {
		return err
	}
	return h.reg.Update(fn)
}

// LoadAll loads specs as calling Load for each in turn would: every
// plugin's init runs, and its contribution is committed, in the order
// given, and the first failure stops the batch, with the same error Load
// would return. What comes before a plugin's init (reading, rewriting and
// compiling its module, see prepare) is what costs most, and it needs
// nothing from the plugins before it, so up to GOMAXPROCS specs are
// prepared at once, ahead of the init in turn.
//
// It returns the plugins loaded, in order: on failure, the spec that failed
// is specs[len(plugins)], and the plugins before it stay loaded, as after
// as many Loads. Modules prepared for the specs after it are released, and
// LoadAll returns only once no preparation is running.
func (h *Host) LoadAll(ctx context.Context, specs []Spec) ([]*Plugin, error) {
	h.loadMu.Lock()
	defer h.loadMu.Unlock()
	b := newBatch(h, ctx, specs)
	defer b.finish()
	loaded := make([]*Plugin, 0, len(specs))
	for i, spec := range specs {
		pr := b.take(i)
		// Names are checked in turn, against the plugins loaded by then,
		// as Load checks them; a name checked early may be taken since.
		name, err := h.checkLoad(spec)
		if err != nil {
			if pr.p != nil {
				pr.p.close(errDiscarded)
			}
			return loaded, err
		}
		if pr.err != nil {
			return loaded, fmt.Errorf("load plugin %q: %w", name, pr.err)
		}
		p, err := h.commitLoad(ctx, name, pr.p)
		if err != nil {
			return loaded, err
		}
		loaded = append(loaded, p)
	}
	return loaded, nil
}

// Reload replaces a loaded plugin with spec: the new module's init runs
// and its contribution replaces the old one in one registry update, so an
// assembly sees the old set or the new, never a mix. If the new init
// fails, the old plugin stays loaded and untouched. Calls still running in
// the old plugin are stopped ("the plugin was reloaded"), as by Unload.
func (h *Host) Reload(ctx context.Context, spec Spec) (*Plugin, error) {
	h.loadMu.Lock()
	defer h.loadMu.Unlock()
	name, err := h.checkName(spec)
	if err != nil {
		return nil, err
	}
	h.mu.RLock()
	old := h.plugins[name]
	h.mu.RUnlock()
	if old == nil {
		return nil, fmt.Errorf("reload plugin %q: %w", name, ErrNotLoaded)
	}
	p, err := h.prepare(ctx, name, spec)
	if err != nil {
		return nil, fmt.Errorf("reload plugin %q: %w", name, err)
	}
	h.setLoading(p)
	defer h.setLoading(nil)
	dangling := h.reg.Dangling()
	err = h.initUpdate(ctx, p, old.contrib.restore, func(tx *prompt.Tx) error {
		if err := old.contrib.removeAll(tx); err != nil {
			return err
		}
		if err := p.runInit(ctx, tx); err != nil {
			return err
		}
		return h.checkNewDangling(p, tx, dangling)
	})
	if err != nil {
		old.contrib.restore()
		p.close(errDiscarded)
		return nil, fmt.Errorf("reload plugin %q: %w", name, err)
	}
	old.deactivate()
	p.saveManifest()
	p.activate()
	h.mu.Lock()
	h.plugins[name] = p
	h.forgetTools(old)
	h.mu.Unlock()
	old.close(errReplaced)
	h.logDangling(name, dangling)
	return p, nil
}

// Unload removes a plugin's contribution and closes its instances. Calls
// in progress are stopped (they fail "call cancelled: the plugin was
// unloaded") and their commands killed; Unload waits for them at most
// about a second, never for a guest or a command to finish.
func (h *Host) Unload(ctx context.Context, name string) error {
	return h.unload(ctx, name, errUnloaded)
}

func (h *Host) unload(ctx context.Context, name string, why error) error {
	h.loadMu.Lock()
	defer h.loadMu.Unlock()
	return h.unloadLocked(ctx, name, why)
}

// unloadLocked is Unload with loadMu held. Sections of other plugins that
// referenced the plugin's variables are logged as dangling.
func (h *Host) unloadLocked(ctx context.Context, name string, why error) error {
	dangling := h.reg.Dangling()
	h.mu.Lock()
	p := h.plugins[name]
	delete(h.plugins, name)
	h.forgetTools(p)
	h.mu.Unlock()
	if p == nil {
		return fmt.Errorf("unload plugin %q: %w", name, ErrNotLoaded)
	}
	// Stop the plugin's calls before taking the registry's lock: a call
	// registering from the load-time instance holds it.
	p.haltAll(why)
	err := h.reg.Update(func(tx *prompt.Tx) error { return p.contrib.removeAll(tx) })
	p.deactivate()
	p.close(why)
	h.bus.EmitContained(ctx, events.EventPluginUnloaded, PluginEvent{Name: name})
	if err != nil {
		return fmt.Errorf("unload plugin %q: %w", name, err)
	}
	h.logDangling(name, dangling)
	return nil
}

func (h *Host) setLoading(p *Plugin) {
	h.mu.Lock()
	h.loading = p
	closed := h.closed
	h.mu.Unlock()
	if closed && p != nil {
		p.haltAll(errHostDown)
	}
}

// PluginEvent is the payload of plugin/loaded and plugin/unloaded.
type PluginEvent struct {
	Name string `json:"name"`
}

// Plugin returns the loaded plugin called name, or nil.
func (h *Host) Plugin(name string) *Plugin {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.plugins[name]
}

// Plugins lists the loaded plugins' names, sorted.
func (h *Host) Plugins() []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	names := make([]string, 0, len(h.plugins))
	for n := range h.plugins {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// EndAgent closes every instance that belongs to the agent: a call in
// progress is stopped and the agent's commands are killed. It waits at
// most about a second per plugin, never for a guest or a command.
func (h *Host) EndAgent(ctx context.Context, agentID string) {
	h.mu.RLock()
	ps := make([]*Plugin, 0, len(h.plugins))
	for _, p := range h.plugins {
		ps = append(ps, p)
	}
	h.mu.RUnlock()
	// Stop the agent's calls and commands in every plugin first, so that
	// they wind down together and the closes below wait closeWait in all.
	for _, p := range ps {
		p.haltAgent(agentID)
	}
	deadline := time.Now().Add(closeWait)
	for _, p := range ps {
		p.endAgent(agentID, deadline)
	}
}

// Close unloads every plugin and releases the compilation cache if the
// host opened it.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	names := make([]string, 0, len(h.plugins))
	ps := make([]*Plugin, 0, len(h.plugins))
	for n, p := range h.plugins {
		names = append(names, n)
		ps = append(ps, p)
	}
	if h.loading != nil {
		ps = append(ps, h.loading)
	}
	h.mu.Unlock()
	// Stop every call of every plugin at once, so that the unloads below
	// find them winding down rather than wait for each in turn.
	for _, p := range ps {
		p.haltAll(errHostDown)
	}
	var errs []error
	for _, n := range names {
		if err := h.unload(ctx, n, errHostDown); err != nil && !errors.Is(err, ErrNotLoaded) {
			errs = append(errs, err)
		}
	}
	h.wd.Stop()
	if h.ownCache {
		errs = append(errs, h.cache.Close(ctx))
	}
	return errors.Join(errs...)
}

func (h *Host) checkName(spec Spec) (string, error) {
	h.mu.RLock()
	closed := h.closed
	h.mu.RUnlock()
	if closed {
		return "", ErrClosed
	}
	name := spec.Name
	if name == "" {
		name = NameFromSource(spec.Source)
	}
	if !validPluginName(name) {
		return "", fmt.Errorf("load plugin %q: %w: name must match [a-z0-9][a-z0-9_.-]{0,63}", name, ErrSource)
	}
	return name, nil
}

// NameFromSource derives a plugin name from its source: builtin:facts is
// "facts", /x/y/my-tool.wasm is "my-tool".
func NameFromSource(source string) string {
	if n, ok := strings.CutPrefix(source, "builtin:"); ok {
		return n
	}
	return strings.ToLower(strings.TrimSuffix(filepath.Base(source), filepath.Ext(source)))
}

func validPluginName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '_' || c == '.' || c == '-')
		if !ok {
			return false
		}
	}
	return true
}

// moduleSource is a module's digest (the sha256 of its bytes, in hex)
// and its bytes, read only when needed: a warm load compiles the rewritten
// module from the cache and needs the original's digest alone.
type moduleSource struct {
	digest string
	b      []byte
	read   func() ([]byte, error) // when b is nil
}

// bytes returns the module's bytes.
func (s *moduleSource) bytes() ([]byte, error) {
	if s.b == nil {
		b, err := s.read()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSource, err)
		}
		s.b = b
	}
	return s.b, nil
}

// readSource returns the module of source, checked against pin.
func (h *Host) readSource(source, pin string) (*moduleSource, error) {
	var src *moduleSource
	var err error
	if n, ok := strings.CutPrefix(source, "builtin:"); ok {
		if h.builtins == nil {
			return nil, fmt.Errorf("%w: %s: this host has no built-in plugins", ErrSource, source)
		}
		src, err = readBuiltin(h.builtins, n+".wasm")
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s: no built-in plugin %q (have %s)", ErrSource, source, n, strings.Join(Builtins(h.builtins), ", "))
		}
	} else if source == "" {
		return nil, fmt.Errorf("%w: empty source", ErrSource)
	} else {
		var b []byte
		if b, err = os.ReadFile(source); err == nil {
			src = &moduleSource{b: b, digest: digestOf(b)}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSource, err)
	}
	if pin != "" {
		want := strings.ToLower(strings.TrimPrefix(pin, "sha256:"))
		if want != src.digest {
			return nil, fmt.Errorf("%w: %s is sha256:%s, pinned sha256:%s", ErrDigestMismatch, source, src.digest, want)
		}
	}
	return src, nil
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// readBuiltin reads a built-in module. An embed.FS cannot change, so its
// modules are copied onto the heap only if the module must be rewritten
// (a cold cache): fs.ReadFile would copy megabytes per module that a warm
// load never looks at. Its digest is NAME.wasm.sha256 beside the module
// when the FS has one (package guests writes them as it builds the
// modules, and its tests check them), or else the module is hashed as it
// streams out of the binary. Any other fs.FS is read once, so that the
// bytes hashed are the bytes used.
func readBuiltin(fsys fs.FS, file string) (*moduleSource, error) {
	efs, ok := fsys.(embed.FS)
	if !ok {
		b, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, err
		}
		return &moduleSource{b: b, digest: digestOf(b)}, nil
	}
	read := func() ([]byte, error) { return efs.ReadFile(file) }
	if sum, err := efs.ReadFile(file + ".sha256"); err == nil {
		if d := strings.TrimSpace(string(sum)); len(d) == 2*sha256.Size && strings.Trim(d, "0123456789abcdef") == "" {
			if _, err := efs.Open(file); err != nil {
				return nil, err
			}
			// Checked whenever the bytes are read (a cold cache): a
			// stale digest file fails loudly there.
			return &moduleSource{digest: d, read: verified(file, d, read)}, nil
		}
	}
	f, err := efs.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	hash := sha256.New()
	if _, err := io.Copy(hash, f); err != nil {
		return nil, err
	}
	return &moduleSource{digest: hex.EncodeToString(hash.Sum(nil)), read: read}, nil
}

// verified reads with read and checks the bytes against digest.
func verified(name, digest string, read func() ([]byte, error)) func() ([]byte, error) {
	return func() ([]byte, error) {
		b, err := read()
		if err != nil {
			return nil, err
		}
		if got := digestOf(b); got != digest {
			return nil, fmt.Errorf("%s is sha256:%s, not sha256:%s as it was when it loaded (or as its .sha256 file says)", name, got, digest)
		}
		return b, nil
	}
}

// forgetBytes returns s without the bytes it holds, read again (and
// checked against its digest) when needed: a lazily loaded plugin may
// never need them. Only a file can be read again.
func (s *moduleSource) forgetBytes(source string) *moduleSource {
	if s.b == nil || strings.HasPrefix(source, "builtin:") {
		return s
	}
	return &moduleSource{digest: s.digest, read: verified(source, s.digest, func() ([]byte, error) { return os.ReadFile(source) })}
}

// Builtins lists the built-in plugin names in fsys.
func Builtins(fsys fs.FS) []string {
	if fsys == nil {
		return nil
	}
	m, _ := fs.Glob(fsys, "*.wasm")
	names := make([]string, len(m))
	for i, f := range m {
		names[i] = strings.TrimSuffix(f, ".wasm")
	}
	return names
}

// HostOf returns the plugin host of a *deploy.Deployment (nil for
// anything else). runtime/deploy sets it: the host is not part of the
// root's API, and only code inside the module (its tests, the benchmarks)
// may reach it this way.
var HostOf func(deployment any) *Host
