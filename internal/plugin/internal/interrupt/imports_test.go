package interrupt

import (
	"errors"
	"slices"
	"testing"
)

func TestImportsListsEveryKind(t *testing.T) {
	entries := [][]byte{
		{0x01, 'm', 0x01, 'f', 0x00, 0x00},                       // func, type 0
		{0x01, 'm', 0x03, 'm', 'e', 'm', 0x02, 0x00, 0x01},       // memory, min 1
		{0x03, 'e', 'n', 'v', 0x01, 'g', 0x03, 0x7E, 0x01},       // global, mut i64
		{0x01, 't', 0x03, 't', 'a', 'b', 0x01, 0x70, 0x00, 0x00}, // table, funcref
	}
	body := []byte{byte(len(entries))}
	for _, e := range entries {
		body = append(body, e...)
	}
	m := append([]byte("\x00asm\x01\x00\x00\x00"), 0x01, 0x04, 0x01, 0x60, 0x00, 0x00) // type () -> ()
	m = append(append(m, 0x02, byte(len(body))), body...)
	got, err := Imports(m)
	if err != nil {
		t.Fatal(err)
	}
	want := []Import{{"m", "f", "func"}, {"m", "mem", "memory"}, {"env", "g", "global"}, {"t", "tab", "table"}}
	if !slices.Equal(got, want) {
		t.Fatalf("imports = %+v, want %+v", got, want)
	}
	if got, err := Imports(spinModule); err != nil || len(got) != 0 {
		t.Fatalf("a module without imports: %+v, %v", got, err)
	}
	if _, err := Imports(m[:len(m)-3]); !errors.Is(err, ErrMalformed) {
		t.Fatalf("truncated: %v", err)
	}
	if _, err := Imports([]byte("nope")); !errors.Is(err, ErrMalformed) {
		t.Fatalf("no header: %v", err)
	}
}
