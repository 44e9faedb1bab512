package config

import (
	"slices"
	"testing"
)

// The settings that name secrets are listed in one place, and a DSN's
// password is a secret of its own: an error may quote it without the
// rest of the DSN. Unset and empty variables give nothing.
func TestSecrets(t *testing.T) {
	d, err := DecodeDeployment("dsh.yml", t.TempDir(), []byte(`model: m
store: {dsn_env: MY_DSN}
serve: {workspaces: /srv/ws, tokens_env: MY_TOKENS}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := d.SecretEnv(); !slices.Equal(got, []string{DefaultAPIKeyEnv, "MY_DSN", "MY_TOKENS"}) {
		t.Errorf("SecretEnv = %v", got)
	}
	for _, c := range []struct{ dsn, pw string }{
		{"postgres://u:p%40ss%20word@h:5432/db", "p@ss word"},
		{"host=h user=u password=plainpass dbname=db", "plainpass"},
		{"host=h password = 'it\\'s secret' user=u", "it's secret"},
		{"host=h user=u dbname=db", ""},
	} {
		env := map[string]string{DefaultAPIKeyEnv: "sk-key", "MY_DSN": c.dsn, "MY_TOKENS": ""}
		got := d.Secrets(func(n string) (string, bool) { v, ok := env[n]; return v, ok })
		want := []string{"sk-key", c.dsn}
		if c.pw != "" {
			want = append(want, c.pw)
		}
		if !slices.Equal(got, want) {
			t.Errorf("DSN %q: Secrets = %q, want %q", c.dsn, got, want)
		}
	}
}
