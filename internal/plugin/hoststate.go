package plugin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// ErrHostState: a grant, a working directory or a tenant root lies inside
// the host's own state.
var ErrHostState = errors.New("inside the host's own state")

// HostState is the host's own state on disk: the directories no plugin is
// granted, runs in, or sees. The host keeps one, made by New from its
// Options.HostState and its Cache's directory; every fs jail and exec
// jail it builds gets its list (hiddenFor), and every root it resolves is
// checked against it (check). A session's cwd is checked at open by the
// deployment, through Host.CheckHostState.
//
// A root inside host state is refused with ErrHostState, naming both
// paths. A root that holds host state has it hidden: the fs jail does not
// show it (fsjail.WithHidden), bwrap covers it with an empty read-only
// tmpfs, and so does the exec launch helper in the PID namespace mode
// (execjail.Options.Hidden).
type HostState struct {
	// Dirs are the host's state directories: the session store's, say.
	// The host adds its compile cache's directory itself.
	Dirs []string
	// Tenants, when set, holds each tenant's workspace root (serve): for
	// an agent whose cwd lies in one tenant's root, every other entry of
	// Tenants is host state.
	Tenants string
}

// resolved is s with every path absolute, clean, and also in its
// symlink-free form when that differs.
func (s HostState) resolved(cacheDir string) HostState {
	var out HostState
	add := func(p string) {
		if p == "" {
			return
		}
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		out.Dirs = append(out.Dirs, p)
		if real, err := filepath.EvalSymlinks(p); err == nil && real != p {
			out.Dirs = append(out.Dirs, real)
		}
	}
	for _, d := range s.Dirs {
		add(d)
	}
	add(cacheDir)
	if s.Tenants != "" {
		out.Tenants, _ = filepath.Abs(s.Tenants)
		if real, err := filepath.EvalSymlinks(out.Tenants); err == nil {
			out.Tenants = real
		}
	}
	slices.Sort(out.Dirs)
	out.Dirs = slices.Compact(out.Dirs)
	return out
}

// within reports whether path is dir or lies below it.
func within(dir, path string) bool {
	if dir == path || dir == string(filepath.Separator) {
		return true
	}
	return strings.HasPrefix(path, strings.TrimSuffix(dir, string(filepath.Separator))+string(filepath.Separator))
}

// holding returns the host-state directory path lies in, for an agent
// whose cwd is cwd, or "". path is checked as given and with its symlinks
// resolved.
func (s HostState) holding(path, cwd string) string {
	forms := []string{filepath.Clean(path)}
	if real, err := filepath.EvalSymlinks(path); err == nil && real != forms[0] {
		forms = append(forms, real)
	}
	for _, p := range forms {
		for _, d := range s.Dirs {
			if within(d, p) {
				return d
			}
		}
		if t := s.otherTenant(p, cwd); t != "" {
			return t
		}
	}
	return ""
}

// tenantOf is the tenant root of Tenants that path lies in, or "".
func (s HostState) tenantOf(path string) string {
	if s.Tenants == "" || path == "" {
		return ""
	}
	forms := []string{filepath.Clean(path)}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		forms = append(forms, real)
	}
	for _, p := range forms {
		if rel, err := filepath.Rel(s.Tenants, p); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			return filepath.Join(s.Tenants, strings.SplitN(rel, string(filepath.Separator), 2)[0])
		}
	}
	return ""
}

// otherTenant is the root of the tenant path lies in, when that is not
// the tenant of cwd; "" otherwise.
func (s HostState) otherTenant(path, cwd string) string {
	t := s.tenantOf(path)
	if t == "" || t == s.tenantOf(cwd) {
		return ""
	}
	return t
}

// check refuses a root (what names it, and its host path) that lies inside
// host state.
func (s HostState) check(what, path, cwd string) error {
	if d := s.holding(path, cwd); d != "" {
		return fmt.Errorf("%w: %s %s lies inside %s", ErrHostState, what, path, d)
	}
	return nil
}

// hiddenFor lists what the jails of an agent with cwd, granted roots,
// hide: the host's state directories, and with Tenants every other
// tenant's root (read when the jail is made), that lie inside one of the
// roots (as given or with symlinks resolved); the others are out of the
// jails' view anyway.
func (s HostState) hiddenFor(cwd string, roots []string) []string {
	var forms []string
	for _, r := range roots {
		forms = append(forms, r)
		if real, err := filepath.EvalSymlinks(r); err == nil && real != r {
			forms = append(forms, real)
		}
	}
	var hidden []string
	add := func(p string) {
		if slices.ContainsFunc(forms, func(r string) bool { return within(r, p) }) {
			hidden = append(hidden, p)
		}
	}
	for _, d := range s.Dirs {
		add(d)
	}
	if s.Tenants == "" || !slices.ContainsFunc(forms, func(r string) bool { return within(r, s.Tenants) }) {
		return hidden
	}
	own := s.tenantOf(cwd)
	ents, _ := os.ReadDir(s.Tenants)
	for _, e := range ents {
		if p := filepath.Join(s.Tenants, e.Name()); p != own {
			add(p)
		}
	}
	return hidden
}

// CheckHostState refuses a session's working directory that lies inside
// the host's own state (its compile cache, its session store, or, in
// serve, a tenant root other than the one it belongs to), with an error
// naming both paths. The deployment calls it when a session opens.
func (h *Host) CheckHostState(cwd string) error {
	if cwd == "" {
		return nil
	}
	return h.hostState.check("cwd", cwd, cwd)
}

// HostStateDirs lists the host's state directories (for inspection).
func (h *Host) HostStateDirs() []string { return slices.Clone(h.hostState.Dirs) }

// cwdOf is an agent's cwd, "" without one.
func cwdOf(facts *prompt.AgentFacts) string {
	if facts == nil {
		return ""
	}
	return facts.Cwd
}
