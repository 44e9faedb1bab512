package dsh

import (
	"context"
	"errors"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// TestInstantiateServesEveryFunction: the module has exactly the
// functions of hostfns.Funcs, each asked of serve once (take aside), and
// a function serve cannot provide fails the instantiation.
func TestInstantiateServesEveryFunction(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	nop := api.GoModuleFunc(func(context.Context, api.Module, []uint64) {})
	asked := map[string]int{}
	if err := Instantiate(ctx, rt, func(f hostfns.Func) (api.GoModuleFunc, error) {
		asked[f.Name]++
		return nop, nil
	}, nop); err != nil {
		t.Fatal(err)
	}
	mod := rt.Module(hostfns.Module)
	if mod == nil {
		t.Fatal("no host module")
	}
	defs := mod.ExportedFunctionDefinitions()
	if len(defs) != len(hostfns.Funcs) {
		t.Errorf("the module has %d functions, hostfns.Funcs %d", len(defs), len(hostfns.Funcs))
	}
	for _, f := range hostfns.Funcs {
		d, ok := defs[f.Name]
		if !ok {
			t.Errorf("%s is not provided", f.Name)
			continue
		}
		if f.Name != hostfns.FnTake && (len(d.ParamTypes()) != 4 || len(d.ResultTypes()) != 1 || d.ResultTypes()[0] != api.ValueTypeI64) {
			t.Errorf("%s has signature %v -> %v", f.Name, d.ParamTypes(), d.ResultTypes())
		}
		if want := 1; f.Name == hostfns.FnTake {
			if asked[f.Name] != 0 {
				t.Errorf("serve was asked for take")
			}
		} else if asked[f.Name] != want {
			t.Errorf("serve was asked for %s %d times", f.Name, asked[f.Name])
		}
	}
	rt2 := wazero.NewRuntime(ctx)
	defer rt2.Close(ctx)
	missing := errors.New("missing")
	if err := Instantiate(ctx, rt2, func(hostfns.Func) (api.GoModuleFunc, error) { return nil, missing }, nop); !errors.Is(err, missing) {
		t.Fatalf("Instantiate with a function missing = %v", err)
	}
}

// TestDecodeIsStrict: unknown fields and data after the value are refused.
func TestDecodeIsStrict(t *testing.T) {
	var v struct{ Key string }
	for _, req := range []string{`{"Key":"a","Typo":1}`, `{"Key":"a"} {}`, `[`} {
		if st, _ := Decode([]byte(req), &v); st != hostfns.ErrBadJSON {
			t.Errorf("Decode(%s) = %v, want ErrBadJSON", req, st)
		}
	}
	if st, msg := Decode([]byte(`{"Key":"a"}`), &v); st != hostfns.StatusOK || v.Key != "a" {
		t.Errorf("Decode of a good request = %v %q %+v", st, msg, v)
	}
}
