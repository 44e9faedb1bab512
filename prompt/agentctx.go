package prompt

import "context"

type agentKey struct{}

// WithAgent returns ctx carrying the facts of the agent a call or event
// belongs to. The agent loop puts them on every call it makes for an
// agent; whatever serves the call (the plugin host, a native tool, a
// subagent provider) reads them with AgentFrom, so the loop and its
// servers share the facts without importing one another.
func WithAgent(ctx context.Context, facts *AgentFacts) context.Context {
	return context.WithValue(ctx, agentKey{}, facts)
}

// AgentFrom returns the agent facts WithAgent put on ctx, or nil.
func AgentFrom(ctx context.Context) *AgentFacts {
	f, _ := ctx.Value(agentKey{}).(*AgentFacts)
	return f
}
