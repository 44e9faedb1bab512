// Package interrupt instruments a WebAssembly module so that its host can
// stop it, and so that it lets the Go scheduler in.
//
// Native code compiled by wazero has no safepoints: a guest looping in it
// can neither be stopped nor preempted, and a garbage collection that needs
// to stop the world waits for it. wazero's own remedy,
// WithCloseOnContextDone, leaves native code for Go at every loop
// iteration and starts a goroutine per call, which costs a 1 KiB JSON echo
// about ten times its work.
//
// Instrument adds two globals: a fuel counter and an exported interrupt
// flag. At the head of every loop and the entry of every function the
// guest decrements the fuel; when it runs out (every FuelPerCheck
// iterations) the guest refills it, calls memory.grow(0) — which wazero
// runs in Go, a safepoint — and traps (unreachable) if the flag is set.
// Setting the flag from any goroutine stops a running guest within
// FuelPerCheck iterations.
//
// Instrument decodes every instruction to find the loops. A module using
// an instruction it does not know is returned with ErrUnsupported, and the
// caller falls back to wazero's mechanism.
package interrupt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// Global is the name under which the interrupt flag is exported.
const Global = "dsh_interrupt"

// Version names the rewrite Instrument performs. Change it whenever the
// output for a given input changes, so that caches of instrumented modules
// keyed by it are not reused across versions.
const Version = "interrupt-3"

// FuelPerCheck is how many loop iterations and function entries run
// between two visits to Go.
const FuelPerCheck = 10000

var (
	// ErrMalformed: the module is not valid WebAssembly.
	ErrMalformed = errors.New("malformed wasm module")
	// ErrUnsupported: the module uses something Instrument does not handle.
	ErrUnsupported = errors.New("cannot instrument wasm module")
)

const (
	secCustom   = 0
	secType     = 1
	secFunction = 3
	secImport   = 2
	secMemory   = 5
	secGlobal   = 6
	secExport   = 7
	secCode     = 10
)

// sectionOrder is the position each known section must keep.
var sectionOrder = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

type section struct {
	id   byte
	data []byte
}

// Instrument returns the module with the interrupt flag and its checks.
func Instrument(wasm []byte) ([]byte, error) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) {
		return nil, fmt.Errorf("%w: no wasm header", ErrMalformed)
	}
	if binary.LittleEndian.Uint32(wasm[4:8]) != 1 {
		return nil, fmt.Errorf("%w: binary version %d", ErrUnsupported, binary.LittleEndian.Uint32(wasm[4:8]))
	}
	var secs []section
	r := &reader{b: wasm, off: 8}
	for !r.done() {
		id := r.byte()
		size := r.u32()
		data := r.bytes(int(size))
		if r.err != nil {
			return nil, r.err
		}
		if id == secCustom {
			name, ok := customName(data)
			if ok && strings.HasPrefix(name, ".debug_") {
				continue // code offsets change: stale DWARF would mislead
			}
		}
		secs = append(secs, section{id, data})
	}
	importedGlobals, memories := 0, 0
	definedGlobals := 0
	var params []int    // parameter count of each type
	var funcTypes []int // type index of each defined function
	for _, s := range secs {
		switch s.id {
		case secType:
			var err error
			if params, err = typeParams(s.data); err != nil {
				return nil, err
			}
		case secFunction:
			sr := &reader{b: s.data}
			n := sr.u32()
			for i := uint32(0); i < n && sr.err == nil; i++ {
				funcTypes = append(funcTypes, int(sr.u32()))
			}
			if sr.err != nil {
				return nil, sr.err
			}
		case secImport:
			g, m, err := countImports(s.data)
			if err != nil {
				return nil, err
			}
			importedGlobals, memories = g, memories+m
		case secMemory:
			sr := &reader{b: s.data}
			n := sr.u32()
			memories += int(n)
			for i := uint32(0); i < n && sr.err == nil; i++ {
				if flags := sr.limits(); flags&0x04 != 0 {
					return nil, fmt.Errorf("%w: 64-bit memories", ErrUnsupported)
				}
			}
		case secGlobal:
			sr := &reader{b: s.data}
			definedGlobals = int(sr.u32())
			if sr.err != nil {
				return nil, sr.err
			}
		case secExport:
			if hasExport(s.data, Global) {
				return nil, fmt.Errorf("%w: the module already exports %q", ErrUnsupported, Global)
			}
		}
	}
	if memories == 0 {
		return nil, fmt.Errorf("%w: the module has no memory", ErrUnsupported)
	}
	fuel := uint32(importedGlobals + definedGlobals)
	gidx := fuel + 1
	check := checkSeq(fuel, gidx)
	// The added globals' indices must be unreachable by the module's own
	// code: a global.get or global.set at or past them would be invalid
	// in the original module, and valid — able to refill its own fuel —
	// in the instrumented one.
	limit := fuel

	var out []section
	addedGlobal, addedExport := false, false
	insert := func(id byte, data []byte) { out = append(out, section{id, data}) }
	for _, s := range secs {
		// Sections that must come before the global section and do not
		// exist are passed; create the global section at its place.
		if !addedGlobal && s.id != secCustom && sectionOrder[s.id] > sectionOrder[secGlobal] {
			insert(secGlobal, appendVec(nil, 0, newGlobals()...))
			addedGlobal = true
		}
		if !addedExport && s.id != secCustom && sectionOrder[s.id] > sectionOrder[secExport] {
			insert(secExport, appendVec(nil, 0, newExport(gidx)))
			addedExport = true
		}
		switch s.id {
		case secGlobal:
			d, err := appendToVec(s.data, newGlobals()...)
			if err != nil {
				return nil, err
			}
			insert(s.id, d)
			addedGlobal = true
		case secExport:
			d, err := appendToVec(s.data, newExport(gidx))
			if err != nil {
				return nil, err
			}
			insert(s.id, d)
			addedExport = true
		case secCode:
			d, err := instrumentCode(s.data, check, limit, fuel, gidx, func(i int) (int, error) {
				if i >= len(funcTypes) || funcTypes[i] >= len(params) {
					return 0, fmt.Errorf("%w: function %d has no known type", ErrMalformed, i)
				}
				return params[funcTypes[i]], nil
			})
			if err != nil {
				return nil, err
			}
			insert(s.id, d)
		default:
			insert(s.id, s.data)
		}
	}
	if !addedGlobal {
		insert(secGlobal, appendVec(nil, 0, newGlobals()...))
	}
	if !addedExport {
		insert(secExport, appendVec(nil, 0, newExport(gidx)))
	}
	buf := make([]byte, 0, len(wasm)+len(wasm)/8)
	buf = append(buf, wasm[:8]...)
	for _, s := range out {
		buf = append(buf, s.id)
		buf = appendU32(buf, uint32(len(s.data)))
		buf = append(buf, s.data...)
	}
	return buf, nil
}

// checkSeq spends one unit of fuel; when it runs out it refills it, visits
// Go through memory.grow(0), and traps if the flag is set:
//
//	global.get fuel; i32.const 1; i32.sub; global.set fuel
//	global.get fuel; i32.const 0; i32.le_s
//	if <slowPath> end
func checkSeq(fuel, flag uint32) []byte {
	b := appendU32([]byte{0x23}, fuel)
	b = append(b, 0x41, 0x01, 0x6B, 0x24)
	b = appendU32(b, fuel)
	b = appendU32(append(b, 0x23), fuel)
	b = append(b, 0x41, 0x00, 0x4C, 0x04, 0x40)
	return append(b, slowPath(fuel, flag)...)
}

// newGlobals are the fuel (a mutable i32 starting full) and the flag (a
// mutable i32 starting at 0), in that order.
func newGlobals() [][]byte {
	fuel := appendS32([]byte{0x7F, 0x01, 0x41}, FuelPerCheck)
	return [][]byte{append(fuel, 0x0B), {0x7F, 0x01, 0x41, 0x00, 0x0B}}
}

func newExport(g uint32) []byte {
	b := appendU32(nil, uint32(len(Global)))
	b = append(b, Global...)
	b = append(b, 0x03)
	return appendU32(b, g)
}

func appendVec(dst []byte, n uint32, items ...[]byte) []byte {
	dst = appendU32(dst, n+uint32(len(items)))
	for _, it := range items {
		dst = append(dst, it...)
	}
	return dst
}

// appendToVec adds items to the vector a section's data is.
func appendToVec(data []byte, items ...[]byte) ([]byte, error) {
	r := &reader{b: data}
	n := r.u32()
	if r.err != nil {
		return nil, r.err
	}
	out := appendU32(nil, n+uint32(len(items)))
	out = append(out, data[r.off:]...)
	for _, it := range items {
		out = append(out, it...)
	}
	return out, nil
}

func customName(data []byte) (string, bool) {
	r := &reader{b: data}
	n := r.u32()
	name := r.bytes(int(n))
	return string(name), r.err == nil
}

func hasExport(data []byte, name string) bool {
	r := &reader{b: data}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		l := r.u32()
		nm := r.bytes(int(l))
		r.byte()
		r.u32()
		if string(nm) == name {
			return true
		}
	}
	return false
}

// countImports counts the imported globals and memories.
func countImports(data []byte) (globals, memories int, err error) {
	r := &reader{b: data}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.bytes(int(r.u32())) // module
		r.bytes(int(r.u32())) // name
		switch kind := r.byte(); kind {
		case 0x00: // func
			r.u32()
		case 0x01: // table
			r.byte() // reftype
			if r.limits()&0x04 != 0 {
				return 0, 0, fmt.Errorf("%w: 64-bit tables", ErrUnsupported)
			}
		case 0x02: // memory
			if r.limits()&0x04 != 0 {
				return 0, 0, fmt.Errorf("%w: 64-bit memories", ErrUnsupported)
			}
			memories++
		case 0x03: // global
			r.byte() // valtype
			r.byte() // mut
			globals++
		case 0x04: // tag
			r.byte()
			r.u32()
		default:
			return 0, 0, fmt.Errorf("%w: import kind %#x", ErrUnsupported, kind)
		}
	}
	return globals, memories, r.err
}

// instrumentCode rewrites the code section. Globals numbered limit and
// above do not exist in the original module; paramsOf gives the number of
// parameters of defined function i.
func instrumentCode(data, check []byte, limit, fuel, flag uint32, paramsOf func(int) (int, error)) ([]byte, error) {
	r := &reader{b: data}
	n := r.u32()
	out := appendU32(make([]byte, 0, len(data)+len(data)/8), n)
	var body []byte
	for i := uint32(0); i < n; i++ {
		size := r.u32()
		fn := r.bytes(int(size))
		if r.err != nil {
			return nil, r.err
		}
		np, err := paramsOf(int(i))
		if err != nil {
			return nil, err
		}
		body, err = instrumentBody(body[:0], fn, check, limit, fuel, flag, np)
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if !r.done() {
		return nil, fmt.Errorf("%w: trailing bytes in the code section", ErrMalformed)
	}
	return out, r.err
}

// instrumentBody copies one function body, adding the check after its
// locals and after every loop's block type, and charging the length of
// every bulk memory and table operation to the fuel before it runs.
func instrumentBody(dst, fn, check []byte, limit, fuel, flag uint32, params int) ([]byte, error) {
	r := &reader{b: fn}
	groups := r.u32()
	locals := params
	for i := uint32(0); i < groups; i++ {
		locals += int(r.u32())
		r.valtype()
	}
	if r.err != nil {
		return nil, r.err
	}
	bodyStart := r.off
	bulk, err := hasBulkOps(fn[bodyStart:], limit)
	if err != nil {
		return nil, err
	}
	if bulk {
		// One more i32 local holds an operation's length.
		dst = appendU32(dst, groups+1)
		dst = append(dst, fn[lebLen(fn):bodyStart]...)
		dst = append(dst, 0x01, 0x7F)
	} else {
		dst = append(dst, fn[:bodyStart]...)
	}
	charge := chargeSeq(uint32(locals), fuel, flag)
	dst = append(dst, check...)
	start := r.off
	for !r.done() {
		at := r.off
		op := r.byte()
		if op == 0x23 || op == 0x24 { // global.get, global.set
			if g := r.u32(); r.err == nil && g >= limit {
				return nil, fmt.Errorf("%w: global %d does not exist (the module has %d)", ErrMalformed, g, limit)
			}
			continue
		}
		if op == 0xFC {
			sub := (&reader{b: fn, off: r.off}).u32()
			if isBulk(sub) {
				dst = append(dst, fn[start:at]...)
				dst = append(dst, charge...)
				start = at
			}
		}
		if err := skipImmediates(r, op); err != nil {
			return nil, err
		}
		if r.err != nil {
			return nil, r.err
		}
		if op == 0x03 { // loop
			dst = append(dst, fn[start:r.off]...)
			dst = append(dst, check...)
			start = r.off
		}
	}
	return append(dst, fn[start:]...), nil
}

// isBulk: memory.init, memory.copy, memory.fill, table.init, table.copy,
// table.fill — one instruction whose work grows with its length operand,
// which is on top of the stack.
func isBulk(sub uint32) bool {
	switch sub {
	case 8, 10, 11, 12, 14, 17:
		return true
	}
	return false
}

func hasBulkOps(code []byte, limit uint32) (bool, error) {
	r := &reader{b: code}
	for !r.done() {
		op := r.byte()
		if op == 0xFC {
			if isBulk((&reader{b: code, off: r.off}).u32()) {
				return true, nil
			}
		}
		if err := skipImmediates(r, op); err != nil {
			return false, err
		}
	}
	return false, r.err
}

// lebLen is the length of the u32 LEB128 at the start of b.
func lebLen(b []byte) int {
	for i, c := range b {
		if c&0x80 == 0 {
			return i + 1
		}
	}
	return len(b)
}

// ChargeShift: a bulk operation of n bytes (or table elements) costs
// n >> ChargeShift units of fuel.
const ChargeShift = 12

// chargeSeq charges the length on top of the stack, kept there for the
// operation, to the fuel, and visits Go if the fuel ran out:
//
//	local.tee t
//	global.get fuel; local.get t; i32.const 12; i32.shr_u; i32.sub; global.set fuel
//	global.get fuel; i32.const 0; i32.le_s
//	if <refill, memory.grow 0, trap if flagged> end
func chargeSeq(t, fuel, flag uint32) []byte {
	b := appendU32([]byte{0x22}, t)
	b = appendU32(append(b, 0x23), fuel)
	b = appendU32(append(b, 0x20), t)
	b = append(b, 0x41, ChargeShift, 0x76, 0x6B, 0x24)
	b = appendU32(b, fuel)
	b = appendU32(append(b, 0x23), fuel)
	b = append(b, 0x41, 0x00, 0x4C, 0x04, 0x40)
	return append(b, slowPath(fuel, flag)...)
}

// slowPath refills the fuel, visits Go through memory.grow(0), traps if
// the flag is set, and closes the enclosing if:
//
//	i32.const FuelPerCheck; global.set fuel
//	i32.const 0; memory.grow 0; drop
//	global.get flag; if; unreachable; end
//	end
func slowPath(fuel, flag uint32) []byte {
	b := appendS32([]byte{0x41}, FuelPerCheck)
	b = appendU32(append(b, 0x24), fuel)
	b = append(b, 0x41, 0x00, 0x40, 0x00, 0x1A, 0x23)
	b = appendU32(b, flag)
	return append(b, 0x04, 0x40, 0x00, 0x0B, 0x0B)
}

func skipImmediates(r *reader, op byte) error {
	switch {
	case op == 0x02, op == 0x03, op == 0x04, op == 0x06: // block loop if try
		r.blocktype()
	case op == 0x07, op == 0x08, op == 0x09, op == 0x18: // catch throw rethrow delegate
		r.u32()
	case op == 0x0C, op == 0x0D: // br br_if
		r.u32()
	case op == 0x0E: // br_table
		n := r.u32()
		for i := uint32(0); i <= n && r.err == nil; i++ {
			r.u32()
		}
	case op == 0x10, op == 0x12: // call return_call
		r.u32()
	case op == 0x11, op == 0x13: // call_indirect return_call_indirect
		r.u32()
		r.u32()
	case op == 0x1C: // select t*
		n := r.u32()
		for i := uint32(0); i < n && r.err == nil; i++ {
			r.valtype()
		}
	case op >= 0x20 && op <= 0x26: // local.* global.* table.get/set
		r.u32()
	case op >= 0x28 && op <= 0x3E: // loads and stores
		r.memarg()
	case op == 0x3F, op == 0x40: // memory.size memory.grow
		r.u32()
	case op == 0x41:
		r.sleb(32)
	case op == 0x42:
		r.sleb(64)
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op == 0xD0: // ref.null
		r.byte()
	case op == 0xD2: // ref.func
		r.u32()
	case op == 0xFC:
		return skipFC(r, r.u32())
	case op == 0xFD:
		return skipSIMD(r, r.u32())
	case op == 0xFE:
		sub := r.u32()
		if sub == 0x03 { // atomic.fence
			r.byte()
		} else {
			r.memarg()
		}
	case op <= 0x01, op == 0x05, op == 0x0A, op == 0x0B, op == 0x0F, op == 0x19, op == 0x1A, op == 0x1B,
		op >= 0x45 && op <= 0xC4, op == 0xD1:
		// no immediates
	default:
		return fmt.Errorf("%w: opcode %#x", ErrUnsupported, op)
	}
	return nil
}

func skipFC(r *reader, sub uint32) error {
	switch {
	case sub <= 7: // saturating truncations
	case sub == 8: // memory.init
		r.u32()
		r.u32()
	case sub == 9, sub == 13: // data.drop elem.drop
		r.u32()
	case sub == 10, sub == 12, sub == 14: // memory.copy table.init table.copy
		r.u32()
		r.u32()
	case sub == 11, sub == 15, sub == 16, sub == 17: // memory.fill table.grow/size/fill
		r.u32()
	default:
		return fmt.Errorf("%w: opcode 0xfc %d", ErrUnsupported, sub)
	}
	return nil
}

func skipSIMD(r *reader, sub uint32) error {
	switch {
	case sub <= 11, sub == 92, sub == 93: // loads, stores, load zero
		r.memarg()
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		r.bytes(16)
	case sub >= 21 && sub <= 34: // lane extract/replace
		r.byte()
	case sub >= 84 && sub <= 91: // load/store lane
		r.memarg()
		r.byte()
	case sub <= 0x113: // every other SIMD opcode has no immediates
	default:
		return fmt.Errorf("%w: opcode 0xfd %d", ErrUnsupported, sub)
	}
	return nil
}

// reader decodes the binary format; the first error sticks.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) done() bool { return r.err != nil || r.off >= len(r.b) }

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
	}
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.fail("unexpected end at byte %d", r.off)
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || r.off+n > len(r.b) {
		r.fail("length %d past the end at byte %d", n, r.off)
		return nil
	}
	b := r.b[r.off : r.off+n]
	r.off += n
	return b
}

func (r *reader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint32(c&0x7F) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.fail("u32 too long at byte %d", r.off)
	return 0
}

func (r *reader) sleb(bits int) {
	for i := 0; i*7 < bits+7; i++ {
		c := r.byte()
		if r.err != nil || c&0x80 == 0 {
			return
		}
	}
	r.fail("s%d too long at byte %d", bits, r.off)
}

func (r *reader) valtype() {
	switch c := r.byte(); c {
	case 0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F:
	default:
		if r.err == nil {
			r.err = fmt.Errorf("%w: value type %#x", ErrUnsupported, c)
		}
	}
}

// blocktype is 0x40, a value type, or a type index as s33.
func (r *reader) blocktype() {
	if r.off < len(r.b) {
		switch r.b[r.off] {
		case 0x40, 0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F:
			r.off++
			return
		}
	}
	r.sleb(33)
}

func (r *reader) memarg() {
	align := r.u32()
	if align&0x40 != 0 { // multi-memory: a memory index follows
		r.u32()
	}
	r.u32() // offset (u64 with memory64; LEB either way)
}

// limits reads a limits and returns its flags (bit 0: a maximum follows;
// bit 2: 64-bit).
func (r *reader) limits() byte {
	flags := r.byte()
	r.u32()
	if flags&0x01 != 0 {
		r.u32()
	}
	return flags
}

// typeParams reads the type section: each function type's parameter count.
func typeParams(data []byte) ([]int, error) {
	r := &reader{b: data}
	n := r.u32()
	out := make([]int, 0, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		if form := r.byte(); form != 0x60 {
			return nil, fmt.Errorf("%w: type form %#x", ErrUnsupported, form)
		}
		np := r.u32()
		for j := uint32(0); j < np && r.err == nil; j++ {
			r.valtype()
		}
		nr := r.u32()
		for j := uint32(0); j < nr && r.err == nil; j++ {
			r.valtype()
		}
		out = append(out, int(np))
	}
	return out, r.err
}

func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}
