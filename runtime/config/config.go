// Package config decodes and checks one plugin's entry in a dsh-wasm
// configuration: where the plugin comes from, what configuration it gets, and
// what it is granted beyond pure computation.
//
//	source: builtin:fs            # or a path to a .wasm file
//	sha256: "sha256:<64 hex>"     # optional pin of the module bytes
//	config: {any: mapping}        # handed to the plugin as JSON
//	grants:
//	  fs:   [{path: workspace, mode: rw}, {path: /usr/share/dict}]
//	  exec: {allowed: true, timeout: 2m, max_timeout: 10m, output_bytes: 30000,
//	         env: [GOPATH, CI=1], sandbox: true}
//	  net:  {allowed_hosts: [api.github.com, "*.githubusercontent.com"],
//	         response_bytes: 5MiB, timeout: 30s, allow_private: false}
//	  env:  [GITHUB_TOKEN]
//	  limits: {memory: 128MiB, call_timeout: 30s, init_timeout: 10s,
//	           wall_timeout: 15m, host_bytes: 256MiB, prompt_bytes: 64KiB,
//	           log_bytes: 1MiB, state_bytes: 16MiB, max_registrations: 1024}
//	  prompt: {order: [100, 199]}  # where its sections may sit; default [1, max]
//	  events: [system-prompt/assemble]  # waterfalls it may join; none by default
//
// Deny by default: a plugin with no grants can only compute. Every grant is
// explicit; a missing section grants nothing, and the defaults below only
// bound what a granted capability may consume.
//
// Decoding is strict: unknown keys, duplicate keys, values of the wrong YAML
// type and malformed values are all refused, and every error names
// FILE:LINE and the field, e.g.
//
//	plugins.yaml:14: grants.fs[1].path: relative path "data" refused: use an absolute path or the word workspace
//
// Entry is a plain struct with yaml tags, so a larger file can embed it and
// decode it with yaml.v3: Entry implements yaml.Unmarshaler with the same
// strict, position-aware decoder (WithFile adds the file name to its errors).
// Check compares what a plugin declares it needs (Capabilities) with what it
// was granted and says which YAML line to add.
//
// What this package guarantees: a decoded Entry is well-formed, every limit
// is within its documented bounds, and defaults are filled in. What it does
// not do: it enforces nothing at run time (that is the plugin host's, the
// fsjail's, execjail's and netguard's job), does not resolve "workspace" or
// relative source paths, and does not read or verify the module file against
// its sha256 pin.
package config

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/defaults"
)

// Sentinel errors; test with errors.Is.
var (
	// ErrInvalidConfig marks every decoding and validation error.
	ErrInvalidConfig = errors.New("invalid plugin config")
	// ErrNotGranted marks a capability or request the grants do not cover.
	ErrNotGranted = errors.New("not granted")
	// ErrInvalidCapabilities marks a malformed capability declaration.
	ErrInvalidCapabilities = errors.New("invalid capability declaration")
)

// Defaults that Grants.Effective (and so Decode) fills in for zero
// fields. Each is defined once, in internal/defaults; these names are how
// the rest of the module and the docs refer to them.
const (
	DefaultExecTimeout     = defaults.ExecTimeout                // grants.exec.timeout
	DefaultExecMaxTimeout  = defaults.ExecMaxTimeout             // grants.exec.max_timeout
	DefaultExecOutputBytes = ByteSize(defaults.ExecOutputBytes)  // grants.exec.output_bytes, per stream
	DefaultExecProcesses   = defaults.ExecProcesses              // grants.exec.max_processes, all commands of a plugin in a session
	DefaultExecMemory      = ByteSize(defaults.ExecMemory)       // grants.exec.memory, all commands of a plugin in a session
	DefaultExecFileBytes   = ByteSize(defaults.ExecFileBytes)    // grants.exec.file_bytes, per file a command writes
	DefaultResponseBytes   = ByteSize(defaults.NetResponseBytes) // grants.net.response_bytes
	DefaultMemory          = ByteSize(defaults.Memory)           // grants.limits.memory
	DefaultCallTimeout     = defaults.CallTimeout                // grants.limits.call_timeout
	DefaultInitTimeout     = defaults.InitTimeout                // grants.limits.init_timeout
	// DefaultWallTimeout is grants.limits.wall_timeout: long enough for a
	// command of grants.exec.max_timeout to finish (Effective raises it
	// to max_timeout + WallSlack when that is longer).
	DefaultWallTimeout      = defaults.WallTimeout
	WallSlack               = defaults.WallSlack
	DefaultNetTimeout       = defaults.NetTimeout            // grants.net.timeout
	DefaultHostBytes        = ByteSize(defaults.HostBytes)   // grants.limits.host_bytes
	DefaultPromptBytes      = ByteSize(defaults.PromptBytes) // grants.limits.prompt_bytes
	DefaultLogBytes         = ByteSize(defaults.LogBytes)    // grants.limits.log_bytes, per minute
	DefaultStateBytes       = ByteSize(defaults.StateBytes)  // grants.limits.state_bytes, per session
	DefaultMaxRegistrations = defaults.Registrations         // grants.limits.max_registrations
)

// Bounds enforced by Validate (defined in internal/defaults).
const (
	MaxDuration      = defaults.MaxDuration              // any timeout
	MaxOutputBytes   = ByteSize(defaults.MaxOutputBytes) // grants.exec.output_bytes
	MaxProcesses     = defaults.MaxProcesses             // grants.exec.max_processes
	MinExecMemory    = ByteSize(defaults.MinExecMemory)  // grants.exec.memory (less cannot start a shell)
	MaxExecMemory    = ByteSize(defaults.MaxExecMemory)  // grants.exec.memory (1 PiB: "as much as the machine has")
	MaxFileBytes     = ByteSize(defaults.MaxFileBytes)   // grants.exec.file_bytes
	MaxResponse      = ByteSize(defaults.MaxResponse)    // grants.net.response_bytes
	MaxMemory        = ByteSize(defaults.MaxMemory)      // grants.limits.memory (the wasm32 maximum)
	MaxHostBytes     = ByteSize(defaults.MaxHostBytes)   // grants.limits.host_bytes
	MinHostBytes     = ByteSize(defaults.MinHostBytes)   // grants.limits.host_bytes
	MaxPromptBytes   = ByteSize(defaults.MaxPromptBytes) // grants.limits.prompt_bytes
	MaxLogBytes      = ByteSize(defaults.MaxLogBytes)    // grants.limits.log_bytes
	MaxStateBytes    = ByteSize(defaults.MaxStateBytes)  // grants.limits.state_bytes
	MaxRegistrations = defaults.MaxRegistrations         // grants.limits.max_registrations
	WasmPageSize     = ByteSize(defaults.WasmPageSize)
)

// Workspace is the fs grant path that stands for the agent's working
// directory, resolved by the plugin host.
const Workspace = "workspace"

// BuiltinPrefix marks a source compiled into the host.
const BuiltinPrefix = "builtin:"

// Entry is one plugin's configuration.
type Entry struct {
	// Source is "builtin:NAME" or a path to a Wasm module (a relative path
	// is relative to the file that holds the entry; the caller resolves it).
	Source string `yaml:"source"`
	// SHA256 optionally pins the module bytes: "sha256:" + 64 hex digits.
	SHA256 string `yaml:"sha256,omitempty"`
	// Config is passed to the plugin as a JSON object. Decode guarantees it
	// holds only JSON-compatible values: map[string]any, []any, string,
	// bool, int, int64, uint64, float64 and nil.
	Config map[string]any `yaml:"config,omitempty"`
	// Grants is everything the plugin may do beyond computing.
	Grants Grants `yaml:"grants,omitempty"`
	// ABI names the plugin's ABI: one of ABIs. Empty detects it from the
	// module's imports and exports.
	ABI string `yaml:"abi,omitempty"`
}

// ABIs are the plugin ABIs an entry may name: dsh:host/v1, and the
// community's Extism-based MCP tool ABIs (hyper-mcp v1 and v2, mcp.run
// servlets).
var ABIs = []string{"dsh", "hyper-mcp-v1", "hyper-mcp-v2", "mcp-run"}

// Grants lists the capabilities granted to a plugin.
type Grants struct {
	FS     []FSGrant `yaml:"fs,omitempty"`
	Exec   ExecGrant `yaml:"exec,omitempty"`
	Net    NetGrant  `yaml:"net,omitempty"`
	Env    []string  `yaml:"env,omitempty"` // host environment variables the plugin may read
	Limits Limits    `yaml:"limits,omitempty"`
	// SessionEvents are the session event types the plugin may append to
	// the calling agent's session (session_event_append), such as
	// "todo/write". Core types can never be granted: see
	// CheckSessionEventType.
	SessionEvents []string `yaml:"session_events,omitempty"`
	// Prompt bounds where the plugin's prompt sections may sit.
	Prompt PromptGrant `yaml:"prompt,omitempty"`
	// Events lists the waterfalls (system-prompt/assemble, agent/request,
	// tool/pre-execute, tool/post-execute, or a plugin's own event) the
	// plugin may join; a waterfall handler may rewrite what passes
	// through it. Plain listening needs no grant.
	Events []string `yaml:"events,omitempty"`
	// Subagents are the subagent providers (such as "spawn" and "fork")
	// the plugin may start children on with subagent_run, from a tool
	// call. A child has its own tools and grants: this grant reaches,
	// indirectly, everything a child can do.
	Subagents []string `yaml:"subagents,omitempty"`
}

// FSMode is the access an fs grant gives.
type FSMode string

// FS modes. An fs entry without a mode is read-only.
const (
	ModeRO FSMode = "ro"
	ModeRW FSMode = "rw"
)

// FSGrant gives access to a directory tree (or one file).
type FSGrant struct {
	// Path is Workspace or an absolute, cleaned path.
	Path string `yaml:"path"`
	Mode FSMode `yaml:"mode,omitempty"`
}

// Resolve returns the grant's host path, replacing Workspace by workspace.
func (f FSGrant) Resolve(workspace string) (string, error) {
	if f.Path != Workspace {
		return f.Path, nil
	}
	if !isAbs(workspace) {
		return "", fmt.Errorf("%w: workspace %q is not an absolute path", ErrInvalidConfig, workspace)
	}
	return cleanPath(workspace), nil
}

// ExecGrant allows running commands (see internal/sandbox/execjail).
type ExecGrant struct {
	Allowed bool `yaml:"allowed,omitempty"`
	// Timeout applies to a command that asks for none.
	Timeout time.Duration `yaml:"timeout,omitempty"`
	// MaxTimeout is the longest timeout a command may ask for.
	MaxTimeout time.Duration `yaml:"max_timeout,omitempty"`
	// OutputBytes caps stdout and stderr, each.
	OutputBytes ByteSize `yaml:"output_bytes,omitempty"`
	// Env adds to DefaultExecEnv: NAME passes the host's value (when set),
	// NAME=VALUE sets a fixed value. Nothing else reaches commands.
	Env []string `yaml:"env,omitempty"`
	// MaxProcesses bounds the processes and threads alive at once, for
	// all the plugin's commands in one session together (a cgroup pids
	// limit); a fork past it fails with EAGAIN.
	MaxProcesses int `yaml:"max_processes,omitempty"`
	// Memory bounds the memory of all the plugin's commands in one
	// session together (a cgroup memory limit); past it the kernel's OOM
	// killer kills one of them, reported as out_of_memory.
	Memory ByteSize `yaml:"memory,omitempty"`
	// FileBytes is the largest file a command may write or truncate to
	// (RLIMIT_FSIZE); past it the write fails with EFBIG.
	FileBytes ByteSize `yaml:"file_bytes,omitempty"`
	// Sandbox runs commands inside bubblewrap: the filesystem read-only
	// except rw fs grants, private /tmp, no network unless net is granted.
	// Without it, commands run with the agent's own file and network rights
	// and only their working directory, environment, time and output are
	// confined.
	Sandbox bool `yaml:"sandbox,omitempty"`
}

// NetGrant allows HTTP(S) requests (see internal/sandbox/netguard).
type NetGrant struct {
	// AllowedHosts are netguard host patterns: "api.example.com",
	// "*.example.com" (one or more labels, not the apex), "host:8443",
	// IP literals, or "*" for any host name.
	AllowedHosts []string `yaml:"allowed_hosts,omitempty"`
	// ResponseBytes caps a response body; longer bodies are truncated and
	// flagged to the plugin.
	ResponseBytes ByteSize `yaml:"response_bytes,omitempty"`
	// Timeout bounds one request, redirects and body included.
	Timeout time.Duration `yaml:"timeout,omitempty"`
	// AllowPrivate lets allowed host names resolve to loopback, private
	// and link-local addresses (intranet services). Off by default, so a
	// granted name cannot be pointed at the local machine or the cloud
	// metadata endpoint; granted IP literals are reachable either way.
	AllowPrivate bool `yaml:"allow_private,omitempty"`
}

// Limits bound the plugin's own execution. Zero fields take the defaults
// (see Grants.Effective).
type Limits struct {
	// Memory is the linear memory limit, rounded up to whole 64 KiB pages.
	Memory ByteSize `yaml:"memory,omitempty"`
	// CallTimeout is the compute budget of one call (guest code and the
	// host's work for it; waits bounded by exec or net timeouts excluded).
	CallTimeout time.Duration `yaml:"call_timeout,omitempty"`
	InitTimeout time.Duration `yaml:"init_timeout,omitempty"`
	// WallTimeout caps one call's wall-clock time, waits included.
	WallTimeout time.Duration `yaml:"wall_timeout,omitempty"`
	// HostBytes caps the bytes host functions read and produce for one
	// call.
	HostBytes ByteSize `yaml:"host_bytes,omitempty"`
	// PromptBytes caps the plugin's prompt text: static sections, tool
	// names, descriptions and schemas, and per assembly its dynamic
	// sections and variable values.
	PromptBytes ByteSize `yaml:"prompt_bytes,omitempty"`
	// LogBytes caps what the plugin logs per minute.
	LogBytes ByteSize `yaml:"log_bytes,omitempty"`
	// StateBytes caps the plugin's host-side state in one session.
	StateBytes ByteSize `yaml:"state_bytes,omitempty"`
	// DiskBytes and DiskFiles bound what the plugin adds to the disk
	// through its fs grants: bytes by file size (sparse holes count) and
	// files created. Unset means the default (Limits.DiskQuota).
	DiskBytes ByteSize `yaml:"disk_bytes,omitempty"`
	DiskFiles int      `yaml:"disk_files,omitempty"`
	// MaxRegistrations caps the plugin's sections + variables + tools +
	// subscriptions.
	MaxRegistrations int `yaml:"max_registrations,omitempty"`
	// Snapshot false makes every instance of the plugin initialise itself
	// instead of starting from an image of a freshly initialised one (see
	// docs/SECURITY.md: instances from one image share the random seeds
	// drawn during initialisation). Unset means true.
	Snapshot *bool `yaml:"snapshot,omitempty"`
}

// MemoryPages is the memory limit in 64 KiB Wasm pages, rounded up
// (DefaultMemory when unset).
func (l Limits) MemoryPages() uint32 {
	m := min(Grants{Limits: l}.Effective().Limits.Memory, MaxMemory)
	return uint32((uint64(m) + uint64(WasmPageSize) - 1) / uint64(WasmPageSize))
}

// Builtin returns NAME for a "builtin:NAME" source.
func (e Entry) Builtin() (string, bool) {
	name, ok := strings.CutPrefix(e.Source, BuiltinPrefix)
	return name, ok
}

// ApplyDefaults fills every unset limit with its documented default
// (e.Grants = e.Grants.Effective()).
func (e *Entry) ApplyDefaults() { e.Grants = e.Grants.Effective() }

// Effective returns g with every zero field that has a default filled in:
// the policy a plugin runs under, whether g was decoded from YAML or
// written in Go. It is the one place defaults are applied.
func (g Grants) Effective() Grants {
	withDefaults(&g)
	return g
}

// withDefaults fills g's zero fields with their defaults.
func withDefaults(g *Grants) {
	g.FS = slices.Clone(g.FS)
	for i := range g.FS {
		if g.FS[i].Mode == "" {
			g.FS[i].Mode = ModeRO
		}
	}
	if g.Exec.Timeout == 0 {
		g.Exec.Timeout = DefaultExecTimeout
	}
	if g.Exec.MaxTimeout == 0 {
		g.Exec.MaxTimeout = max(DefaultExecMaxTimeout, g.Exec.Timeout)
	}
	if g.Exec.OutputBytes == 0 {
		g.Exec.OutputBytes = DefaultExecOutputBytes
	}
	if g.Exec.MaxProcesses == 0 {
		g.Exec.MaxProcesses = DefaultExecProcesses
	}
	if g.Exec.Memory == 0 {
		g.Exec.Memory = DefaultExecMemory
	}
	if g.Exec.FileBytes == 0 {
		g.Exec.FileBytes = DefaultExecFileBytes
	}
	if g.Net.ResponseBytes == 0 {
		g.Net.ResponseBytes = DefaultResponseBytes
	}
	if g.Limits.Memory == 0 {
		g.Limits.Memory = DefaultMemory
	}
	if g.Limits.CallTimeout == 0 {
		g.Limits.CallTimeout = DefaultCallTimeout
	}
	if g.Limits.InitTimeout == 0 {
		g.Limits.InitTimeout = DefaultInitTimeout
	}
	if g.Net.Timeout == 0 {
		g.Net.Timeout = DefaultNetTimeout
	}
	if g.Limits.WallTimeout == 0 {
		g.Limits.WallTimeout = max(DefaultWallTimeout, g.Limits.CallTimeout, g.Limits.InitTimeout)
		if g.Exec.Allowed {
			g.Limits.WallTimeout = max(g.Limits.WallTimeout, g.Exec.MaxTimeout+WallSlack)
		}
	}
	if g.Limits.HostBytes == 0 {
		g.Limits.HostBytes = DefaultHostBytes
	}
	if g.Limits.PromptBytes == 0 {
		g.Limits.PromptBytes = DefaultPromptBytes
	}
	if g.Limits.LogBytes == 0 {
		g.Limits.LogBytes = DefaultLogBytes
	}
	if g.Limits.MaxRegistrations == 0 {
		g.Limits.MaxRegistrations = DefaultMaxRegistrations
	}
	if g.Limits.DiskBytes == 0 {
		g.Limits.DiskBytes = DefaultDiskBytes
	}
	if g.Limits.DiskFiles == 0 {
		g.Limits.DiskFiles = DefaultDiskFiles
	}
	if g.Limits.StateBytes == 0 {
		g.Limits.StateBytes = DefaultStateBytes
	}
}

// defaultExecEnv is what every command gets from the host environment when
// set: enough for tools to find binaries, a home directory, a locale, a
// terminal type and a time zone, and nothing that usually holds a secret.
var defaultExecEnv = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ"}

// DefaultExecEnv returns the variable names every command receives from the
// host environment (when set) without being listed in grants.exec.env:
// PATH, HOME, USER, LANG, LC_ALL, LC_CTYPE, TERM and TZ.
func DefaultExecEnv() []string { return append([]string(nil), defaultExecEnv...) }

// Environ builds the exact environment for commands: DefaultExecEnv and
// every NAME in Env taken from lookup (os.LookupEnv when nil) when set, then
// every NAME=VALUE in Env. Later entries override earlier ones; the result
// has one entry per name, in first-seen order.
func (e ExecGrant) Environ(lookup func(string) (string, bool)) []string {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var order []string
	values := map[string]string{}
	set := func(name, value string) {
		if _, seen := values[name]; !seen {
			order = append(order, name)
		}
		values[name] = value
	}
	for _, name := range defaultExecEnv {
		if v, ok := lookup(name); ok {
			set(name, v)
		}
	}
	for _, item := range e.Env {
		if name, value, ok := strings.Cut(item, "="); ok {
			set(name, value)
		} else if v, ok := lookup(item); ok {
			set(item, v)
		}
	}
	out := make([]string, 0, len(order))
	for _, name := range order {
		out = append(out, name+"="+values[name])
	}
	return out
}

// CommandTimeout returns the timeout for a command that asked for
// requested (0 = no preference): Timeout when 0, requested when within
// MaxTimeout, else an error wrapping ErrNotGranted. Unset fields count as
// their defaults.
func (e ExecGrant) CommandTimeout(requested time.Duration) (time.Duration, error) {
	r := Grants{Exec: e}.Effective().Exec
	def, limit := r.Timeout, r.MaxTimeout
	switch {
	case requested < 0:
		return 0, fmt.Errorf("%w: negative timeout %v", ErrNotGranted, requested)
	case requested == 0:
		return def, nil
	case requested > limit:
		return 0, fmt.Errorf("%w: timeout %v exceeds grants.exec.max_timeout %v", ErrNotGranted, requested, limit)
	}
	return requested, nil
}
