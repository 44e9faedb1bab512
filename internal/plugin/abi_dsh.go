package plugin

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/image"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/lazy"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// dshABI is dsh:host/v1 (package hostfns): the host module of
// hostfuncs.go, instances from images, dsh_init recorded for lazy loads,
// dsh_setup per agent, dsh_tool.
type dshABI struct{}

// prepare checks the module speaks dsh:host/v1 and returns its exports.
func (dshABI) prepare(_ context.Context, p *Plugin, _ []byte) (map[string]bool, error) {
	exports, err := p.checkModule()
	if err != nil {
		return nil, err
	}
	if p.snapshots {
		// A module that starts with a memory big enough for an image grows
		// it in small steps as it runs (a Go guest from its initial 3 MiB),
		// and on the Go heap each step copies the whole memory.
		p.mapFresh = p.module.ExportedMemories()["memory"].Min() >= image.MinBytes/image.PageSize
	}
	return exports, nil
}

func (dshABI) instantiate(ctx context.Context, p *Plugin, loadTime bool, facts *prompt.AgentFacts, shift time.Duration, bare bool) (*instance, error) {
	return p.newDshInstance(ctx, loadTime, facts, shift, bare)
}

// init runs dsh_init in the load-time instance in, recording its host
// calls for a later lazy load when it can be.
func (dshABI) init(ctx context.Context, p *Plugin, tx *prompt.Tx, inst *instance) error {
	rec := &lazy.Recorder{}
	cs := &callState{tx: tx, init: true, rec: rec}
	start := time.Now()
	st, out, err := inst.invoke(ctx, cs, hostfns.ExportInit, p.limits.InitTimeout, p.config)
	took := time.Since(start)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInit, err)
	}
	if st == hostfns.OutError {
		return &CallError{Plugin: p.name, Export: hostfns.ExportInit, Err: fmt.Errorf("%w: %w: %s", ErrInit, ErrGuest, out)}
	}
	if !p.spec.Inspect {
		if err := p.checkNeeds(); err != nil {
			return err
		}
	}
	if rec.Why == "" && !wasiEffects(inst) {
		p.mu.Lock()
		p.history = &lazy.History{Init: rec.Calls, Bytes: rec.Bytes}
		p.mu.Unlock()
	}
	if p.key != "" {
		var why string
		if p.recorded, why = p.recordedManifest(ctx, rec, inst, took); why != "" {
			p.log.Debug("loads eagerly: its init cannot be replayed", "why", why)
		}
	}
	return nil
}

// callTool calls dsh_tool with the tool's name, the agent's context and
// the arguments.
func (dshABI) callTool(ctx context.Context, in *instance, facts *prompt.AgentFacts, name string, args []byte) (tool.Result, error) {
	p := in.p
	st, out, err := in.invoke(ctx, &callState{facts: facts}, hostfns.ExportTool, p.limits.CallTimeout,
		[]byte(name), in.contextJSON(facts), args)
	if err != nil {
		return tool.Result{}, err
	}
	switch st {
	case hostfns.OutOK:
		return tool.Result{Text: validText(out)}, nil
	case hostfns.OutError:
		return failed(validText(out), nil), nil
	case hostfns.OutResult:
		r, err := toolOutput(out)
		if err != nil {
			return tool.Result{}, &CallError{Plugin: p.name, Export: hostfns.ExportTool, Err: err}
		}
		return r, nil
	}
	return tool.Result{}, &CallError{Plugin: p.name, Export: hostfns.ExportTool, Err: fmt.Errorf("%w: status %d is not valid for a tool", ErrBadOutput, st)}
}

var exportSigs = map[string][2][]api.ValueType{
	hostfns.ExportABIVersion: {nil, {api.ValueTypeI32}},
	hostfns.ExportAlloc:      {{api.ValueTypeI32}, {api.ValueTypeI32}},
	hostfns.ExportInit:       {{api.ValueTypeI32, api.ValueTypeI32}, {api.ValueTypeI64}},
	hostfns.ExportSetup:      {{api.ValueTypeI32, api.ValueTypeI32}, {api.ValueTypeI64}},
	hostfns.ExportSection:    {{api.ValueTypeI32, api.ValueTypeI32}, {api.ValueTypeI64}},
	hostfns.ExportVariable:   {{api.ValueTypeI32, api.ValueTypeI32}, {api.ValueTypeI64}},
	hostfns.ExportTool:       {{api.ValueTypeI32, api.ValueTypeI32}, {api.ValueTypeI64}},
	hostfns.ExportEvent:      {{api.ValueTypeI32, api.ValueTypeI32}, {api.ValueTypeI64}},
	hostfns.ExportInitialize: {nil, nil},
}

// checkModule refuses modules that do not speak dsh:host/v1, and returns
// the dsh:host/v1 exports of those that do.
func (p *Plugin) checkModule() (map[string]bool, error) {
	for _, imp := range p.module.ImportedFunctions() {
		mod, name, _ := imp.Import()
		switch mod {
		case hostfns.Module:
			if !slices.ContainsFunc(hostfns.Funcs, func(f hostfns.Func) bool { return f.Name == name }) {
				return nil, fmt.Errorf("%w: module imports %s::%s, which ABI version %d does not define", ErrABI, mod, name, hostfns.ABIVersion)
			}
			continue
		case wasi_snapshot_preview1.ModuleName:
			continue
		}
		if mod == "extism:host/env" || mod == "extism:host/user" {
			return nil, fmt.Errorf("%w: module imports %s::%s: it is an Extism plugin, not a dsh:host/v1 plugin", ErrABI, mod, name)
		}
		if len(mod) > len("dsh:host/") && mod[:len("dsh:host/")] == "dsh:host/" {
			return nil, fmt.Errorf("%w: module imports %s::%s: this host speaks %s (ABI version %d)", ErrABI, mod, name, hostfns.Module, hostfns.ABIVersion)
		}
		return nil, fmt.Errorf("%w: module imports %s::%s, which this host does not provide", ErrABI, mod, name)
	}
	exports := map[string]bool{}
	defs := p.module.ExportedFunctions()
	for name, sig := range exportSigs {
		d, ok := defs[name]
		if !ok {
			continue
		}
		if !slices.Equal(d.ParamTypes(), sig[0]) || !slices.Equal(d.ResultTypes(), sig[1]) {
			return nil, fmt.Errorf("%w: export %s has signature %v -> %v, want %v -> %v", ErrABI, name,
				typeNames(d.ParamTypes()), typeNames(d.ResultTypes()), typeNames(sig[0]), typeNames(sig[1]))
		}
		exports[name] = true
	}
	if _, ok := defs["_start"]; ok && !exports[hostfns.ExportInitialize] {
		return nil, fmt.Errorf("%w: the module is a command (it exports _start and no _initialize), so its exports cannot be called after main returns; build it as a library: Go -buildmode=c-shared, C/clang -mexec-model=reactor (or -nostdlib -Wl,--no-entry), Rust crate-type cdylib", ErrABI)
	}
	for _, req := range []string{hostfns.ExportABIVersion, hostfns.ExportAlloc, hostfns.ExportInit} {
		if !exports[req] {
			return nil, fmt.Errorf("%w: module does not export %s; is it a dsh:host/v1 plugin?", ErrABI, req)
		}
	}
	if _, ok := p.module.ExportedMemories()["memory"]; !ok {
		return nil, fmt.Errorf("%w: module does not export its memory as \"memory\"", ErrABI)
	}
	return exports, nil
}
