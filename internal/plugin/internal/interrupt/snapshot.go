package interrupt

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// A module prepared for snapshots can be instantiated two ways from one
// compiled module: fresh (the host calls DataExport, then the module's own
// initialiser) or from an image of an instance captured right after its
// initialiser ran (the host maps the image as the memory, sets every
// mutable global from GlobalExports, and calls neither). wazero offers no
// way to set a global it does not export, and writes active data segments
// into every new memory, which would overwrite the image; so the rewrite
//
//   - exports every mutable global the module defines, as
//     SnapshotPrefix+"g"+index;
//   - turns every active data segment into a passive one, and adds an
//     exported function DataExport that copies each to its place
//     (memory.init) and drops it, in the segments' order, as instantiation
//     would have.
//
// SnapshotVersion names this rewrite, for caches keyed by it.
const (
	SnapshotVersion = "snapshot-3"
	SnapshotPrefix  = "dsh_snap_"
	DataExport      = SnapshotPrefix + "data"
)

const (
	secStart     = 8
	secDataCount = 12
	secData      = 11
)

// Layout describes a module PrepareSnapshot rewrote.
type Layout struct {
	// GlobalExports names the exported mutable globals an image records,
	// in index order.
	GlobalExports []string
}

// PrepareSnapshot rewrites wasm as described above. Modules it cannot
// prepare (a start function, an imported or second memory, a data segment
// placed by anything but a constant) return ErrUnsupported; they are
// instantiated the ordinary way.
func PrepareSnapshot(wasm []byte) ([]byte, *Layout, error) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) {
		return nil, nil, fmt.Errorf("%w: no wasm header", ErrMalformed)
	}
	if binary.LittleEndian.Uint32(wasm[4:8]) != 1 {
		return nil, nil, fmt.Errorf("%w: binary version %d", ErrUnsupported, binary.LittleEndian.Uint32(wasm[4:8]))
	}
	var secs []section
	r := &reader{b: wasm, off: 8}
	for !r.done() {
		id := r.byte()
		size := r.u32()
		data := r.bytes(int(size))
		if r.err != nil {
			return nil, nil, r.err
		}
		secs = append(secs, section{id, data})
	}
	var (
		importedFuncs, importedGlobals uint32
		definedFuncs, types            uint32
		memories                       int
		mutable                        []uint32 // indices of defined mutable globals
		segments                       []dataSegment
	)
	for _, s := range secs {
		switch s.id {
		case secStart:
			return nil, nil, fmt.Errorf("%w: a start function runs at every instantiation", ErrUnsupported)
		case secType:
			sr := &reader{b: s.data}
			types = sr.u32()
		case secImport:
			f, g, m, err := countImportKinds(s.data)
			if err != nil {
				return nil, nil, err
			}
			if m > 0 {
				return nil, nil, fmt.Errorf("%w: an imported memory", ErrUnsupported)
			}
			importedFuncs, importedGlobals = f, g
		case secFunction:
			definedFuncs = (&reader{b: s.data}).u32()
		case secMemory:
			memories += int((&reader{b: s.data}).u32())
		case secGlobal:
			sr := &reader{b: s.data}
			n := sr.u32()
			for g := uint32(0); g < n && sr.err == nil; g++ {
				sr.valtype()
				if sr.byte() == 0x01 {
					mutable = append(mutable, importedGlobals+g)
				}
				skipConstExpr(sr)
			}
			if sr.err != nil {
				return nil, nil, sr.err
			}
		case secExport:
			if bytes.Contains(s.data, []byte(SnapshotPrefix)) && exportsPrefix(s.data, SnapshotPrefix) {
				return nil, nil, fmt.Errorf("%w: the module already exports a name starting %q", ErrUnsupported, SnapshotPrefix)
			}
		case secData:
			var err error
			if segments, err = readData(s.data); err != nil {
				return nil, nil, err
			}
		}
	}
	if memories != 1 {
		return nil, nil, fmt.Errorf("%w: %d memories (one defined memory is needed)", ErrUnsupported, memories)
	}
	for _, s := range secs {
		if s.id == secCode {
			if uses, err := usesDataSegments(s.data); err != nil {
				return nil, nil, err
			} else if uses {
				return nil, nil, fmt.Errorf("%w: the code refers to data segments (memory.init, data.drop)", ErrUnsupported)
			}
		}
	}
	// Go's linker splits its data at runs of zeros into tens of thousands
	// of segments; copying each with its own instruction would make one
	// enormous function. The code refers to no segment by index (checked
	// above), so the segments are regrouped: each run of them with gaps
	// of at most maxDataGap bytes becomes one, the gaps written as the
	// zeros they are in a fresh memory.
	segments, err := coalesce(segments)
	if err != nil {
		return nil, nil, err
	}

	layout := &Layout{}
	var exports [][]byte
	for _, g := range mutable {
		name := SnapshotPrefix + "g" + strconv.FormatUint(uint64(g), 10)
		layout.GlobalExports = append(layout.GlobalExports, name)
		exports = append(exports, exportEntry(name, 0x03, g))
	}
	fnIdx := importedFuncs + definedFuncs
	exports = append(exports, exportEntry(DataExport, 0x00, fnIdx))

	// The data function: for each active segment, in order,
	// i32.const offset; i32.const 0; i32.const len; memory.init seg 0;
	// data.drop seg. Passive segments are left alone.
	body := []byte{0x00} // no locals
	for i, seg := range segments {
		if !seg.active {
			continue
		}
		body = appendS32(append(body, 0x41), seg.offset)
		body = append(body, 0x41, 0x00, 0x41)
		body = appendS32(body, int32(seg.size))
		body = appendU32(append(body, 0xFC, 0x08), uint32(i))
		body = append(body, 0x00)
		body = appendU32(append(body, 0xFC, 0x09), uint32(i))
	}
	body = append(body, 0x0B)
	code := appendU32(nil, uint32(len(body)))
	code = append(code, body...)
	voidType := []byte{0x60, 0x00, 0x00}

	var out []section
	added := map[byte]bool{}
	// add inserts a section the module lacks before the first section
	// that must follow it.
	add := func(before byte, id byte, data []byte) {
		if !added[id] && before != secCustom && sectionOrder[before] > sectionOrder[id] {
			out = append(out, section{id, data})
			added[id] = true
		}
	}
	for _, s := range secs {
		add(s.id, secType, appendVec(nil, 0, voidType))
		add(s.id, secFunction, appendVec(nil, 0, appendU32(nil, types)))
		add(s.id, secExport, appendVec(nil, 0, exports...))
		if len(segments) > 0 {
			add(s.id, secDataCount, appendU32(nil, uint32(len(segments))))
		}
		add(s.id, secCode, appendVec(nil, 0, code))
		var err error
		d := s.data
		switch s.id {
		case secType:
			d, err = appendToVec(s.data, voidType)
			added[secType] = true
		case secFunction:
			d, err = appendToVec(s.data, appendU32(nil, types))
			added[secFunction] = true
		case secExport:
			d, err = appendToVec(s.data, exports...)
			added[secExport] = true
		case secDataCount:
			d = appendU32(nil, uint32(len(segments)))
			added[secDataCount] = true
		case secCode:
			d, err = appendToVec(s.data, code)
			added[secCode] = true
		case secData:
			d = writeData(segments)
		}
		if err != nil {
			return nil, nil, err
		}
		out = append(out, section{s.id, d})
	}
	for _, id := range []byte{secType, secFunction, secExport, secCode} {
		if !added[id] {
			var d []byte
			switch id {
			case secType:
				d = appendVec(nil, 0, voidType)
			case secFunction:
				d = appendVec(nil, 0, appendU32(nil, types))
			case secExport:
				d = appendVec(nil, 0, exports...)
			case secCode:
				d = appendVec(nil, 0, code)
			}
			out = append(out, section{id, d})
		}
	}
	buf := make([]byte, 0, len(wasm)+len(code)+64)
	buf = append(buf, wasm[:8]...)
	for _, s := range out {
		buf = append(buf, s.id)
		buf = appendU32(buf, uint32(len(s.data)))
		buf = append(buf, s.data...)
	}
	return buf, layout, nil
}

type dataSegment struct {
	active bool
	offset int32  // active: where the segment goes
	size   uint32 // length of init
	init   []byte
	raw    []byte // the whole encoded passive segment, as read
}

// readData reads the data section. Active segments must target memory 0
// at an i32.const offset.
func readData(data []byte) ([]dataSegment, error) {
	r := &reader{b: data}
	n := r.u32()
	segs := make([]dataSegment, 0, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		start := r.off
		switch flag := r.u32(); flag {
		case 0, 2:
			if flag == 2 {
				if mem := r.u32(); mem != 0 {
					return nil, fmt.Errorf("%w: data segment %d targets memory %d", ErrUnsupported, i, mem)
				}
			}
			if op := r.byte(); op != 0x41 {
				return nil, fmt.Errorf("%w: data segment %d is placed by opcode %#x, not i32.const", ErrUnsupported, i, op)
			}
			off := r.s32()
			if end := r.byte(); end != 0x0B {
				return nil, fmt.Errorf("%w: data segment %d has an offset expression longer than one constant", ErrUnsupported, i)
			}
			size := r.u32()
			init := r.bytes(int(size))
			segs = append(segs, dataSegment{active: true, offset: off, size: size, init: init})
		case 1:
			size := r.u32()
			r.bytes(int(size))
			segs = append(segs, dataSegment{raw: data[start:r.off]})
		default:
			return nil, fmt.Errorf("%w: data segment %d has flags %d", ErrMalformed, i, flag)
		}
	}
	if r.err == nil && !r.done() {
		return nil, fmt.Errorf("%w: trailing bytes in the data section", ErrMalformed)
	}
	return segs, r.err
}

// writeData encodes every segment as passive.
func writeData(segs []dataSegment) []byte {
	out := appendU32(nil, uint32(len(segs)))
	for _, s := range segs {
		if !s.active {
			out = append(out, s.raw...)
			continue
		}
		out = append(out, 0x01)
		out = appendU32(out, s.size)
		out = append(out, s.init...)
	}
	return out
}

func exportEntry(name string, kind byte, idx uint32) []byte {
	b := appendU32(nil, uint32(len(name)))
	b = append(b, name...)
	b = append(b, kind)
	return appendU32(b, idx)
}

func exportsPrefix(data []byte, prefix string) bool {
	r := &reader{b: data}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		nm := r.bytes(int(r.u32()))
		r.byte()
		r.u32()
		if strings.HasPrefix(string(nm), prefix) {
			return true
		}
	}
	return false
}

// countImportKinds counts imported functions, globals and memories.
func countImportKinds(data []byte) (funcs, globals uint32, memories int, err error) {
	r := &reader{b: data}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.bytes(int(r.u32())) // module
		r.bytes(int(r.u32())) // name
		switch kind := r.byte(); kind {
		case 0x00:
			r.u32()
			funcs++
		case 0x01:
			r.byte()
			r.limits()
		case 0x02:
			r.limits()
			memories++
		case 0x03:
			r.byte()
			r.byte()
			globals++
		case 0x04:
			r.byte()
			r.u32()
		default:
			return 0, 0, 0, fmt.Errorf("%w: import kind %#x", ErrUnsupported, kind)
		}
	}
	return funcs, globals, memories, r.err
}

// skipConstExpr skips a constant expression up to and including its end.
func skipConstExpr(r *reader) {
	for !r.done() {
		op := r.byte()
		if op == 0x0B {
			return
		}
		if err := skipImmediates(r, op); err != nil {
			r.err = err
			return
		}
	}
}

// s32 reads a signed LEB128 of at most 32 bits.
func (r *reader) s32() int32 {
	var v int64
	var shift uint
	for i := 0; i < 5; i++ {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= int64(c&0x7F) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return int32(v)
		}
	}
	r.fail("s32 too long at byte %d", r.off)
	return 0
}

// SnapshotExports reports whether wasm was prepared by PrepareSnapshot,
// and the exports of its mutable globals in index order.
func SnapshotExports(wasm []byte) (globals []string, prepared bool) {
	if len(wasm) < 8 {
		return nil, false
	}
	r := &reader{b: wasm, off: 8}
	for !r.done() {
		id := r.byte()
		data := r.bytes(int(r.u32()))
		if r.err != nil || id != secExport {
			continue
		}
		er := &reader{b: data}
		n := er.u32()
		for i := uint32(0); i < n && er.err == nil; i++ {
			name := string(er.bytes(int(er.u32())))
			er.byte()
			er.u32()
			switch {
			case name == DataExport:
				prepared = true
			case strings.HasPrefix(name, SnapshotPrefix+"g"):
				globals = append(globals, name)
			}
		}
	}
	return globals, prepared
}

// maxDataGap is the largest run of zeros coalesce writes out rather than
// starting another segment.
const maxDataGap = 4096

// coalesce merges the active segments into few. Segments that do not
// overlap can be applied in any order, so they are sorted by offset, and
// each run of them with gaps of at most maxDataGap bytes becomes one
// segment, the gaps written as the zeros they are in a fresh memory (no
// other segment writes there: none overlap). Overlapping segments, where
// the order decides which bytes win, are not regrouped: ErrUnsupported.
// Passive segments are dropped: nothing refers to them.
func coalesce(segs []dataSegment) ([]dataSegment, error) {
	var active []dataSegment
	for _, s := range segs {
		if s.active && s.size > 0 {
			active = append(active, s)
		}
	}
	slices.SortStableFunc(active, func(a, b dataSegment) int { return cmp.Compare(a.offset, b.offset) })
	var out []dataSegment
	for _, s := range active {
		if n := len(out); n > 0 {
			last := &out[n-1]
			end := int64(last.offset) + int64(last.size)
			gap := int64(s.offset) - end
			if gap < 0 {
				return nil, fmt.Errorf("%w: data segments overlap at %#x", ErrUnsupported, s.offset)
			}
			if gap <= maxDataGap {
				buf := last.init
				buf = append(buf, make([]byte, gap)...)
				buf = append(buf, s.init...)
				last.init, last.size = buf, uint32(len(buf))
				continue
			}
		}
		out = append(out, dataSegment{active: true, offset: s.offset, size: s.size, init: append([]byte(nil), s.init...)})
	}
	return out, nil
}

// usesDataSegments reports whether code uses memory.init or data.drop.
func usesDataSegments(data []byte) (bool, error) {
	r := &reader{b: data}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		fn := r.bytes(int(r.u32()))
		fr := &reader{b: fn}
		groups := fr.u32()
		for g := uint32(0); g < groups && fr.err == nil; g++ {
			fr.u32()
			fr.valtype()
		}
		for !fr.done() {
			op := fr.byte()
			if op == 0xFC {
				if sub := (&reader{b: fn, off: fr.off}).u32(); sub == 8 || sub == 9 {
					return true, nil
				}
			}
			if err := skipImmediates(fr, op); err != nil {
				return false, err
			}
		}
		if fr.err != nil {
			return false, fr.err
		}
	}
	return false, r.err
}
