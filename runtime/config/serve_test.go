package config

import (
	"strings"
	"testing"
	"time"
)

// The store and serve sections decode, with defaults, and the secrets
// they need are named by environment variable only.
func TestServeAndStoreSections(t *testing.T) {
	dep, err := DecodeDeployment("d.yaml", "/srv", []byte(`model: m
store: {dsn_env: DSH_DB, lease_ttl: 5s}
serve: {workspaces: ws, tokens_env: DSH_TOKENS, max_turns: 9}
`))
	if err != nil {
		t.Fatal(err)
	}
	if dep.Store == nil || dep.Store.DSNEnv != "DSH_DB" || dep.Store.LeaseTTL != 5*time.Second {
		t.Errorf("store %+v", dep.Store)
	}
	if s := dep.Serve; s == nil || s.Workspaces != "/srv/ws" || s.TokensEnv != "DSH_TOKENS" || s.MaxTurns != 9 || s.MaxTenantTurns != DefaultMaxTenantTurns {
		t.Errorf("serve %+v", dep.Serve)
	}
	for _, c := range []struct{ doc, want string }{
		{"store: {lease_ttl: 5s}", "dsn_env"},
		{"store: {dsn_env: 'postgres://u:pw@h/db'}", "not an environment variable name"},
		{"store: {dsn: 'postgres://u:pw@h/db', dsn_env: X}", "dsn"},
		{"store: {dsn_env: X, lease_ttl: 10ms}", "below 300ms"},
		{"serve: {tokens_env: T}", "workspaces"},
		{"serve: {workspaces: /w}", "exactly one of tokens_file and tokens_env"},
		{"serve: {workspaces: /w, tokens_env: T, tokens_file: f}", "exactly one of tokens_file and tokens_env"},
		{"serve: {workspaces: /w, tokens_env: T, max_turns: 0}", "max_turns"},
	} {
		_, err := DecodeDeployment("d.yaml", "/srv", []byte("model: m\n"+c.doc+"\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", c.doc, err, c.want)
		}
	}
}
