package extism

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/interrupt"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// The modules an Extism plugin imports from: the kernel's, and the host's
// (hyper-mcp's host functions, the legacy config_get).
const (
	EnvModule  = "extism:host/env"
	UserModule = "extism:host/user"
)

// CheckModule checks a community module's imports against what the
// kernel provides, signature by signature, so a mismatch is a load error
// that names the import rather than an instantiation failure. wasm is the
// module's bytes: a module may import only functions, and wazero lists no
// imported globals or tables, so every import is read from them. It returns the exports the host
// calls; an error names what is wrong (the host wraps it as a bad ABI).
func CheckModule(module, kernel wazero.CompiledModule, wasm []byte, abi string) (map[string]bool, error) {
	imps, err := interrupt.Imports(wasm)
	if err != nil {
		return nil, fmt.Errorf("read the import section: %w", err)
	}
	for _, imp := range imps {
		if imp.Kind != "func" {
			// The kernel's memory and globals (its heap, input and output
			// offsets) are the host's: a guest that linked them could move
			// or forge what the host reads back.
			return nil, fmt.Errorf("module imports %s::%s, a %s; an Extism plugin may import only functions (the Extism kernel's, hyper-mcp's and WASI's), never a memory, global, table or tag",
				imp.Module, imp.Name, imp.Kind)
		}
	}
	kexp := kernel.ExportedFunctions()
	for _, imp := range module.ImportedFunctions() {
		mod, name, _ := imp.Import()
		switch mod {
		case wasi_snapshot_preview1.ModuleName:
			continue
		case EnvModule:
			if !slices.Contains(EnvFuncs, name) {
				return nil, fmt.Errorf("module imports %s::%s, which the Extism kernel does not define", mod, name)
			}
		case UserModule:
			if !slices.Contains(UserFuncs, name) {
				return nil, fmt.Errorf("module imports %s::%s; this host provides hyper-mcp's host functions (%s) and nothing else there", mod, name, strings.Join(UserFuncs, ", "))
			}
		default:
			return nil, fmt.Errorf("module imports %s::%s, which this host does not provide to an Extism plugin", mod, name)
		}
		k := kexp[name]
		if !slices.Equal(k.ParamTypes(), imp.ParamTypes()) || !slices.Equal(k.ResultTypes(), imp.ResultTypes()) {
			return nil, fmt.Errorf("module imports %s::%s as %v -> %v; the host defines it as %v -> %v", mod, name,
				typeNames(imp.ParamTypes()), typeNames(imp.ResultTypes()), typeNames(k.ParamTypes()), typeNames(k.ResultTypes()))
		}
	}
	exports := module.ExportedFunctions()
	found := map[string]bool{}
	var need []string
	if abi == HyperMCPv2 {
		need = []string{"list_tools", "call_tool"}
	} else {
		need = []string{"describe", "call"}
	}
	for _, n := range append(need, hostfns.ExportInitialize) {
		d, ok := exports[n]
		if !ok {
			continue
		}
		want := []api.ValueType{i32}
		if n == hostfns.ExportInitialize {
			want = nil
		}
		if len(d.ParamTypes()) != 0 || !slices.Equal(d.ResultTypes(), want) {
			return nil, fmt.Errorf("export %s has signature %v -> %v, want () -> %v", n,
				typeNames(d.ParamTypes()), typeNames(d.ResultTypes()), typeNames(want))
		}
		found[n] = true
	}
	if _, ok := exports["_start"]; ok && !found[hostfns.ExportInitialize] {
		return nil, errors.New("the module is a command (it exports _start, not _initialize); build it as a library: -buildmode=c-shared for Go, a cdylib for Rust, -mexec-model=reactor for C")
	}
	return found, nil
}

func typeNames(ts []api.ValueType) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = api.ValueTypeName(t)
	}
	return out
}
