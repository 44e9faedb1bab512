package deploy_test

import (
	"context"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
)

// BenchmarkAssemblySubagentTools measures one agent's prompt assembly
// (plugin instances made and released, as for every new agent) without
// and with the two subagent tools of the examples. The tools have no
// section or variable, so an assembly must not instantiate them: compare
// the two sub-benchmarks' ns/op in the same run.
func BenchmarkAssemblySubagentTools(b *testing.B) {
	for _, c := range []struct {
		name    string
		plugins []deploy.PluginSpec
	}{
		{"without", nil},
		{"with", []deploy.PluginSpec{
			subagentGuest("subagent", "spawn", "subagent", "spawn"),
			subagentGuest("subagent_fork", "fork", "subagent_fork", "fork"),
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			plugins := append([]deploy.PluginSpec{{Name: "facts", Source: "builtin:facts"}}, c.plugins...)
			d := open(b, deploy.Options{Model: "m", Provider: &brain{}, Plugins: plugins})
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				if _, err := d.SystemPrompt(ctx, deploy.PromptOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
