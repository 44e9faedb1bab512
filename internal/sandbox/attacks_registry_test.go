package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// victim loads a second plugin with a section, a variable, tools and a
// secret in its config.
func (e *env) victim() (*plugin.Plugin, string) {
	e.t.Helper()
	secret := "VICTIM-SECRET-" + randomToken(e.t)
	e.secrets = append(e.secrets, secret)
	p := e.mustLoad("victim", "attacker", map[string]any{"prefix": "victim_", "self": "victim",
		"sections": []string{"victim:rules"}, "variables": []string{"victim_var"}, "secret": secret}, e.fsGrant(), defaultLimits)
	return p, secret
}

var victimTargets = map[string]any{"sections": []string{"victim:rules"}, "tools": []string{"victim_ok"}, "variables": []string{"victim_var"}}

// initReport fetches what the attacker's dsh_init saw, from its load-time
// instance.
func (e *env) initReport() report {
	e.t.Helper()
	return e.attackWith(nil, "report", attackArgs{})
}

// wantVictimIntact checks the victim's contribution and that its tool
// and section still answer as the victim's.
func (e *env) wantVictimIntact(p *plugin.Plugin) {
	e.t.Helper()
	c := p.Contribution()
	var tools []string
	for _, t := range c.Tools {
		tools = append(tools, t.Name)
	}
	if len(c.Sections) != 1 || c.Sections[0].Name != "victim:rules" || !slices.Equal(c.Variables, []string{"victim_var"}) ||
		!slices.Equal(tools, []string{"victim_attack", "victim_ok", "victim_report"}) {
		e.t.Errorf("the victim's contribution changed: %+v", c)
	}
	if r, err := e.call(e.main, "victim_ok", map[string]string{}); err != nil || r.Text != "ok" {
		e.t.Errorf("the victim's tool: %+v %v", r, err)
	}
	a, err := e.host.Registry().Assemble(e.ctx, prompt.AssembleContext{Agent: e.main})
	if err != nil {
		e.t.Fatalf("assemble: %v", err)
	}
	text, err := prompt.Render(a)
	e.record(text)
	if err != nil || !strings.Contains(text, "Section victim:rules of the victim.") || strings.Contains(text, "hijacked") {
		e.t.Errorf("the prompt after the attack: %q, %v", text, err)
	}
	if v := a.Variables["victim_var"]; v.Text != "value of victim_var" {
		e.t.Errorf("victim_var = %+v", v)
	}
}

func registryAttacks() []hostileAttack {
	return []hostileAttack{
		{name: "registration-flood", run: func(e *env) string {
			_, err := e.load("attacker", "attacker", map[string]any{"init": "flood", "flood": 100_000, "self": "attacker"}, e.fsGrant(), defaultLimits)
			e.wantErr("load", err, plugin.ErrInit, `flood stopped after 1024 registrations: section_register: limit reached: section_register: plugin "attacker" reached its limit of 1024 registrations`)
			secs, vars, tools := e.host.Registry().Names()
			if len(secs)+len(vars)+len(tools) != 0 || len(e.host.Plugins()) != 0 {
				e.t.Errorf("after the failed init: sections %d, variables %v, tools %v, plugins %v", len(secs), vars, tools, e.host.Plugins())
			}
			return "refused (limit reached at 1024); init failed and nothing it registered stayed"
		}},
		{name: "duplicate-names", run: func(e *env) string {
			v, _ := e.victim()
			e.attacker(map[string]any{"init": "dup-names", "targets": victimTargets})
			r := e.initReport()
			e.wantStatus(r, "section_register victim:rules", hostfns.ErrRule, `section "victim:rules": duplicate section name`)
			e.wantStatus(r, "tool_register victim_ok", hostfns.ErrRule, `tool "victim_ok": duplicate tool name`)
			e.wantStatus(r, "variable_register victim_var", hostfns.ErrRule, `variable "victim_var": duplicate variable name`)
			e.wantStatus(r, "section_register mine:once again", hostfns.ErrRule, "duplicate section name")
			e.wantStatus(r, "event_subscribe plugin/loaded again", hostfns.ErrRule, "already subscribed to plugin/loaded")
			for _, op := range []string{"section_register mine:once", "event_subscribe plugin/loaded twice"} {
				if s := r.step(e.t, op); s.Status != "ok" {
					e.t.Errorf("%s: %+v", op, s)
				}
			}
			e.wantVictimIntact(v)
			return "refused (rule broken: duplicate name); the victim keeps its names"
		}},
		{name: "malformed-names", run: func(e *env) string {
			e.attacker(map[string]any{"init": "malformed-names"})
			r := e.initReport()
			e.wantAll(r, hostfns.ErrRule, "")
			e.wantStatus(r, `section_register "ctl\x01char"`, hostfns.ErrRule, "control character U+0001")
			e.wantStatus(r, `tool_register "rm -rf /"`, hostfns.ErrRule, "must match [a-zA-Z0-9_-]{1,64}")
			e.wantStatus(r, `tool_register "x\x00y"`, hostfns.ErrRule, "must match [a-zA-Z0-9_-]{1,64}")
			e.wantStatus(r, "tool_register bad schema", hostfns.ErrRule, "must be a JSON object")
			e.wantStatus(r, `variable_register "Upper"`, hostfns.ErrRule, "must match [a-z][a-z0-9_]*")
			e.wantStatus(r, `event_subscribe "has space"`, hostfns.ErrRule, "must be 1 to 128 printable bytes")
			e.wantStatus(r, "event_subscribe waterfall as listen", hostfns.ErrRule, "agent/request is a waterfall event")
			secs, vars, tools := e.host.Registry().Names()
			if len(secs) != 0 || len(vars) != 0 || !slices.Equal(tools, []string{"attack", "ok", "report"}) {
				e.t.Errorf("registered: %v %v %v", secs, vars, tools)
			}
			return fmt.Sprintf("refused (rule broken) for all %d malformed names", len(r.Steps))
		}},
		{name: "unregister-foreign", run: func(e *env) string {
			v, _ := e.victim()
			e.attacker(map[string]any{"init": "unregister-foreign", "targets": victimTargets})
			r := e.initReport()
			e.wantStatus(r, "unregister section victim:rules", hostfns.ErrNotFound, `plugin "attacker" registered no section "victim:rules"`)
			e.wantStatus(r, "unregister tool victim_ok", hostfns.ErrNotFound, `plugin "attacker" registered no tool "victim_ok"`)
			e.wantStatus(r, "unregister variable victim_var", hostfns.ErrNotFound, `plugin "attacker" registered no variable "victim_var"`)
			e.wantVictimIntact(v)
			return "refused (not found: a plugin unregisters only its own)"
		}},
		{name: "register-from-agent-instance", run: func(e *env) string {
			e.attacker(nil)
			r := e.attack(e.main, attackArgs{Attack: "register-late"})
			e.wantAll(r, hostfns.ErrDenied, "only the load-time instance may do this")
			secs, _, tools := e.host.Registry().Names()
			if len(secs) != 0 || !slices.Equal(tools, []string{"attack", "ok", "report"}) {
				e.t.Errorf("registered: %v %v", secs, tools)
			}
			return "refused (denied: registration only in the load-time instance)"
		}},
		{name: "capabilities-after-init", run: func(e *env) string {
			p := e.attacker(nil)
			r := e.attackWith(nil, "attack", attackArgs{Attack: "capabilities-late"})
			e.wantStatus(r, "capabilities_declare", hostfns.ErrDenied, "capabilities can be declared only during dsh_init")
			r = e.attack(e.main, attackArgs{Attack: "capabilities-late"})
			e.wantStatus(r, "capabilities_declare", hostfns.ErrDenied, "only the load-time instance may do this")
			if c := p.Capabilities(); c.Exec || len(c.Net) != 0 {
				e.t.Errorf("capabilities after the attack: %+v", c)
			}
			return "refused (denied outside dsh_init)"
		}},
		{name: "emit-foreign-events", run: func(e *env) string {
			var heard atomic.Int64
			for _, ev := range []string{"plugin:victim/steal", "plugin:attackerx/y"} {
				off, err := e.host.Bus().On(ev, "witness", func(context.Context, any) error { heard.Add(1); return nil })
				must(e.t, err)
				e.t.Cleanup(off)
			}
			e.attacker(nil)
			names := []string{"agent/request", "tools/pre-execute", "plugin/loaded", "plugin:victim/steal", "plugin:attacker/",
				"plugin:attacker/has space", "plugin:attackerx/y"}
			r := e.attack(e.main, attackArgs{Attack: "emit-foreign", Names: names})
			e.wantAll(r, hostfns.ErrDenied, `plugin "attacker" may emit only its own events, named plugin:attacker/<event>`)
			if n := heard.Load(); n != 0 {
				e.t.Errorf("listeners heard %d forged events", n)
			}
			return "refused (denied: only plugin:attacker/<event>)"
		}},
		{name: "reentrant-emit", run: func(e *env) string {
			e.attacker(map[string]any{"subscribe": true})
			r := e.attack(e.main, attackArgs{Attack: "emit-reentrant"})
			e.wantStatus(r, "emit own event to own handler", hostfns.ErrInternal, "reentrant call into an instance that is already running")
			if s := r.step(e.t, "handler ran"); s.N != 0 {
				e.t.Errorf("the handler ran reentrantly %d times", s.N)
			}
			return "refused (the instance is busy: no reentrant call, no deadlock)"
		}},
		{name: "reentrant-from-init", run: func(e *env) string {
			e.attacker(map[string]any{"init": "emit-in-init", "subscribe": true})
			r := e.initReport()
			e.wantStatus(r, "emit own event during init", hostfns.ErrDenied, "events cannot be emitted during dsh_init or dsh_setup")
			return "refused (denied: no events during init)"
		}},
		{name: "cross-plugin-state-and-config", run: func(e *env) string {
			_, secret := e.victim()
			keys := []string{"token", "api_key"}
			e.attackWith(e.main, "victim_attack", attackArgs{Attack: "state-plant", Names: keys})
			e.attacker(nil)
			r := e.attack(e.main, attackArgs{Attack: "state-steal", Names: keys})
			for _, k := range keys {
				var got hostfns.StateGetResponse
				s := r.step(e.t, "state_get "+k)
				if s.Status != "ok" || json.Unmarshal([]byte(s.Data), &got) != nil || got.Found {
					e.t.Errorf("state_get %s of another plugin: %+v", k, s)
				}
				v, ok, err := e.host.State().Get("victim", e.main.Session, k)
				if err != nil || !ok || !strings.Contains(string(v), secret) {
					e.t.Errorf("the victim's own state %s: %s %v %v", k, v, ok, err)
				}
			}
			if s := r.step(e.t, "my config"); s.Data != `{"self":"attacker"}` {
				e.t.Errorf("the attacker's config: %q", s.Data)
			}
			return "refused (state and config are the plugin's own: found=false)"
		}},
	}
}
