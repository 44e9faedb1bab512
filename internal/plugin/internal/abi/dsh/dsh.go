// Package dsh is the shape of dsh:host/v1 (package hostfns) in a wazero
// runtime: the host module with exactly the functions of hostfns.Funcs
// and their signatures, which functions a dsh_setup may call and still
// end alike for every agent, how large a request the host reads, and the
// strict decoding of requests. The implementations of the functions are
// the host's: they are handed in when the module is instantiated.
package dsh

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

var i32x4 = []api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}

// Instantiate provides dsh:host/v1 in rt: exactly the functions of
// hostfns.Funcs, each (take aside) served by what serve returns for it,
// as (in_ptr, in_len, out_ptr, out_cap) -> i64; take as (ptr, n) -> i32.
func Instantiate(ctx context.Context, rt wazero.Runtime, serve func(hostfns.Func) (api.GoModuleFunc, error), take api.GoModuleFunc) error {
	b := rt.NewHostModuleBuilder(hostfns.Module)
	for _, f := range hostfns.Funcs {
		if f.Name == hostfns.FnTake {
			b.NewFunctionBuilder().WithGoModuleFunction(take,
				[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}).Export(f.Name)
			continue
		}
		fn, err := serve(f)
		if err != nil {
			return err
		}
		b.NewFunctionBuilder().WithGoModuleFunction(fn, i32x4, []api.ValueType{api.ValueTypeI64}).Export(f.Name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

// SetupNeutral are the host functions whose answers in dsh_setup are the
// same for every agent: logging, and the load-time functions, which a
// per-agent instance's setup may call but which register nothing. A setup
// that called only these can be part of an instance image (the host's images). They
// are also the functions a dsh_init may call and still be recorded for a
// lazy load (the host's lazy loads): each answer depends only on the request, the
// plugin's key and the registry, which a replay consults again.
var SetupNeutral = map[string]bool{
	hostfns.FnLog: true, hostfns.FnSectionRegister: true, hostfns.FnSectionUnregister: true,
	hostfns.FnVariableRegister: true, hostfns.FnVariableUnregister: true, hostfns.FnToolRegister: true,
	hostfns.FnToolUnregister: true, hostfns.FnEventSubscribe: true, hostfns.FnCapabilities: true,
}

// SmallRequest caps the requests of host functions whose requests are
// small by nature (a name, a key, an id): a longer one is refused before
// the host reads it.
const SmallRequest = 4 << 10

// RequestLimit is the largest request the host reads for fn, and what
// sets it when that is not hostfns.MaxRequestBytes; promptBytes is the
// plugin's grants.limits.prompt_bytes.
func RequestLimit(fn string, promptBytes int64) (uint32, string) {
	switch fn {
	case hostfns.FnStateGet, hostfns.FnEnvGet, hostfns.FnExecPoll, hostfns.FnExecKill,
		hostfns.FnSectionUnregister, hostfns.FnVariableUnregister, hostfns.FnToolUnregister,
		hostfns.FnVariableRegister, hostfns.FnEventSubscribe:
		return SmallRequest, " (its requests are small by nature)"
	case hostfns.FnCapabilities:
		return 64 << 10, " (its requests are small by nature)"
	case hostfns.FnSectionRegister, hostfns.FnToolRegister:
		// The text counts against prompt_bytes once decoded; JSON may
		// escape a byte in up to six.
		if l := 6*promptBytes + SmallRequest; l < hostfns.MaxRequestBytes {
			return uint32(l), fmt.Sprintf(" (the plugin's grants.limits.prompt_bytes is %d)", promptBytes)
		}
	}
	return hostfns.MaxRequestBytes, ""
}

// Decode unmarshals req strictly: unknown fields are an error, so a typo
// in a plugin's request is caught rather than ignored.
func Decode(req []byte, v any) (hostfns.Status, string) {
	d := json.NewDecoder(strings.NewReader(string(req)))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return hostfns.ErrBadJSON, fmt.Sprintf("bad request: %v", err)
	}
	if d.More() {
		return hostfns.ErrBadJSON, "bad request: data after the JSON value"
	}
	return hostfns.StatusOK, ""
}
