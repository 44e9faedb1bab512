package extism

import (
	"context"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// kernelAlone instantiates the generated kernel with Go functions that do
// nothing, capped at pages.
func kernelAlone(t *testing.T, pages uint32) api.Module {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	t.Cleanup(func() { rt.Close(ctx) })
	b := rt.NewHostModuleBuilder(GoModule)
	for _, g := range GoFuncs {
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {}), g.Params, g.Results).Export(g.Name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := rt.Instantiate(ctx, Module(pages))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func kcall(t *testing.T, m api.Module, name string, args ...uint64) uint64 {
	t.Helper()
	r, err := m.ExportedFunction(name).Call(context.Background(), args...)
	if err != nil {
		t.Fatalf("%s%v: %v", name, args, err)
	}
	if len(r) == 0 {
		return 0
	}
	return r[0]
}

func TestKernelAllocLoadStore(t *testing.T) {
	m := kernelAlone(t, 2)
	if got := kcall(t, m, "alloc", 0); got != 0 {
		t.Errorf("alloc(0) = %d, want 0", got)
	}
	a := kcall(t, m, "alloc", 13)
	b := kcall(t, m, "alloc", 8)
	if a != Base+8 || b != a+16+8 {
		t.Fatalf("alloc(13) = %d, alloc(8) = %d", a, b)
	}
	if kcall(t, m, "length", a) != 13 || kcall(t, m, "length", b) != 8 || kcall(t, m, "length", 3) != 0 || kcall(t, m, "length", b+100) != 0 {
		t.Error("length")
	}
	kcall(t, m, "store_u64", a, 0x0102030405060708)
	kcall(t, m, "store_u8", a+8, 0xab)
	if kcall(t, m, "load_u64", a) != 0x0102030405060708 || kcall(t, m, "load_u8", a+8) != 0xab || kcall(t, m, "load_u8", a) != 8 {
		t.Error("load/store round trip")
	}
	// Freeing the last block gives its space back; freeing another does not.
	kcall(t, m, "free", a)
	if c := kcall(t, m, "alloc", 8); c != b+16 {
		t.Errorf("after free of a non-last block, alloc = %d, want %d", c, b+16)
	}
	heap := m.ExportedGlobal(GlobalHeap).Get()
	kcall(t, m, "free", b+16)
	if got := m.ExportedGlobal(GlobalHeap).Get(); got != heap-16 {
		t.Errorf("free of the last block: heap %d, want %d", got, heap-16)
	}
	// An offset past 4 GiB traps rather than wrapping onto low memory.
	if _, err := m.ExportedFunction("load_u8").Call(context.Background(), 1<<32|a); err == nil {
		t.Error("load_u8 past 4 GiB did not trap")
	}
}

func TestKernelMemoryCap(t *testing.T) {
	m := kernelAlone(t, 2) // 128 KiB
	if got := kcall(t, m, "alloc", 100<<10); got == 0 {
		t.Fatal("alloc of 100 KiB within the cap failed")
	}
	if got := kcall(t, m, "alloc", 64<<10); got != 0 {
		t.Errorf("alloc past the 2-page cap = %d, want 0", got)
	}
	if got := kcall(t, m, "alloc", 1<<40); got != 0 {
		t.Errorf("alloc of 1 TiB = %d, want 0", got)
	}
	if m.Memory().Size() != 2<<16 {
		t.Errorf("memory grew to %d bytes", m.Memory().Size())
	}
}

func TestKernelInput(t *testing.T) {
	m := kernelAlone(t, 2)
	off := kcall(t, m, "alloc", 9)
	m.Memory().Write(uint32(off), []byte("abcdefghi"))
	m.ExportedGlobal(GlobalInOff).(api.MutableGlobal).Set(off)
	m.ExportedGlobal(GlobalInLen).(api.MutableGlobal).Set(9)
	if kcall(t, m, "input_length") != 9 || kcall(t, m, "input_offset") != off || kcall(t, m, "input_load_u8", 8) != 'i' ||
		kcall(t, m, "input_load_u64", 0) != 0x6867666564636261 {
		t.Error("input reads")
	}
	if _, err := m.ExportedFunction("input_load_u8").Call(context.Background(), 9); err == nil {
		t.Error("reading past the input did not trap")
	}
}

// TestKernelState: the input reads back as a block, an output past the
// limit or outside the kernel's memory is an error, a forged block offset
// is refused, and Reset forgets the last call.
func TestKernelState(t *testing.T) {
	k := NewKernel(kernelAlone(t, 2))
	k.Reset()
	if err := k.SetInput([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	b, err := k.ReadBlock(k.inOff.Get())
	if err != nil || string(b) != "hello" || k.inLen.Get() != 5 {
		t.Fatalf("input block = %q, %v (len %d)", b, err, k.inLen.Get())
	}
	k.outOff.Set(k.inOff.Get())
	k.outLen.Set(5)
	if out, err := k.Output(5); err != nil || string(out) != "hello" {
		t.Fatalf("Output = %q, %v", out, err)
	}
	if _, err := k.Output(4); err == nil {
		t.Error("an output past the limit was returned")
	}
	k.outOff.Set(1 << 40)
	if _, err := k.Output(5); err == nil {
		t.Error("an output outside the kernel's memory was returned")
	}
	if _, err := k.ReadBlock(k.inOff.Get() + 1); err == nil {
		t.Error("a forged block offset was read")
	}
	if _, set, _ := k.ErrorSet(); set {
		t.Error("error_set without a call to it")
	}
	k.Reset()
	if out, err := k.Output(5); out != nil || err != nil || k.inLen.Get() != 0 {
		t.Errorf("after Reset: output %q, %v, input length %d", out, err, k.inLen.Get())
	}
}
