package interrupt

import (
	"bytes"
	"fmt"
)

// Import is one entry of a module's import section.
type Import struct {
	Module, Name string
	// Kind is "func", "table", "memory", "global" or "tag".
	Kind string
}

// Imports lists the module's imports, every kind, in order. wazero's
// CompiledModule lists only imported functions and memories; a host that
// must refuse an imported global or table reads them here.
func Imports(wasm []byte) ([]Import, error) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) {
		return nil, fmt.Errorf("%w: no wasm header", ErrMalformed)
	}
	r := &reader{b: wasm, off: 8}
	for !r.done() {
		id := r.byte()
		data := r.bytes(int(r.u32()))
		if r.err != nil {
			return nil, r.err
		}
		if id == secImport {
			return readImports(data)
		}
	}
	return nil, r.err
}

func readImports(data []byte) ([]Import, error) {
	r := &reader{b: data}
	n := r.u32()
	var out []Import
	for i := uint32(0); i < n && r.err == nil; i++ {
		mod := string(r.bytes(int(r.u32())))
		name := string(r.bytes(int(r.u32())))
		var kind string
		switch k := r.byte(); k {
		case 0x00:
			kind = "func"
			r.u32()
		case 0x01:
			kind = "table"
			r.byte()
			r.limits()
		case 0x02:
			kind = "memory"
			r.limits()
		case 0x03:
			kind = "global"
			r.byte()
			r.byte()
		case 0x04:
			kind = "tag"
			r.byte()
			r.u32()
		default:
			r.fail("import %d (%s::%s) has unknown kind %#x", i, mod, name, k)
		}
		if r.err == nil {
			out = append(out, Import{Module: mod, Name: name, Kind: kind})
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return out, nil
}
