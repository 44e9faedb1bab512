package plugin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/abi/dsh"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/abi/extism"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// Plugin ABIs (config.ABIs).
const (
	// ABIDsh is dsh:host/v1 (package hostfns).
	ABIDsh = "dsh"
	// ABIHyperMCPv1 is hyper-mcp's v1 plugin ABI: exports describe and
	// call, and imports hyper-mcp host functions.
	ABIHyperMCPv1 = extism.HyperMCPv1
	// ABIHyperMCPv2 is hyper-mcp's v2 plugin ABI: exports list_tools and
	// call_tool, which take an MCP request context.
	ABIHyperMCPv2 = extism.HyperMCPv2
	// ABIMCPRun is the mcp.run servlet ABI: describe and call, like
	// hyper-mcp v1, without hyper-mcp's host functions.
	ABIMCPRun = extism.MCPRun
)

const (
	extismEnv  = extism.EnvModule
	extismUser = extism.UserModule
)

// ABI returns the plugin's ABI: ABIDsh or one of the community ABIs.
func (p *Plugin) ABI() string {
	if p.abi == "" {
		return ABIDsh
	}
	return p.abi
}

// extismABI is the community ABIs (hyper-mcp v1 and v2, mcp.run) on the
// Extism kernel: instances always start fresh, init lists the tools, a
// tool call goes through the kernel.
type extismABI struct{}

func (extismABI) prepare(ctx context.Context, p *Plugin, wasm []byte) (map[string]bool, error) {
	return p.prepareExtism(ctx, wasm)
}

func (extismABI) instantiate(ctx context.Context, p *Plugin, loadTime bool, facts *prompt.AgentFacts, _ time.Duration, _ bool) (*instance, error) {
	return p.newExtismInstance(ctx, loadTime, facts)
}

func (extismABI) init(ctx context.Context, p *Plugin, tx *prompt.Tx, in *instance) error {
	return p.extismInit(ctx, tx, in)
}

func (extismABI) callTool(ctx context.Context, in *instance, facts *prompt.AgentFacts, name string, args []byte) (tool.Result, error) {
	return in.p.callExtismTool(ctx, in, facts, name, args)
}

// detectABI decides the module's ABI from the spec or, when the spec names
// none, from its imports and exports.
func (p *Plugin) detectABI() (string, error) {
	exports := p.module.ExportedFunctions()
	has := func(n string) bool { _, ok := exports[n]; return ok }
	v1, v2 := has("describe") && has("call"), has("list_tools") && has("call_tool")
	extism, hyper := false, false
	for _, imp := range p.module.ImportedFunctions() {
		mod, name, _ := imp.Import()
		if mod == extismEnv || mod == extismUser {
			extism = true
		}
		if mod == extismUser && name != "config_get" {
			hyper = true
		}
	}
	switch want := p.spec.ABI; want {
	case "":
	case ABIDsh:
		return ABIDsh, nil
	case ABIMCPRun, ABIHyperMCPv1:
		if !v1 {
			return "", fmt.Errorf("%w: abi %s needs the exports describe and call; the module has %s", ErrABI, want, exportList(exports))
		}
		return want, nil
	case ABIHyperMCPv2:
		if !has("list_tools") || !has("call_tool") {
			return "", fmt.Errorf("%w: abi %s needs the exports list_tools and call_tool; the module has %s", ErrABI, want, exportList(exports))
		}
		return want, nil
	default:
		return "", fmt.Errorf("%w: unknown abi %q (want dsh, hyper-mcp-v1, hyper-mcp-v2 or mcp-run)", ErrABI, want)
	}
	if has(hostfns.ExportABIVersion) || !extism && !v1 && !v2 {
		return ABIDsh, nil
	}
	switch {
	case v1 && hyper:
		return ABIHyperMCPv1, nil
	case v1:
		return ABIMCPRun, nil
	case v2:
		// hyper-mcp's own rule: v2 when the plugin does not export both
		// describe and call.
		return ABIHyperMCPv2, nil
	}
	return "", fmt.Errorf("%w: an Extism module must export describe and call (hyper-mcp v1, mcp.run) or list_tools and call_tool (hyper-mcp v2); it has %s", ErrABI, exportList(exports))
}

func exportList(m map[string]api.FunctionDefinition) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return "no exported functions"
	}
	if len(names) > 12 {
		names = append(names[:12], "…")
	}
	return strings.Join(names, ", ")
}

// prepareExtism compiles the kernel and provides its Go functions in the
// plugin's runtime; wasm is the module as compiled.
func (p *Plugin) prepareExtism(ctx context.Context, wasm []byte) (map[string]bool, error) {
	cfg, err := extism.Config(p.config)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSource, err)
	}
	p.extConfig = cfg
	// The kernel holds the input, output and the blocks the guest
	// allocates; it gets a quarter of the plugin's memory cap, so guest
	// and kernel together stay within 1.25 times the grant.
	pages := max(p.limits.MemoryPages/4, 2)
	if p.kernel, err = p.rt.CompileModule(ctx, extism.Module(pages)); err != nil {
		return nil, fmt.Errorf("compile the Extism kernel: %w", err)
	}
	b := p.rt.NewHostModuleBuilder(extism.GoModule)
	for _, g := range extism.GoFuncs {
		if !extism.Implemented(g.Name) {
			return nil, fmt.Errorf("extism host function %s has no implementation", g.Name)
		}
		b.NewFunctionBuilder().WithGoModuleFunction(p.wrapExtism(g.Name), g.Params, g.Results).Export(g.Name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		return nil, fmt.Errorf("instantiate %s: %w", extism.GoModule, err)
	}
	exports, err := extism.CheckModule(p.module, p.kernel, wasm, p.abi)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrABI, err)
	}
	return exports, nil
}

// extismOf is the Extism state of instance in, or nil.
func extismOf(in *instance) *extism.Instance {
	x, _ := in.state.(*extism.Instance)
	return x
}

// newExtismInstance instantiates a kernel and the guest linked to it.
func (p *Plugin) newExtismInstance(ctx context.Context, loadTime bool, facts *prompt.AgentFacts) (*instance, error) {
	cfg, lw, sl, jail, err := p.moduleConfig(facts, 0)
	if err != nil {
		return nil, err
	}
	kmod, err := p.rt.InstantiateModule(ctx, p.kernel, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		lw.Close()
		if jail != nil {
			jail.Close()
		}
		return nil, &CallError{Plugin: p.name, Export: "instantiate", Err: fmt.Errorf("extism kernel: %w", err)}
	}
	rctx := experimental.WithImportResolver(ctx, func(name string) api.Module {
		if name == extismEnv || name == extismUser {
			return kmod
		}
		return nil
	})
	mod, err := p.rt.InstantiateModule(rctx, p.module, cfg)
	if err != nil {
		kmod.Close(ctx)
		lw.Close()
		if jail != nil {
			jail.Close()
		}
		return nil, &CallError{Plugin: p.name, Export: "instantiate", Err: classifyTrap(err)}
	}
	ext := extism.NewInstance(kmod)
	in, err := p.adopt(mod, loadTime, facts, lw, jail, sl, nil, []api.Module{kmod}, ext)
	if err != nil {
		return nil, err
	}
	// Community plugins always start fresh.
	if err := in.initialise(ctx); err != nil {
		return nil, err
	}
	return in, nil
}

// invokeExtism calls export with input through the kernel. A guest that
// returns non-zero gives back its error_set message as errMsg (with
// failed set); a trap, a budget kill, a host function that failed the call
// or bad output discards the instance and comes back as err.
func (in *instance) invokeExtism(ctx context.Context, cs *callState, export string, timeout time.Duration, input []byte) (out []byte, errMsg string, failed bool, err error) {
	err = in.call(ctx, cs, export, timeout, nil, func(callCtx context.Context, fn api.Function, fail func(error) error) error {
		x := extismOf(in)
		x.Begin()
		if err := x.SetInput(input); err != nil {
			return fail(fmt.Errorf("input: %w", err))
		}
		if err := fn.CallWithStack(callCtx, in.stack); err != nil {
			if why := x.Failure(); why != nil {
				return fail(why)
			}
			return fail(in.guard.Why(err))
		}
		if rc := int32(in.stack[0]); rc != 0 {
			errMsg, failed = fmt.Sprintf("%s returned %d", export, rc), true
			b, set, err := x.ErrorSet()
			if err != nil {
				return fail(fmt.Errorf("%w: error_set: %w", ErrBadOutput, err))
			}
			if set {
				errMsg = strings.ToValidUTF8(string(b), "\uFFFD")
			}
			return nil
		}
		b, err := x.Output(hostfns.MaxOutputBytes)
		if err != nil {
			return fail(fmt.Errorf("%w: %w", ErrBadOutput, err))
		}
		out = b
		return nil
	})
	if err != nil {
		return nil, "", false, err
	}
	return out, errMsg, failed, nil
}

// listTools asks the plugin for its tools in instance in.
func (p *Plugin) listTools(ctx context.Context, in *instance) ([]extism.Tool, error) {
	export, _ := extism.Exports(p.abi)
	out, msg, failed, err := in.invokeExtism(ctx, &callState{}, export, p.limits.InitTimeout, extism.ListInput(p.abi, p.nextReqID))
	if err != nil {
		return nil, err
	}
	if failed {
		return nil, &CallError{Plugin: p.name, Export: export, Err: fmt.Errorf("%w: %s", ErrGuest, msg)}
	}
	tools, err := extism.DecodeTools(out)
	if err != nil {
		return nil, &CallError{Plugin: p.name, Export: export, Err: fmt.Errorf("%w: %w", ErrBadOutput, err)}
	}
	return tools, nil
}

// nextReqID numbers hyper-mcp's request contexts.
func (p *Plugin) nextReqID() int64 { return p.reqID.Add(1) }

// extismInit is runInit for a community plugin: its tools are its whole
// contribution, listed once here and fixed until the plugin is reloaded.
// No agent's call changes them (notify_tool_list_changed is refused), so
// no agent can change what another sees.
func (p *Plugin) extismInit(ctx context.Context, tx *prompt.Tx, in *instance) error {
	tools, err := p.listTools(ctx, in)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInit, err)
	}
	if err := p.addTools(&callState{tx: tx, init: true}, tools); err != nil {
		return fmt.Errorf("%w: %w", ErrInit, err)
	}
	return nil
}

func (p *Plugin) addTools(cs *callState, tools []extism.Tool) error {
	for _, t := range tools {
		pt := dsh.ToolOf(hostfns.ToolRequest{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
		if _, st, msg := p.contrib.register(cs, toolReg(pt)); st != 0 {
			if st == hostfns.ErrRule && strings.Contains(msg, "duplicate") {
				msg += " (tool names are global, and a community plugin's tools keep the names it gives them: load only one of the plugins that have it)"
			}
			return fmt.Errorf("tool %q: %s", t.Name, msg)
		}
	}
	return nil
}

// callExtismTool runs a community tool and turns its MCP CallToolResult
// into a tool result.
func (p *Plugin) callExtismTool(ctx context.Context, in *instance, facts *prompt.AgentFacts, name string, args []byte) (tool.Result, error) {
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	x := extismOf(in)
	// The arguments are spliced into the input as they are, so they must
	// be one JSON object; jsonobj checks that without reflection.
	err := x.CheckArgs(args)
	if err != nil {
		return tool.Result{Text: fmt.Sprintf("tool arguments must be a JSON object: %v", err), IsError: true}, nil
	}
	_, export := extism.Exports(p.abi)
	input := extism.CallInput(p.abi, name, args, p.nextReqID)
	out, msg, failed, err := in.invokeExtism(ctx, &callState{facts: facts}, export, p.limits.CallTimeout, input)
	if err != nil {
		return tool.Result{}, err
	}
	if failed {
		return tool.Result{Text: msg, IsError: true}, nil
	}
	if text, isErr, ok := x.Text(out); ok {
		return tool.Result{Text: text, IsError: isErr}, nil
	}
	text, isErr, err := extism.ResultText(out)
	if err != nil {
		return tool.Result{}, &CallError{Plugin: p.name, Export: export, Err: fmt.Errorf("%w: %w", ErrBadOutput, err)}
	}
	return tool.Result{Text: text, IsError: isErr}, nil
}
