package hostfns_test

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
)

// TestImportsMatchABI keeps the Go guest SDK's imports equal to the ABI
// table: a host function added on one side and not the other fails here,
// not at a plugin author's instantiation.
func TestImportsMatchABI(t *testing.T) {
	src, err := os.ReadFile("guest/wasm.go")
	if err != nil {
		t.Fatal(err)
	}
	var imported []string
	for _, m := range regexp.MustCompile(`(?m)^//go:wasmimport (\S+) (\S+)$`).FindAllStringSubmatch(string(src), -1) {
		if m[1] != hostfns.Module {
			t.Errorf("guest SDK imports from module %q, not %q", m[1], hostfns.Module)
		}
		imported = append(imported, m[2])
	}
	var table []string
	for _, f := range hostfns.Funcs {
		table = append(table, f.Name)
	}
	slices.Sort(imported)
	slices.Sort(table)
	if !slices.Equal(imported, table) {
		t.Fatalf("guest SDK imports %v\nABI table has       %v", imported, table)
	}
	mapped := regexp.MustCompile(`hostfns\.(Fn\w+):\s+host\w+,`).FindAllStringSubmatch(string(src), -1)
	if len(mapped) != len(table)-1 { // take has its own signature
		t.Fatalf("importByName maps %d functions, want %d", len(mapped), len(table)-1)
	}
}

func TestPackRoundTrip(t *testing.T) {
	st, n := hostfns.Unpack(hostfns.Pack(hostfns.ErrRule, 1<<31+5))
	if st != hostfns.ErrRule || n != 1<<31+5 {
		t.Fatalf("got %v %d", st, n)
	}
	p, n := hostfns.UnpackPtr(hostfns.PackPtr(0xdeadbeef, 7))
	if p != 0xdeadbeef || n != 7 {
		t.Fatalf("got %#x %d", p, n)
	}
	if hostfns.ErrDenied.String() != "denied" || hostfns.Status(99).String() != "status 99" {
		t.Fatal("status names")
	}
}
