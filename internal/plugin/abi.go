package plugin

import (
	"context"
	"time"

	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
	"github.com/tetratelabs/wazero/api"
)

// Wasm value types, short, for signatures.
const (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

// abi is what the lifecycle asks of a plugin's ABI, so that loading,
// instances, init and tool calls are the same code for every ABI: the
// differences (which host modules a module links to, how an instance is
// made, what init and a tool call are) live behind it. dshABI is
// dsh:host/v1 (abi_dsh.go); extismABI the community ABIs on the Extism
// kernel (community.go).
type abi interface {
	// prepare readies the plugin's runtime for its compiled module (wasm
	// is what was compiled) and returns the exports the host calls.
	prepare(ctx context.Context, p *Plugin, wasm []byte) (exports map[string]bool, err error)
	// instantiate makes an instance, ready for calls. shift moves its
	// clock ahead of the host's; bare asks for one only initialised (an
	// ABI without per-agent setup or images ignores both).
	instantiate(ctx context.Context, p *Plugin, loadTime bool, facts *prompt.AgentFacts, shift time.Duration, bare bool) (*instance, error)
	// init runs the plugin's init in its load-time instance, inside tx.
	init(ctx context.Context, p *Plugin, tx *prompt.Tx, in *instance) error
	// callTool runs the tool name in instance in for the agent facts.
	callTool(ctx context.Context, in *instance, facts *prompt.AgentFacts, name string, args []byte) (tool.Result, error)
}

// abis maps each ABI name (Spec.ABI, Plugin.ABI) to its implementation.
var abis = map[string]abi{
	ABIDsh:        dshABI{},
	ABIHyperMCPv1: extismABI{},
	ABIHyperMCPv2: extismABI{},
	ABIMCPRun:     extismABI{},
}

// kind is the implementation of the plugin's ABI.
func (p *Plugin) kind() abi { return abis[p.ABI()] }
