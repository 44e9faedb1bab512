package interrupt

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// spinModule is (func (export "spin") (loop (br 0))) plus
// (func (export "add") (param i32 i32) (result i32) local.get 0 local.get 1 i32.add).
var spinModule = []byte{
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
	// type section: () -> (), (i32 i32) -> i32
	0x01, 0x0a, 0x02, 0x60, 0x00, 0x00, 0x60, 0x02, 0x7f, 0x7f, 0x01, 0x7f,
	// function section
	0x03, 0x03, 0x02, 0x00, 0x01,
	// memory section: one memory of 1 page
	0x05, 0x03, 0x01, 0x00, 0x01,
	// export section: "spin" func 0, "add" func 1
	0x07, 0x0e, 0x02, 0x04, 's', 'p', 'i', 'n', 0x00, 0x00, 0x03, 'a', 'd', 'd', 0x00, 0x01,
	// code section
	0x0a, 0x11, 0x02,
	0x07, 0x00, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b,
	0x07, 0x00, 0x20, 0x00, 0x20, 0x01, 0x6a, 0x0b,
}

func TestInstrumentStopsALoop(t *testing.T) {
	ctx := context.Background()
	b, err := Instrument(spinModule)
	if err != nil {
		t.Fatal(err)
	}
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	mod, err := rt.Instantiate(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	r, err := mod.ExportedFunction("add").Call(ctx, 2, 3)
	if err != nil || r[0] != 5 {
		t.Fatalf("add = %v, %v", r, err)
	}
	flag := mod.ExportedGlobal(Global).(api.MutableGlobal)
	done := make(chan error, 1)
	go func() {
		_, err := mod.ExportedFunction("spin").Call(ctx)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	// The spinning guest lets the scheduler in: a collection that must
	// stop the world completes.
	gc := make(chan struct{})
	go func() { runtime.GC(); close(gc) }()
	select {
	case <-gc:
	case <-time.After(5 * time.Second):
		t.Fatal("a garbage collection waited on the spinning guest")
	}
	flag.Set(1)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "unreachable") {
			t.Fatalf("spin ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("setting the flag did not stop the loop")
	}
}

func TestInstrumentNeedsMemory(t *testing.T) {
	noMem := append(append([]byte(nil), spinModule[:25]...), spinModule[30:]...)
	if _, err := Instrument(noMem); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("err = %v", err)
	}
}

// A module that names a global it does not define is invalid, and must not
// become valid by naming the fuel or the flag the instrumenter adds.
func TestInstrumentRefusesForeignGlobals(t *testing.T) {
	m := append([]byte(nil), spinModule...)
	// add's body: local.get 0 → global.get 0 (the module has no globals).
	m[len(m)-6], m[len(m)-5] = 0x23, 0x00
	if _, err := Instrument(m); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "global 0") {
		t.Fatalf("err = %v", err)
	}
}

func TestInstrumentRefusesWhatItCannotRead(t *testing.T) {
	if _, err := Instrument([]byte("nope")); !errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v", err)
	}
	bad := append([]byte(nil), spinModule...)
	bad[len(bad)-6] = 0xFF // an opcode nobody defines, inside add's body
	if _, err := Instrument(bad); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("err = %v", err)
	}
	if _, err := Instrument(spinModule[:len(spinModule)-3]); !errors.Is(err, ErrMalformed) {
		t.Fatalf("truncated: err = %v", err)
	}
}

// TestInstrumentRealGuest instruments a real Go guest, built from the
// repository's test guests (and DSH_INTERRUPT_TEST_WASM as well, when
// set), and checks that wazero compiles the result and that it exports
// the interrupt flag.
func TestInstrumentRealGuest(t *testing.T) {
	kit, err := guestbuild.Build("testdata/guests/testkit")
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{kit}
	if p := os.Getenv("DSH_INTERRUPT_TEST_WASM"); p != "" {
		paths = append(paths, p)
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		ib, err := Instrument(b)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(ib) <= len(b) {
			t.Fatalf("%s: instrumented module is %d bytes, the original %d", path, len(ib), len(b))
		}
		if _, err := rt.CompileModule(ctx, ib); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if strings.Contains(string(b), Global) || !strings.Contains(string(ib), Global) {
			t.Fatalf("%s: the interrupt flag's export name %q is not where it should be", path, Global)
		}
	}
}
