package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

// PluginSpec names one Wasm plugin of a deployment and its policy.
type PluginSpec struct {
	// Name identifies the plugin; empty derives it from Source
	// (PluginNameFromSource).
	Name string
	// Source is "builtin:NAME" or a file path.
	Source string
	// SHA256, when set ("sha256:<hex>" or bare hex), pins the module.
	SHA256 string
	// Config is the plugin's config as JSON; empty means {}.
	Config json.RawMessage
	// Grants are the plugin's whole policy: what it may do (filesystem
	// roots, exec, net, host environment variables) and the limits it
	// runs under. Zero fields take the defaults, as for a YAML entry.
	// Without Grants, only a plugin that declares no needs loads, under
	// the default limits.
	Grants *config.Grants
	// Inspect loads the plugin to look at it alone: without refusing it
	// for its needs, nor for references to variables other plugins of a
	// deployment would provide (PluginReport.Dangling lists them).
	Inspect bool
	// ABI is the plugin's ABI, one of config.ABIs; empty detects it from
	// the module's imports and exports.
	ABI string
}

// spec is s in the plugin host's terms.
func (s PluginSpec) spec() plugin.Spec {
	return plugin.Spec{Name: s.Name, Source: s.Source, SHA256: s.SHA256, Config: s.Config,
		Grants: s.Grants, Inspect: s.Inspect, ABI: s.ABI}
}

func specsOf(ss []PluginSpec) []plugin.Spec {
	out := make([]plugin.Spec, len(ss))
	for i, s := range ss {
		out[i] = s.spec()
	}
	return out
}

// PluginSpecFromEntry is the spec of a plugin entry of a deployment file
// (config.Entry), named name: its config as JSON and its grants.
func PluginSpecFromEntry(name string, e config.Entry) (PluginSpec, error) {
	s, err := plugin.SpecFromEntry(name, e)
	if err != nil {
		return PluginSpec{}, err
	}
	return PluginSpec{Name: s.Name, Source: s.Source, SHA256: s.SHA256, Config: s.Config,
		Grants: s.Grants, Inspect: s.Inspect, ABI: s.ABI}, nil
}

// PluginNameFromSource is the name a plugin without one takes from its
// source: builtin:facts is "facts", /x/y/my-tool.wasm is "my-tool".
func PluginNameFromSource(source string) string { return plugin.NameFromSource(source) }

// BuiltinPlugins lists the names of the built-in plugins in fsys (the
// Builtins option's file system).
func BuiltinPlugins(fsys fs.FS) []string { return plugin.Builtins(fsys) }

// ErrPluginBadOutput: a plugin's export returned output the host cannot
// accept (a section that does not render, for one).
var ErrPluginBadOutput = plugin.ErrBadOutput

// EnvCacheDir names the environment variable DefaultCache reads the
// compilation cache's directory from.
const EnvCacheDir = plugin.EnvCacheDir

// Cache is the plugins' compilation cache: compiled code stored on disk
// keyed by the module's bytes, so that a warm load skips the compiler.
// It must outlive the deployments using it: close it after them.
type Cache struct{ c *plugin.Cache }

// NewCache opens a cache in dir, creating it; an empty dir makes an
// in-memory cache.
func NewCache(dir string) (*Cache, error) {
	c, err := plugin.NewCache(dir)
	if err != nil {
		return nil, err
	}
	return &Cache{c}, nil
}

// NoCache returns a cache that caches nothing: every load compiles.
func NoCache() *Cache { return &Cache{plugin.NoCache()} }

// DefaultCache opens the cache named by $DSH_WASM_CACHE_DIR, or one under
// the user cache dir; $DSH_WASM_CACHE=off turns caching off.
func DefaultCache() (*Cache, error) {
	c, err := plugin.DefaultCache()
	if err != nil {
		return nil, err
	}
	return &Cache{c}, nil
}

// Close releases the cache. Compiled code on disk stays.
func (c *Cache) Close(ctx context.Context) error { return c.plugin().Close(ctx) }

// plugin is what c wraps; nil for a nil c.
func (c *Cache) plugin() *plugin.Cache {
	if c == nil {
		return nil
	}
	return c.c
}

// PluginBounds are the bounds a loaded plugin runs under, as `dsh-wasm
// plugin inspect` reports them. Its fields are the plugin host's own
// report, field for field (the conversion in LoadPlugin does not compile
// otherwise).
type PluginBounds struct {
	// MemoryBytes caps the plugin's linear memory.
	MemoryBytes uint64 `json:"memory_bytes"`
	// CallTimeout is the compute budget of a call: guest code and the
	// host's work for it; waits bounded by exec or net timeouts aside.
	CallTimeout string `json:"call_timeout"`
	// InitTimeout is the compute budget of its init.
	InitTimeout string `json:"init_timeout"`
	// WallTimeout caps a call's wall-clock time, waits included.
	WallTimeout string `json:"wall_timeout"`
	// NetTimeout bounds one http_request (with a net grant).
	NetTimeout string `json:"net_timeout,omitempty"`
	// HostBytesPerCall caps what host functions read and produce for
	// one call.
	HostBytesPerCall int64 `json:"host_bytes_per_call"`
	// PromptBytes caps the plugin's prompt text.
	PromptBytes int64 `json:"prompt_bytes"`
	// PromptBytesUsed is what its static sections and its tools' names,
	// descriptions and schemas hold.
	PromptBytesUsed int64 `json:"prompt_bytes_used"`
	// LogBytesPerMinute caps its log records and stdio lines.
	LogBytesPerMinute int64 `json:"log_bytes_per_minute"`
	// Registrations counts what it registered (sections, variables,
	// tools, hooks).
	Registrations int `json:"registrations"`
	// MaxRegistrations caps Registrations.
	MaxRegistrations int `json:"max_registrations"`
	// StateBytesPerSession caps its host-side state in one session.
	StateBytesPerSession int64 `json:"state_bytes_per_session"`
	// SmallRequestBytes caps the requests of host functions that take a
	// name, a key or an id.
	SmallRequestBytes int `json:"small_request_bytes"`
}

// PluginReport describes a loaded plugin: what it contributes, what it
// declared it needs, and the bounds it runs under.
type PluginReport struct {
	// Name is the plugin's name in the deployment.
	Name string
	// Digest is the hex sha256 of the module.
	Digest string
	// ABI is the plugin's ABI (config.ABIs).
	ABI string
	// ABIVersion is the dsh ABI's version it was built for (a load
	// refuses any other than hostfns.ABIVersion); 0 for the community
	// ABIs.
	ABIVersion int
	// Sections are the prompt sections it registered.
	Sections []hostfns.SectionRequest
	// Variables are the names of the variables it provides.
	Variables []string
	// Tools are the tools it registered.
	Tools []prompt.Tool
	// Subscriptions are its event subscriptions (hooks).
	Subscriptions []hostfns.SubscribeRequest
	// Capabilities are the needs it declared (fs, exec, net, env...).
	Capabilities hostfns.Capabilities
	// Bounds are the limits it runs under and its quota use.
	Bounds PluginBounds
	// PromptOrder is the range of orders its sections may take.
	PromptOrder [2]int
	// Events are the event kinds it was granted.
	Events []string
	// Dangling are the variables its sections reference that nobody
	// provides.
	Dangling []prompt.Dangling
}

// LoadPlugin loads one more plugin into the deployment and reports on it.
// With spec.Inspect it loads as `dsh-wasm plugin inspect` does: a
// refusal for its needs is reported (PluginReport.Capabilities against
// the grants), not returned.
func (d *Deployment) LoadPlugin(ctx context.Context, spec PluginSpec) (*PluginReport, error) {
	p, err := d.host.Load(ctx, spec.spec())
	if err != nil {
		return nil, err
	}
	c := p.Contribution()
	lo, hi := p.PromptOrder()
	version := 0
	if p.ABI() == plugin.ABIDsh {
		version = hostfns.ABIVersion
	}
	return &PluginReport{ABIVersion: version, Name: p.Name(), Digest: p.Digest(), ABI: p.ABI(),
		Sections: c.Sections, Variables: c.Variables, Tools: c.Tools, Subscriptions: c.Subscriptions,
		Capabilities: p.Capabilities(), Bounds: PluginBounds(p.Bounds()), PromptOrder: [2]int{lo, hi},
		Events: p.GrantedEvents(), Dangling: p.Dangling()}, nil
}

// CallTool calls the tool name, of whichever plugin or embedder
// registered it, for agent, with args (JSON), outside any session: what
// `dsh-wasm plugin call` does.
func (d *Deployment) CallTool(ctx context.Context, agent *prompt.AgentFacts, name string, args []byte) (tool.Result, error) {
	return d.host.CallTool(ctx, agent, name, args)
}

// PluginRender is one plugin's part of the prompt, rendered for one
// agent: its variables' values (nil when a variable has none) and its
// sections, each rendered alone so that one bad section does not hide
// the others.
type PluginRender struct {
	// Variables are the values of its variables, nil for one with none.
	Variables map[string]*string `json:"variable_values"`
	// Sections are its sections, each rendered alone.
	Sections []RenderedSection `json:"rendered_sections"`
}

// RenderedSection is one section of a PluginRender; Error says why it
// did not render.
type RenderedSection struct {
	// Name is the section's name.
	Name string `json:"name"`
	// Text is the section rendered, empty when it failed.
	Text string `json:"text,omitempty"`
	// Error says why the section did not render.
	Error string `json:"error,omitempty"`
}

// RenderPlugin assembles the prompt for agent and renders the loaded
// plugin name's own variables and sections. A prompt that does not
// assemble is an error (ErrPluginBadOutput when a plugin's output is
// at fault).
func (d *Deployment) RenderPlugin(ctx context.Context, name string, agent *prompt.AgentFacts) (*PluginRender, error) {
	p := d.host.Plugin(name)
	if p == nil {
		return nil, fmt.Errorf("deploy: render plugin %q: no such plugin", name)
	}
	a, err := d.reg.Assemble(prompt.WithAgent(ctx, agent), prompt.AssembleContext{Agent: agent})
	if err != nil {
		return nil, fmt.Errorf("assemble the prompt: %w", err)
	}
	c := p.Contribution()
	r := &PluginRender{Variables: map[string]*string{}, Sections: []RenderedSection{}}
	for _, v := range c.Variables {
		if val, ok := a.Variables[v]; ok && val.OK {
			r.Variables[v] = &val.Text
		} else {
			r.Variables[v] = nil
		}
	}
	own := map[string]bool{}
	for _, s := range c.Sections {
		own[s.Name] = true
	}
	for _, s := range a.Sections {
		if !own[s.Name] {
			continue
		}
		text, err := prompt.RenderText(s.Name, s.Text, a.Variables)
		rs := RenderedSection{Name: s.Name, Text: text}
		if err != nil {
			rs.Text, rs.Error = "", err.Error()
		}
		r.Sections = append(r.Sections, rs)
	}
	return r, nil
}

// ExecEnforcement is what this machine holds a plugin's commands to
// under the default exec limits, apart from the kill mode.
type ExecEnforcement struct {
	// Mode is the kill mode: "pid-namespace", "cgroup-v2" or
	// "process-group", strongest first.
	Mode string `json:"mode"`
	// Processes caps the processes a command may run.
	Processes ExecBound `json:"processes"`
	// Memory caps a command's memory.
	Memory ExecBound `json:"memory"`
	// FileBytes caps the size of a file a command writes.
	FileBytes ExecBound `json:"file_bytes"`
	// Capabilities says what commands keep of the agent's privileges.
	Capabilities string `json:"capabilities"`
	// AgentProc says whether commands can read the agent's /proc entries.
	AgentProc string `json:"agent_proc"`
	// Scope says how abstract Unix sockets and signals are scoped
	// (Landlock), or why they are not.
	Scope string `json:"scope"`
}

// ExecBound is one limit on commands and how it is enforced.
type ExecBound struct {
	// Limit is the limit's value.
	Limit int64 `json:"limit"`
	// By names the mechanism ("cgroup v2 pids.max", "RLIMIT_FSIZE");
	// empty when the limit is not enforced on this system.
	By string `json:"by,omitempty"`
	// Unenforced says why, when By is empty.
	Unenforced string `json:"unenforced,omitempty"`
}

// ExecEnforced reports what this machine enforces on plugins' commands.
func ExecEnforced() ExecEnforcement {
	e := plugin.ExecEnforced()
	return ExecEnforcement{Mode: e.Mode, Processes: ExecBound(e.Processes), Memory: ExecBound(e.Memory),
		FileBytes: ExecBound(e.FileBytes), Capabilities: e.Capabilities, AgentProc: e.AgentProc, Scope: e.Scope}
}

// The plugin host is not API: an embedder loads plugins with
// Options.Plugins and looks at them with LoadPlugin, RenderPlugin and
// CallTool. Tests inside the module reach it through plugin.HostOf.
func init() {
	plugin.HostOf = func(deployment any) *plugin.Host {
		if d, ok := deployment.(*Deployment); ok {
			return d.host
		}
		return nil
	}
}
