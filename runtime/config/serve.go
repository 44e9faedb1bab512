package config

import (
	"net/url"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Store selects where sessions persist. Without it sessions are JSONL
// files under the sessions directory.
type Store struct {
	// DSNEnv names the environment variable holding the PostgreSQL DSN;
	// the DSN (and its password) never goes in this file or in argv.
	DSNEnv string `json:"dsn_env"`
	// LeaseTTL is how long a dead worker keeps a session; 0 is the
	// store's default.
	LeaseTTL time.Duration `json:"lease_ttl,omitempty"`
}

// Serve configures `dsh-wasm serve`.
type Serve struct {
	// Workspaces is the absolute directory under which each tenant has
	// its workspace root, Workspaces/TENANT; every session's cwd lies
	// inside its tenant's root.
	Workspaces string `json:"workspaces"`
	// TokensFile or TokensEnv holds the token-to-tenant map, a JSON object
	// {"TOKEN": "TENANT", ...}; exactly one is set.
	TokensFile string `json:"tokens_file,omitempty"`
	TokensEnv  string `json:"tokens_env,omitempty"`
	// MaxTurns bounds the turns running at once on one worker, and
	// MaxTenantTurns those of one tenant on one worker; beyond them a
	// prompt is answered 429. 0 takes the defaults.
	MaxTurns       int `json:"max_turns,omitempty"`
	MaxTenantTurns int `json:"max_tenant_turns,omitempty"`
}

// Defaults of Serve.
const (
	DefaultMaxTurns       = 256
	DefaultMaxTenantTurns = 32
)

func (d *decoder) store(n *yaml.Node, field string) *Store {
	s := &Store{}
	d.fields(n, field, map[string]func(*yaml.Node, string){
		"dsn_env": func(v *yaml.Node, f string) {
			if str, ok := d.str(v, f); ok {
				if msg := checkEnvName(str); msg != "" {
					d.fail(v, f, "%s (name the environment variable that holds the DSN; the DSN never goes in this file)", msg)
				}
				s.DSNEnv = str
			}
		},
		"lease_ttl": func(v *yaml.Node, f string) {
			s.LeaseTTL = d.duration(v, f)
			if s.LeaseTTL != 0 && s.LeaseTTL < 300*time.Millisecond {
				d.fail(v, f, "lease_ttl %s is below 300ms", s.LeaseTTL)
			}
		},
	})
	if s.DSNEnv == "" {
		d.fail(n, join(field, "dsn_env"), "missing (the environment variable holding the PostgreSQL DSN)")
	}
	return s
}

func (d *decoder) serve(n *yaml.Node, field, dir string) *Serve {
	s := &Serve{}
	d.fields(n, field, map[string]func(*yaml.Node, string){
		"workspaces": func(v *yaml.Node, f string) {
			if str, ok := d.str(v, f); ok {
				p, msg := resolvePath(str, dir)
				if msg != "" {
					d.fail(v, f, "%s", msg)
				}
				s.Workspaces = p
			}
		},
		"tokens_file": func(v *yaml.Node, f string) {
			if str, ok := d.str(v, f); ok {
				p, msg := resolvePath(str, dir)
				if msg != "" {
					d.fail(v, f, "%s", msg)
				}
				s.TokensFile = p
			}
		},
		"tokens_env": func(v *yaml.Node, f string) {
			if str, ok := d.str(v, f); ok {
				if msg := checkEnvName(str); msg != "" {
					d.fail(v, f, "%s", msg)
				}
				s.TokensEnv = str
			}
		},
		"max_turns": func(v *yaml.Node, f string) {
			if i, ok := d.integer(v, f, 1, 1_000_000); ok {
				s.MaxTurns = i
			}
		},
		"max_tenant_turns": func(v *yaml.Node, f string) {
			if i, ok := d.integer(v, f, 1, 1_000_000); ok {
				s.MaxTenantTurns = i
			}
		},
	})
	if s.Workspaces == "" {
		d.fail(n, join(field, "workspaces"), "missing (the directory holding each tenant's workspace root)")
	}
	if (s.TokensFile == "") == (s.TokensEnv == "") {
		d.fail(n, field, "set exactly one of tokens_file and tokens_env (the token-to-tenant map; never in argv)")
	}
	if s.MaxTurns == 0 {
		s.MaxTurns = DefaultMaxTurns
	}
	if s.MaxTenantTurns == 0 {
		s.MaxTenantTurns = DefaultMaxTenantTurns
	}
	return s
}

// SecretEnv lists the environment variables the deployment names whose
// values are secrets: the provider's key (provider.api_key_env), the
// store's DSN (store.dsn_env) and serve's token map (serve.tokens_env).
// This file is the one place that says which settings name secrets.
func (d *Deployment) SecretEnv() []string {
	var names []string
	if d.Provider.APIKeyEnv != "" {
		names = append(names, d.Provider.APIKeyEnv)
	}
	if d.Store != nil && d.Store.DSNEnv != "" {
		names = append(names, d.Store.DSNEnv)
	}
	if d.Serve != nil && d.Serve.TokensEnv != "" {
		names = append(names, d.Serve.TokensEnv)
	}
	return names
}

// Secrets returns the secret values the variables of SecretEnv hold, read
// with lookup (os.LookupEnv when nil): each value, and a DSN's password,
// which an error may quote alone. The tokens of serve's map are parsed
// where the map is (cmd serve), which adds them.
func (d *Deployment) Secrets(lookup func(string) (string, bool)) []string {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var out []string
	for _, name := range d.SecretEnv() {
		v, ok := lookup(name)
		if !ok || v == "" {
			continue
		}
		out = append(out, v)
		if d.Store != nil && name == d.Store.DSNEnv {
			if pw := dsnPassword(v); pw != "" {
				out = append(out, pw)
			}
		}
	}
	return out
}

// dsnPassword is the password of a PostgreSQL DSN, a URL
// (postgres://user:PASSWORD@host/db) or keyword/value pairs
// (password=PASSWORD or password='PASS WORD'); empty when it has none.
func dsnPassword(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			return pw
		}
	}
	for rest := dsn; ; {
		i := strings.Index(rest, "password")
		if i < 0 {
			return ""
		}
		rest = strings.TrimLeft(rest[i+len("password"):], " ")
		if !strings.HasPrefix(rest, "=") {
			continue
		}
		rest = strings.TrimLeft(rest[1:], " ")
		if v, ok := strings.CutPrefix(rest, "'"); ok {
			var b strings.Builder
			for i := 0; i < len(v); i++ {
				switch {
				case v[i] == '\\' && i+1 < len(v):
					i++
					b.WriteByte(v[i])
				case v[i] == '\'':
					return b.String()
				default:
					b.WriteByte(v[i])
				}
			}
			return b.String()
		}
		if j := strings.IndexAny(rest, " \t"); j >= 0 {
			return rest[:j]
		}
		return rest
	}
}
