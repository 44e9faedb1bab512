package config

import (
	"slices"

	"gopkg.in/yaml.v3"
)

// Subagents configures a deployment's subagent providers: the built-in
// spawn and fork are always there; acp adds external ACP agents.
//
//	subagents:
//	  max_depth: 2
//	  acp:
//	    - name: reviewer
//	      command: [dsh-wasm, acp, --config, reviewer.yml]
//	      permissions: reject   # reject (the default) or allow
type Subagents struct {
	// MaxDepth is the deepest a child may be (a top-level agent is 0);
	// 0 means the runtime's default.
	MaxDepth int `json:"max_depth,omitempty"`
	// ACP are external agents run as children over the Agent Client
	// Protocol.
	ACP []ACPAgent `json:"acp,omitempty"`
}

// ACPAgent is one external ACP agent provider.
type ACPAgent struct {
	// Name is the provider's name (what grants.subagents lists).
	Name string `json:"name"`
	// Command is the agent's argv.
	Command []string `json:"command"`
	// AllowPermissions answers the agent's permission requests with
	// allow; false rejects them.
	AllowPermissions bool `json:"allow_permissions,omitempty"`
}

// MaxSubagentDepth bounds subagents.max_depth.
const MaxSubagentDepth = 16

func (d *decoder) subagents(n *yaml.Node, field string) Subagents {
	var s Subagents
	names := map[string]bool{"spawn": true, "fork": true}
	d.fields(n, field, map[string]func(*yaml.Node, string){
		"max_depth": func(v *yaml.Node, f string) { s.MaxDepth, _ = d.integer(v, f, 1, MaxSubagentDepth) },
		"acp": func(v *yaml.Node, f string) {
			d.list(v, f, func(item *yaml.Node, f string) {
				var a ACPAgent
				d.fields(item, f, map[string]func(*yaml.Node, string){
					"name": func(v *yaml.Node, f string) {
						name, ok := d.str(v, f)
						if !ok {
							return
						}
						if msg := CheckSubagentProvider(name); msg != "" {
							d.fail(v, f, "%s", msg)
							return
						}
						if names[name] {
							d.fail(v, f, "provider name %q is already taken (spawn and fork are built in)", name)
							return
						}
						names[name] = true
						a.Name = name
					},
					"command": func(v *yaml.Node, f string) {
						a.Command = d.strings(v, f, func(s string) string {
							if s == "" {
								return "empty argument"
							}
							return ""
						})
					},
					"permissions": func(v *yaml.Node, f string) {
						p, ok := d.str(v, f)
						if !ok {
							return
						}
						if !slices.Contains([]string{"reject", "allow"}, p) {
							d.fail(v, f, "want reject or allow, got %q", p)
							return
						}
						a.AllowPermissions = p == "allow"
					},
				})
				if item.Kind == yaml.MappingNode && (a.Name == "" || len(a.Command) == 0) {
					d.fail(item, f, "an acp provider needs a name and a command")
					return
				}
				s.ACP = append(s.ACP, a)
			})
		},
	})
	return s
}
