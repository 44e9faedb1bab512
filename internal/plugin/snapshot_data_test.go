package plugin

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/interrupt"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// dataImage instantiates b and returns its memory after the data segments
// are in place: at instantiation, or through DataExport when prepared.
func dataImage(t *testing.T, b []byte, prepared bool) []byte {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	cm, err := rt.CompileModule(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	// Stubs for the dsh:host/v1 imports: nothing here calls them.
	stub := rt.NewHostModuleBuilder(hostfns.Module)
	for _, f := range cm.ImportedFunctions() {
		if mod, name, _ := f.Import(); mod == hostfns.Module {
			stub.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {}),
				f.ParamTypes(), f.ResultTypes()).Export(name)
		}
	}
	if _, err := stub.Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	mod, err := rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithStartFunctions())
	if err != nil {
		t.Fatal(err)
	}
	if prepared {
		if _, err := mod.ExportedFunction(interrupt.DataExport).Call(ctx); err != nil {
			t.Fatalf("%s: %v", interrupt.DataExport, err)
		}
	}
	m, _ := mod.Memory().Read(0, mod.Memory().Size())
	return bytes.Clone(m)
}

// TestPreparedDataMatchesInstantiation: for real guests (two Go builds,
// whose linker emits tens of thousands of segments, not all in address
// order, and a C one), the regrouped passive segments put exactly the
// bytes in memory that instantiation puts there.
func TestPreparedDataMatchesInstantiation(t *testing.T) {
	spin, err := guestbuild.Build("testdata/hostile/spinabi")
	if err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"testkit": testkit(t), "spinabi": spin, "c": cGuest(t)} {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		pb, _, err := interrupt.PrepareSnapshot(src)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want, got := dataImage(t, src, false), dataImage(t, pb, true)
		if len(want) != len(got) {
			t.Fatalf("%s: memory of %d bytes, want %d", name, len(got), len(want))
		}
		for i := range want {
			if want[i] != got[i] {
				t.Fatalf("%s: byte %#x is %#x after the prepared data copy, %#x after instantiation", name, i, got[i], want[i])
			}
		}
	}
}

// TestOverlappingDataIsNotRegrouped: where segments overlap, their order
// decides the bytes, so the module is left unprepared.
func TestOverlappingDataIsNotRegrouped(t *testing.T) {
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, rawSection(5, []byte{1, 0, 1})...)
	seg := func(off byte, data string) []byte {
		return append([]byte{0, 0x41, off, 0x0b, byte(len(data))}, data...)
	}
	data := append([]byte{2}, seg(16, "abcdef")...)
	data = append(data, seg(18, "XY")...)
	m = append(m, rawSection(11, data)...)
	if _, _, err := interrupt.PrepareSnapshot(m); !errors.Is(err, interrupt.ErrUnsupported) {
		t.Fatalf("PrepareSnapshot of overlapping segments: %v, want ErrUnsupported", err)
	}
}
