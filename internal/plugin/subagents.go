package plugin

import (
	"context"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// Subagents is what the host needs of a deployment's subagent providers
// to serve subagent_providers and subagent_run.
type Subagents interface {
	// Providers lists the providers with their facts.
	Providers() []hostfns.SubagentProvider
	// Run starts a child for the calling agent (parent) on provider and
	// waits for its end. Cancelling ctx (the parent's turn) cancels the
	// child.
	Run(ctx context.Context, parent prompt.AgentFacts, req hostfns.SubagentRunRequest) (hostfns.SubagentRunResponse, error)
}

type subagentsKey struct{}

// WithSubagents returns ctx carrying s: subagent_run calls made under ctx
// run children through it. A deployment puts it on the context of the
// tool calls it runs; a call without one cannot start a child.
func WithSubagents(ctx context.Context, s Subagents) context.Context {
	return context.WithValue(ctx, subagentsKey{}, s)
}

func subagentsOf(ctx context.Context) Subagents {
	s, _ := ctx.Value(subagentsKey{}).(Subagents)
	return s
}
