package plugin

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/execjail"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/fsjail"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/netguard"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/tetratelabs/wazero"
)

// SpecFromEntry turns a config entry into a Spec: the plugin's config
// and its grants, limits and environment included. name may be empty.
// The grants are resolved when the plugin loads, as for any Spec.
func SpecFromEntry(name string, e config.Entry) (Spec, error) {
	if err := e.Validate(); err != nil {
		return Spec{}, err
	}
	cfg, err := e.ConfigJSON()
	if err != nil {
		return Spec{}, err
	}
	g := e.Grants
	return Spec{Name: name, Source: e.Source, SHA256: e.SHA256, Config: cfg, Grants: &g, ABI: e.ABI}, nil
}

// checkGrants decides whether declared needs are covered by the grants.
func checkGrants(name string, g *config.Grants, c hostfns.Capabilities) error {
	return g.Check(name, c)
}

// sandbox holds what a plugin's grants give it at run time.
type sandbox struct {
	grants *config.Grants
	net    *netguard.Fetcher
	// quota bounds what the plugin adds to the disk, through every jail
	// of its instances and through files the host writes for it.
	quota *fsjail.Quota
}

func (p *Plugin) openSandbox() error {
	g := p.spec.Grants
	if g == nil {
		return nil
	}
	p.sandbox.grants = g
	if len(g.FS) > 0 {
		p.sandbox.quota = fsjail.NewQuota(g.Limits.DiskQuota())
	}
	if len(g.Net.AllowedHosts) > 0 {
		f, err := netguard.New(netguard.Options{AllowedHosts: g.Net.AllowedHosts,
			MaxResponseBytes: int64(g.Net.ResponseBytes), AllowPrivateAddresses: g.Net.AllowPrivate, Timeout: g.Net.Timeout})
		if err != nil {
			return fmt.Errorf("grants.net: %w", err)
		}
		p.sandbox.net = f
	}
	return nil
}

func (p *Plugin) closeSandbox() {
	if p.sandbox.net != nil {
		p.sandbox.net.Close()
	}
	p.mu.Lock()
	mgrs := p.execs
	p.execs = nil
	p.mu.Unlock()
	for _, m := range mgrs {
		m.Close()
	}
}

// fsRoots resolves the fs grants for an agent; "workspace" is its cwd and
// is left out when the agent has none (the load-time instance, say).
func (p *Plugin) fsRoots(facts *prompt.AgentFacts) ([]fsjail.Mount, error) {
	g := p.sandbox.grants
	if g == nil {
		return nil, nil
	}
	var mounts []fsjail.Mount
	for _, fg := range g.FS {
		cwd := ""
		if facts != nil {
			cwd = facts.Cwd
		}
		if fg.Path == config.Workspace && cwd == "" {
			continue
		}
		host, err := fg.Resolve(cwd)
		if err != nil {
			return nil, fmt.Errorf("grants.fs %q: %w", fg.Path, err)
		}
		host = filepath.Clean(host)
		if err := p.h.hostState.check(fmt.Sprintf("grants.fs %q", fg.Path), host, cwd); err != nil {
			return nil, err
		}
		var dir *os.Root
		if fg.Path == config.Workspace {
			if dir, err = p.workspaceDir(facts, host); err != nil {
				return nil, fmt.Errorf("grants.fs %q: %w", fg.Path, err)
			}
		}
		if i := slices.IndexFunc(mounts, func(m fsjail.Mount) bool { return m.HostPath == host }); i >= 0 {
			if dir != nil {
				mounts[i].Dir = dir // the workspace by its descriptor, whichever grant named it first
			}
			continue
		}
		// The guest sees each root at its own host path, so the absolute
		// paths a model uses mean the same inside and out.
		mounts = append(mounts, fsjail.Mount{HostPath: host, GuestPath: host, ReadOnly: fg.Mode != config.ModeRW, Dir: dir})
	}
	return mounts, nil
}

// workspaceDir is the opened directory bound to the agent (BindWorkdir)
// for its `workspace` grant, shown at cwd; nil when none is bound, and
// the grant is then opened by its path as the jail is made.
func (p *Plugin) workspaceDir(facts *prompt.AgentFacts, cwd string) (*os.Root, error) {
	if p.h == nil {
		return nil, nil
	}
	d := p.h.workdirs.get(facts.ID)
	if d == nil {
		return nil, nil
	}
	if d.Name() != cwd {
		return nil, fmt.Errorf("the agent's cwd %q is not its opened working directory %q", cwd, d.Name())
	}
	r := d.Root()
	if r == nil {
		return nil, fmt.Errorf("the working directory %s was closed", cwd)
	}
	return r, nil
}

// jailFor builds the filesystem an instance sees, or nil without fs grants.
func (p *Plugin) jailFor(facts *prompt.AgentFacts) (*fsjail.Jail, error) {
	mounts, err := p.fsRoots(facts)
	if err != nil || len(mounts) == 0 {
		return nil, err
	}
	j, err := fsjail.New(mounts, fsjail.WithQuota(p.sandbox.quota), fsjail.WithHidden(p.hiddenFor(facts, mounts)...))
	if err != nil {
		return nil, fmt.Errorf("grants.fs: %w", err)
	}
	return j, nil
}

// hiddenFor is what the jails of an agent, with mounts, hide: the host's
// state inside them.
func (p *Plugin) hiddenFor(facts *prompt.AgentFacts, mounts []fsjail.Mount) []string {
	cwd := ""
	if facts != nil {
		cwd = facts.Cwd
	}
	roots := make([]string, len(mounts))
	for i, m := range mounts {
		roots[i] = m.HostPath
	}
	return p.h.hostState.hiddenFor(cwd, roots)
}

// diskQuota is the plugin's disk quota (grants.limits.disk_bytes and
// disk_files), or nil without fs grants. Host code that writes a file for
// the plugin, such as saved command output, charges it here first.
func (p *Plugin) diskQuota() *fsjail.Quota { return p.sandbox.quota }

func withJail(cfg wazero.ModuleConfig, j *fsjail.Jail) wazero.ModuleConfig {
	if j == nil {
		return cfg
	}
	return cfg.WithFSConfig(j.FSConfig())
}

// ExecEnforcement says what commands run under an exec grant are held to
// on this system: how a command is killed, and for each resource limit
// whether and by what it is enforced. `dsh-wasm plugin inspect` prints it.
type ExecEnforcement struct {
	// Mode is the kill mode: "pid-namespace", "cgroup-v2" or
	// "process-group", strongest first.
	Mode      string    `json:"mode"`
	Processes ExecBound `json:"processes"`
	Memory    ExecBound `json:"memory"`
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
	Limit int64 `json:"limit"`
	// By names the mechanism ("cgroup v2 pids.max", "RLIMIT_FSIZE");
	// empty when the limit is not enforced on this system.
	By string `json:"by,omitempty"`
	// Unenforced says why, when By is empty.
	Unenforced string `json:"unenforced,omitempty"`
}

// ExecEnforced reports what commands are held to on this system with the
// default exec limits.
func ExecEnforced() ExecEnforcement {
	e := execjail.Enforced()
	bound := func(b execjail.Bound) ExecBound { return ExecBound(b) }
	return ExecEnforcement{Mode: string(e.Mode), Processes: bound(e.Processes), Memory: bound(e.Memory),
		FileBytes: bound(e.FileBytes), Capabilities: e.Capabilities, AgentProc: e.AgentProc, Scope: e.Scope}
}
