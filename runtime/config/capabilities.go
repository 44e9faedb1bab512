package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/netguard"
)

// NotGrantedError names one missing grant and the YAML that would add it.
type NotGrantedError struct {
	Plugin string
	Grant  string // e.g. net.allowed_hosts
	Value  string // e.g. api.github.com; empty for exec
	Fix    string // e.g. add under grants.net.allowed_hosts: - api.github.com
}

func (e *NotGrantedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "plugin %q needs grant %s", e.Plugin, e.Grant)
	if e.Value != "" {
		fmt.Fprintf(&b, " %q", e.Value)
	}
	b.WriteString(": ")
	b.WriteString(e.Fix)
	return b.String()
}

// Unwrap makes errors.Is(err, ErrNotGranted) hold.
func (e *NotGrantedError) Unwrap() error { return ErrNotGranted }

// Check reports every capability in c, the needs the plugin named plugin
// declared (its one Go type is the wire shape, hostfns.Capabilities;
// net lists host patterns in netguard syntax, an fs mode is ModeRO when
// empty), that g does not grant, as
// *NotGrantedError values joined with errors.Join (nil when all are
// granted). A malformed declaration fails with ErrInvalidCapabilities.
//
// Coverage rules: an fs path is covered by a grant of the same path or of
// an ancestor directory, with rw covering ro (the word workspace is only
// covered by workspace, since it is resolved later); a net pattern is
// covered when every host:port it names is allowed (a pattern without a
// port needs a grant without a port); exec needs exec.allowed; env names
// must be listed exactly.
func (g Grants) Check(plugin string, c hostfns.Capabilities) error {
	var errs []error
	missing := func(grant, value, fix string) {
		errs = append(errs, &NotGrantedError{Plugin: plugin, Grant: grant, Value: value, Fix: fix})
	}
	invalid := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("plugin %q: %w: %s", plugin, ErrInvalidCapabilities, fmt.Sprintf(format, args...)))
	}

	for _, want := range c.FS {
		mode := FSMode(want.Mode)
		if mode == "" {
			mode = ModeRO
		}
		if msg := checkFSPath(want.Path); msg != "" {
			invalid("fs path: %s", msg)
			continue
		}
		if msg := checkMode(mode); msg != "" {
			invalid("fs %q: %s", want.Path, msg)
			continue
		}
		path := normalizeFSPath(want.Path)
		covered, readOnlyOnly := false, false
		for _, have := range g.FS {
			if !pathCovers(normalizeFSPath(have.Path), path) {
				continue
			}
			if mode == ModeRO || have.Mode == ModeRW {
				covered = true
				break
			}
			readOnlyOnly = true
		}
		if covered {
			continue
		}
		value := fmt.Sprintf("%s (%s)", path, mode)
		if readOnlyOnly {
			missing("fs", value, fmt.Sprintf("it is granted read-only; set mode: rw on its grants.fs entry, or add under grants.fs: - {path: %s, mode: rw}", yamlScalar(path)))
		} else {
			missing("fs", value, fmt.Sprintf("add under grants.fs: - {path: %s, mode: %s}", yamlScalar(path), mode))
		}
	}

	if c.Exec && !g.Exec.Allowed {
		missing("exec", "", "add under grants.exec: allowed: true")
	}

	if len(c.Net) > 0 {
		allow, err := netguard.ParseAllowlist(g.Net.AllowedHosts)
		if err != nil {
			errs = append(errs, &Error{Field: "grants.net.allowed_hosts", Msg: err.Error()})
		} else {
			for _, host := range c.Net {
				ok, err := allow.Covers(host)
				if err != nil {
					invalid("net: %v", err)
					continue
				}
				if !ok {
					missing("net.allowed_hosts", host, "add under grants.net.allowed_hosts: - "+yamlScalar(host))
				}
			}
		}
	}

	for _, name := range c.Env {
		if msg := checkEnvName(name); msg != "" {
			invalid("env: %s", msg)
			continue
		}
		if !contains(g.Env, name) {
			missing("env", name, "add under grants.env: - "+yamlScalar(name))
		}
	}

	for _, typ := range c.SessionEvents {
		if msg := CheckSessionEventType(typ); msg != "" {
			invalid("session_events: %s", msg)
			continue
		}
		if !contains(g.SessionEvents, typ) {
			missing("session_events", typ, "add under grants.session_events: - "+yamlScalar(typ))
		}
	}
	return errors.Join(errs...)
}

// pathCovers reports whether granted (Workspace or a clean absolute path)
// includes want, lexically.
func pathCovers(granted, want string) bool {
	if granted == Workspace || want == Workspace {
		return granted == want
	}
	if granted == want {
		return true
	}
	rel, err := filepath.Rel(granted, want)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// yamlScalar renders s as a YAML flow scalar, quoted when needed
// ("*.github.com" must be quoted, api.github.com need not).
func yamlScalar(s string) string {
	out, err := yaml.Marshal(s)
	if err != nil {
		return fmt.Sprintf("%q", s)
	}
	return strings.TrimSuffix(string(out), "\n")
}
