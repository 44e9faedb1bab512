package sandbox

import (
	"bytes"
	"encoding/json"
	"github.com/dsh-wasm/dsh-wasm/internal/deploytest"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync"

	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
	"github.com/dsh-wasm/dsh-wasm/runtime/redact"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

func init() { seamGroups = append(seamGroups, secretsAttacks) }

// secretKeyEnv holds the deployment's secret in these attacks: the
// variable a provider.api_key_env would name.
const secretKeyEnv = "HOSTILE_DEPLOYMENT_KEY"

// The seam: the deployment's secrets (the model key, the store's DSN,
// the bearer tokens) are known to the deployment, but text reaches the
// tenant, the model and the logs by many paths: a tool's error that the
// loop turns into a result for the model, the plugin's stdout and
// stderr, the turn's end. One Redactor owns them; every path goes
// through it.
func secretsAttacks() []hostileAttack {
	return []hostileAttack{
		{name: "secret-reflected-through-a-tool-error", run: func(e *env) string {
			// An operator granted the plugin the key's variable (its tool
			// calls the same API). The plugin fails with an error quoting
			// the key plainly, URL-encoded, in a JSON body and cut short,
			// and prints it: the model, the session and the log see the
			// marker. (A plugin granted a secret can always encode it in a
			// way no redactor knows; what is pinned here is that the
			// spellings an upstream's error carries are caught.)
			seen := e.secretTurn("env: [" + secretKeyEnv + "]")
			if !strings.Contains(seen, "upstream refused") || !strings.Contains(seen, redact.Marker) {
				e.t.Errorf("the model saw no redacted error: %.400s", seen)
			}
			return "the tool's error reached the model with the key redacted in each spelling an upstream uses"
		}},
		{name: "secret-ungranted-through-a-tool-error", run: func(e *env) string {
			// Not granted the variable, the plugin gets nothing to
			// reflect: env_get is denied and WASI has no such variable.
			seen := e.secretTurn()
			if !strings.Contains(seen, "env_get "+secretKeyEnv) || !strings.Contains(seen, "denied") {
				e.t.Errorf("env_get of the ungranted key was not refused: %.400s", seen)
			}
			return "env_get refused; the error carried no key"
		}},
	}
}

// secretTurn runs one turn of a deployment whose secret is in
// secretKeyEnv, with the attacker loaded with grants: the model calls
// env-in-error on the key's variable, and sees the result. Every spelling
// of the key must stay out of what the model was sent, the session's
// events and export, the turn's result and the log (checkLeaks). It
// returns the tool result the model saw.
func (e *env) secretTurn(grants ...string) string {
	e.t.Helper()
	// Characters that JSON and URL encoding change, as a DSN password
	// may hold, so that each spelling differs from the plain one.
	key := "sk-hostile-" + randomToken(e.t) + "<&/+ x"
	e.t.Setenv(secretKeyEnv, key)
	jsonKey, _ := json.Marshal(key)
	e.secrets = append(e.secrets, key, url.QueryEscape(key), string(jsonKey[1:len(jsonKey)-1]), key[:len(key)*2/3])

	var mu sync.Mutex
	var toolSaw string
	args, _ := json.Marshal(attackArgs{Attack: "env-in-error", Names: []string{secretKeyEnv}})
	provider := &scripted.Tools{
		Calls:  []scripted.Call{{Name: "attack", Arguments: string(args)}},
		Answer: func(*model.Request) string { return "noted" },
		Seen: func(_ int, req *model.Request) {
			b, _ := json.Marshal(req)
			e.record(string(b)) // everything the model was sent
			if text, _, ok := scripted.LastResult(req); ok {
				mu.Lock()
				toolSaw = text
				mu.Unlock()
				e.record(toolSaw) // as the model reads it, decoded
			}
		},
	}
	spec := e.spec("attacker", guestWasm(e.t, "attacker"), "", map[string]any{"self": "attacker"},
		append([]string{e.fsGrant(), defaultLimits}, grants...)...)
	d, err := deploy.New(e.ctx, deploy.Options{Model: "m", Provider: provider,
		SessionsDir: filepath.Join(e.base, "deploy-sessions"), Cache: deploytest.Cache(e.t),
		Logger:   slog.New(captureHandler{c: e.logs}),
		Redactor: redact.New(key), EagerCompile: true,
		Plugins: []deploy.PluginSpec{{Name: spec.Name, Source: spec.Source, SHA256: spec.SHA256,
			Config: spec.Config, Grants: spec.Grants, ABI: spec.ABI}}})
	if err != nil {
		e.t.Fatalf("deployment: %v", err)
	}
	defer d.Close(e.ctx)
	s, err := d.NewSession(e.ctx, deploy.SessionOptions{Cwd: e.ws})
	if err != nil {
		e.t.Fatalf("session: %v", err)
	}
	res, err := s.Prompt(e.ctx, "call the tool")
	e.recordErr(err)
	e.recordErr(res.Err)
	e.record(res.End.Message + res.Text)
	if err != nil || res.End.Kind != session.EndCompleted {
		e.t.Errorf("turn: %+v, %v", res.End, err)
	}
	var exported bytes.Buffer
	if err := d.Store().Export(s.ID(), &exported); err != nil {
		e.t.Fatal(err)
	}
	e.record(exported.String())
	for _, ev := range s.History() {
		b, _ := ev.MarshalJSON()
		e.record(string(b))
	}
	mu.Lock()
	defer mu.Unlock()
	if toolSaw == "" {
		e.t.Error("the model never saw the tool's result")
	}
	return toolSaw
}
