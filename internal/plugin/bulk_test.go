package plugin

import (
	"context"
	"errors"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/cputime"
)

func rawULEB(v uint32) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}
func rawSLEB(v int32) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
func rawSection(id byte, data []byte) []byte {
	return append(append([]byte{id}, rawULEB(uint32(len(data)))...), data...)
}
func rawName(s string) []byte { return append(rawULEB(uint32(len(s))), s...) }
func rawBody(code []byte) []byte {
	c := append([]byte{0}, code...)
	return append(rawULEB(uint32(len(c))), c...)
}

func rawFillModule(pages uint32, fill int32) []byte {
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, rawSection(1, []byte{3, 0x60, 0, 1, 0x7f, 0x60, 1, 0x7f, 1, 0x7f, 0x60, 2, 0x7f, 0x7f, 1, 0x7e})...)
	m = append(m, rawSection(3, []byte{3, 0, 1, 2})...)
	m = append(m, rawSection(5, append([]byte{1, 0}, rawULEB(pages)...))...)
	var ex []byte
	ex = append(ex, 4)
	ex = append(append(ex, rawName("memory")...), 2, 0)
	ex = append(append(ex, rawName("dsh_abi_version")...), 0, 0)
	ex = append(append(ex, rawName("dsh_alloc")...), 0, 1)
	ex = append(append(ex, rawName("dsh_init")...), 0, 2)
	m = append(m, rawSection(7, ex)...)
	abi := append(append([]byte{0x41}, rawSLEB(int32(hostfns.ABIVersion))...), 0x0b)
	al := []byte{0x41, 0x80, 0x08, 0x0b} // i32.const 1024
	ini := []byte{0x03, 0x40, 0x41, 0x00, 0x41, 0x00, 0x41}
	ini = append(ini, rawSLEB(fill)...)
	ini = append(ini, 0xfc, 0x0b, 0x00, 0x0c, 0x00, 0x0b, 0x42, 0x00, 0x0b)
	code := []byte{3}
	code = append(code, rawBody(abi)...)
	code = append(code, rawBody(al)...)
	code = append(code, rawBody(ini)...)
	return append(m, rawSection(10, code)...)
}

// A loop of huge memory.fill instructions — each one instruction, but 240
// MiB of work — is charged by length and killed near its budget, not after
// ten thousand iterations (minutes).
func TestBulkMemoryIsChargedByLength(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rawfill.wasm")
	if err := os.WriteFile(path, rawFillModule(4000, 240<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHost(t)
	// What is bounded is the work done before the kill, so the bound is
	// on CPU time, which a loaded machine does not stretch as it does the
	// wall clock. Charged by length, the fill is stopped after one or two
	// 240 MiB fills (well under a second of CPU, with the 250 MiB memory's
	// page faults); uncharged, the first budget check would come after
	// about ten thousand (minutes). The context only keeps a broken host
	// from running that long.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cpu0, ok := cputime.Process()
	if !ok {
		t.Skip("no process CPU time on this platform")
	}
	_, err := h.Load(ctx, Spec{Name: "rawfill", Source: path,
		// The module declares 4000 pages: more than the default memory bound.
		Grants: &config.Grants{Limits: config.Limits{Memory: 4000 * config.WasmPageSize, InitTimeout: 100 * time.Millisecond}}})
	cpu, _ := cputime.Process()
	if !errors.Is(err, ErrComputeBudget) {
		t.Fatalf("Load: %v", err)
	}
	if used := cpu - cpu0; used > 10*time.Second {
		t.Fatalf("killed after %v of CPU against a 100 ms budget", used)
	}
}
