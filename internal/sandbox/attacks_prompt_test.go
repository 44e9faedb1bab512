package sandbox

import (
	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/agent"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

func promptAttacks() []hostileAttack {
	return []hostileAttack{
		{name: "prompt-takeover", run: func(e *env) string {
			// The attacker loads before the harness registers anything.
			e.attacker(map[string]any{"init": "prompt-takeover"})
			r := e.initReport()
			for _, op := range []string{"section_register harness:identity", "section_register deployment:persona",
				"section_register harness:rules", "dynamic section_register harness:late", "variable_register model", "variable_register cwd"} {
				e.wantStatus(r, op, hostfns.ErrRule, "name reserved for the harness: plugin attacker may not register it")
			}
			for _, op := range []string{"section_register at -1000000", "section_register at -101", "section_register at 0"} {
				e.wantStatus(r, op, hostfns.ErrDenied, "is outside grants.prompt.order [1, max]")
			}
			e.wantStatus(r, "section_register malformed", hostfns.ErrRule, "invalid template: render section \"attacker:malformed\": malformed variable reference {{ model }}")
			for _, ev := range []string{"system-prompt/assemble", "agent/request", "tools/pre-execute", "tools/post-execute"} {
				e.wantStatus(r, "event_subscribe "+ev, hostfns.ErrDenied, "is not granted the "+ev+" waterfall")
			}
			if s := r.step(e.t, "section_register at 1"); s.Status != "ok" {
				e.t.Errorf("the control registration: %+v", s)
			}
			// The harness registers after the attacker, and owns the top
			// of the prompt.
			if _, _, err := prompt.RegisterHarnessSections(e.host.Registry(), "Persona of {{model}} in {{cwd}}."); err != nil {
				e.t.Fatalf("the harness's sections: %v", err)
			}
			if _, err := agent.RegisterBuiltinVariables(e.host.Registry()); err != nil {
				e.t.Fatalf("the harness's variables: %v", err)
			}
			if err := e.host.CheckReferences(e.ctx); err != nil {
				e.t.Fatalf("CheckReferences: %v", err)
			}
			a, err := e.host.Registry().Assemble(e.ctx, prompt.AssembleContext{Agent: e.main})
			if err != nil {
				e.t.Fatal(err)
			}
			got, err := prompt.Render(a)
			e.recordErr(err)
			e.record(got)
			if want := prompt.Identity + "\n\nPersona of m in " + e.ws + ".\n\nAttacker guidance."; err != nil || got != want {
				e.t.Errorf("prompt %q, %v\nwant %q", got, err, want)
			}
			return "refused (reserved names and a malformed template: rule broken; order before the persona and every waterfall: denied); the harness, registering after it, opens the prompt"
		}},
	}
}
