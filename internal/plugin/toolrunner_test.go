package plugin

import agentloop "github.com/dsh-wasm/dsh-wasm/internal/agent"

// The host serves the agent loop's tool calls. The guard lives in a test
// so that the host, like the loop, imports nothing of the other.
var _ agentloop.ToolRunner = (*Host)(nil)
