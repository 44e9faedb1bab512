// Package extism is the Extism kernel, served by our own wazero host.
//
// An Extism plugin imports its memory-management and I/O functions from
// "extism:host/env" (the "kernel") and the host's functions from
// "extism:host/user". Extism's kernel is a Wasm module with a memory of its
// own: the guest moves bytes in and out of that memory through load/store
// imports, 8 bytes per call. go-sdk serves each of those imports with a Go
// function that calls into its kernel module, which costs a fresh call
// engine per 8 bytes (see docs/RATIONALE.md). We generate our own kernel
// module here instead, so that the guest's load/store calls are direct
// Wasm-to-Wasm calls; only the functions that need the host (config,
// vars, HTTP, logging and hyper-mcp's host functions) leave Wasm for Go.
//
// Layout of the kernel's memory: offset 0 is the null offset; blocks start
// at Base. Each block is an 8-byte little-endian length followed by
// the data, rounded up to 8 bytes. Allocation is a bump allocator, reset
// at the start of every call (Extism's own kernel is reset by the host
// before every call too); freeing the most recent block gives its space
// back. The memory grows on demand up to the kernel's page cap, and an
// allocation beyond it returns 0, as Extism's does.
//
// Every function that calls into Go checks the exported "dsh_abort" flag
// afterwards and traps when the host set it: that is how a host function
// fails the call (a denied HTTP request, an unsupported hyper-mcp
// function) without panicking. The host reports the reason it recorded,
// not the trap.
//
// The package knows the kernel and the names and signatures of the
// Extism and hyper-mcp host functions; the host implements the Go ones.
package extism

import (
	"encoding/binary"
	"slices"

	"github.com/tetratelabs/wazero/api"
)

// Base is the offset of the first block header.
const Base = 8

// Names of the kernel's exported globals.
const (
	GlobalHeap   = "dsh_heap"
	GlobalInOff  = "dsh_in_off"
	GlobalInLen  = "dsh_in_len"
	GlobalOutOff = "dsh_out_off"
	GlobalOutLen = "dsh_out_len"
	GlobalErr    = "dsh_err"
	GlobalAbort  = "dsh_abort"
)

// GoModule is the host module the generated kernel imports its Go
// functions from. Guests cannot import it: the community ABI check allows
// only extism:host/env, extism:host/user and WASI.
const GoModule = "dsh:extism-go"

const (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

// GoFunc is a function the kernel forwards to Go.
type GoFunc struct {
	Name    string
	Params  []api.ValueType
	Results []api.ValueType
}

// GoFuncs are the kernel functions implemented in Go: Extism's host
// functions in extism:host/env, then hyper-mcp's extism:host/user set with
// the exact signatures of the host_fn! declarations in hyper-mcp's
// src/service.rs (PTR is I64), then the legacy extism:host/user
// config_get of old mcp.run servlets, which has env's signature and
// shares its export.
var GoFuncs = []GoFunc{
	{"config_get", []api.ValueType{i64}, []api.ValueType{i64}},
	{"var_get", []api.ValueType{i64}, []api.ValueType{i64}},
	{"var_set", []api.ValueType{i64, i64}, nil},
	{"http_request", []api.ValueType{i64, i64}, []api.ValueType{i64}},
	{"http_status_code", nil, []api.ValueType{i32}},
	{"http_headers", nil, []api.ValueType{i64}},
	{"log_info", []api.ValueType{i64}, nil},
	{"log_debug", []api.ValueType{i64}, nil},
	{"log_warn", []api.ValueType{i64}, nil},
	{"log_error", []api.ValueType{i64}, nil},
	{"log_trace", []api.ValueType{i64}, nil},
	{"get_log_level", nil, []api.ValueType{i32}},
	// hyper-mcp's host_fn! set (extism:host/user).
	{"create_elicitation", []api.ValueType{i64}, []api.ValueType{i64}},
	{"create_message", []api.ValueType{i64}, []api.ValueType{i64}},
	{"list_roots", nil, []api.ValueType{i64}},
	{"notify_logging_message", []api.ValueType{i64}, nil},
	{"notify_progress", []api.ValueType{i64}, nil},
	{"notify_prompt_list_changed", nil, nil},
	{"notify_resource_list_changed", nil, nil},
	{"notify_resource_updated", []api.ValueType{i64}, nil},
	{"notify_tool_list_changed", nil, nil},
}

// UserFuncs are the names a plugin may import from
// extism:host/user: hyper-mcp's host_fn! set and the legacy config_get.
var UserFuncs = []string{"create_elicitation", "create_message", "list_roots",
	"notify_logging_message", "notify_progress", "notify_prompt_list_changed",
	"notify_resource_list_changed", "notify_resource_updated", "notify_tool_list_changed", "config_get"}

// EnvFuncs are the names a plugin may import from extism:host/env.
var EnvFuncs = []string{"alloc", "free", "length", "length_unsafe", "load_u8", "load_u64",
	"store_u8", "store_u64", "input_length", "input_offset", "input_load_u8", "input_load_u64",
	"output_set", "error_set", "config_get", "var_get", "var_set", "http_request",
	"http_status_code", "http_headers", "log_info", "log_debug", "log_warn", "log_error",
	"log_trace", "get_log_level"}

// Wasm opcodes used by the kernel.
const (
	opUnreachable = 0x00
	opIf          = 0x04
	opEnd         = 0x0b
	opReturn      = 0x0f
	opCall        = 0x10
	opLocalGet    = 0x20
	opLocalSet    = 0x21
	opGlobalGet   = 0x23
	opGlobalSet   = 0x24
	opI64Load     = 0x29
	opI32Load8U   = 0x2d
	opI64Store    = 0x37
	opI32Store8   = 0x3a
	opMemorySize  = 0x3f
	opMemoryGrow  = 0x40
	opI32Const    = 0x41
	opI64Const    = 0x42
	opI32Eq       = 0x46
	opI64Eqz      = 0x50
	opI64Eq       = 0x51
	opI64Ne       = 0x52
	opI64LtU      = 0x54
	opI64GtU      = 0x56
	opI64GeU      = 0x5a
	opI64Add      = 0x7c
	opI64Sub      = 0x7d
	opI64And      = 0x83
	opI64Shl      = 0x86
	opI64ShrU     = 0x88
	opI32WrapI64  = 0xa7
	opI64ExtI32U  = 0xad
	blockEmpty    = 0x40
)

// Global indices in the kernel.
const (
	gHeap = iota
	gInOff
	gInLen
	gOutOff
	gOutLen
	gErr
	gAbort
)

type kfunc struct {
	name    string
	params  []api.ValueType
	results []api.ValueType
	locals  []api.ValueType
	body    []byte
}

func uleb(b []byte, v uint64) []byte {
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

func sleb(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func wname(b []byte, s string) []byte { return append(uleb(b, uint64(len(s))), s...) }

// code is a small assembler for function bodies.
type code []byte

func (c code) op(ops ...byte) code        { return append(c, ops...) }
func (c code) local(op byte, i int) code  { return uleb(append(c, op), uint64(i)) }
func (c code) global(op byte, i int) code { return uleb(append(c, op), uint64(i)) }
func (c code) i64(v int64) code           { return sleb(append(c, opI64Const), v) }
func (c code) i32(v int32) code           { return sleb(append(c, opI32Const), int64(v)) }
func (c code) mem(op byte, align, off int) code {
	return uleb(uleb(append(c, op), uint64(align)), uint64(off))
}

// retIf0 returns 0 (of i64) when the i32 on the stack is true.
func (c code) retI64If(v int64) code { return c.op(opIf, blockEmpty).i64(v).op(opReturn, opEnd) }

// trapIf traps when the i32 on the stack is true.
func (c code) trapIf() code { return c.op(opIf, blockEmpty, opUnreachable, opEnd) }

// addr32 pushes local i as a 32-bit address, trapping if it has high bits:
// an offset past 4 GiB must not wrap onto the kernel's low memory.
func (c code) addr32(i int) code {
	return c.local(opLocalGet, i).i64(32).op(opI64ShrU).i64(0).op(opI64Ne).trapIf().
		local(opLocalGet, i).op(opI32WrapI64)
}

// align8 turns the i64 on the stack into its round-up to 8.
func (c code) align8() code { return c.i64(7).op(opI64Add).i64(-8).op(opI64And) }

// memBytes pushes the memory's size in bytes as i64.
func (c code) memBytes() code { return c.op(opMemorySize, 0, opI64ExtI32U).i64(16).op(opI64Shl) }

func kernelFuncs() []kfunc {
	I, L := []api.ValueType{i64}, []api.ValueType{i64}
	var fs []kfunc
	// alloc(n) -> offset; 0 for n == 0 or when memory runs out.
	{
		const n, p, end = 0, 1, 2
		c := code{}.local(opLocalGet, n).op(opI64Eqz).retI64If(0).
			local(opLocalGet, n).i64(0xffffffff).op(opI64GtU).retI64If(0).
			global(opGlobalGet, gHeap).i64(8).op(opI64Add).local(opLocalSet, p).
			local(opLocalGet, p).local(opLocalGet, n).align8().op(opI64Add).local(opLocalSet, end).
			local(opLocalGet, end).memBytes().op(opI64GtU).
			op(opIf, blockEmpty).
			local(opLocalGet, end).memBytes().op(opI64Sub).i64(65535).op(opI64Add).i64(16).op(opI64ShrU).
			op(opI32WrapI64, opMemoryGrow, 0).i32(-1).op(opI32Eq).retI64If(0).
			op(opEnd).
			global(opGlobalGet, gHeap).op(opI32WrapI64).local(opLocalGet, n).mem(opI64Store, 3, 0).
			local(opLocalGet, end).global(opGlobalSet, gHeap).
			local(opLocalGet, p)
		fs = append(fs, kfunc{name: "alloc", params: I, results: L, locals: []api.ValueType{i64, i64}, body: c})
	}
	// free(offset): gives back the most recent block; others wait for
	// the reset at the next call.
	{
		c := code{}.local(opLocalGet, 0).i64(Base+8).op(opI64LtU).op(opIf, blockEmpty, opReturn, opEnd).
			local(opLocalGet, 0).global(opGlobalGet, gHeap).op(opI64GeU).op(opIf, blockEmpty, opReturn, opEnd).
			local(opLocalGet, 0).i64(8).op(opI64Sub, opI32WrapI64).mem(opI64Load, 3, 0).align8().
			local(opLocalGet, 0).op(opI64Add).global(opGlobalGet, gHeap).op(opI64Eq).
			op(opIf, blockEmpty).local(opLocalGet, 0).i64(8).op(opI64Sub).global(opGlobalSet, gHeap).op(opEnd)
		fs = append(fs, kfunc{name: "free", params: I, body: c})
	}
	// length(offset) -> the block's length, 0 for an offset outside the heap.
	length := code{}.local(opLocalGet, 0).i64(Base+8).op(opI64LtU).retI64If(0).
		local(opLocalGet, 0).global(opGlobalGet, gHeap).op(opI64GeU).retI64If(0).
		local(opLocalGet, 0).i64(8).op(opI64Sub, opI32WrapI64).mem(opI64Load, 3, 0)
	fs = append(fs, kfunc{name: "length", params: I, results: L, body: length},
		kfunc{name: "length_unsafe", params: I, results: L, body: length})
	fs = append(fs,
		kfunc{name: "load_u8", params: I, results: []api.ValueType{i32}, body: code{}.addr32(0).mem(opI32Load8U, 0, 0)},
		kfunc{name: "load_u64", params: I, results: L, body: code{}.addr32(0).mem(opI64Load, 3, 0)},
		kfunc{name: "store_u8", params: []api.ValueType{i64, i32}, body: code{}.addr32(0).local(opLocalGet, 1).mem(opI32Store8, 0, 0)},
		kfunc{name: "store_u64", params: []api.ValueType{i64, i64}, body: code{}.addr32(0).local(opLocalGet, 1).mem(opI64Store, 3, 0)},
		kfunc{name: "input_length", results: L, body: code{}.global(opGlobalGet, gInLen)},
		kfunc{name: "input_offset", results: L, body: code{}.global(opGlobalGet, gInOff)},
	)
	// input_load_*(i): byte i of the input; reading past it traps.
	inputLoad := func(op byte, align int) code {
		return code{}.local(opLocalGet, 0).global(opGlobalGet, gInLen).op(opI64GeU).trapIf().
			global(opGlobalGet, gInOff).local(opLocalGet, 0).op(opI64Add, opI32WrapI64).mem(op, align, 0)
	}
	fs = append(fs,
		kfunc{name: "input_load_u8", params: I, results: []api.ValueType{i32}, body: inputLoad(opI32Load8U, 0)},
		kfunc{name: "input_load_u64", params: I, results: L, body: inputLoad(opI64Load, 3)},
		kfunc{name: "output_set", params: []api.ValueType{i64, i64},
			body: code{}.local(opLocalGet, 0).global(opGlobalSet, gOutOff).local(opLocalGet, 1).global(opGlobalSet, gOutLen)},
		kfunc{name: "error_set", params: I, body: code{}.local(opLocalGet, 0).global(opGlobalSet, gErr)},
	)
	return fs
}

// Module returns the kernel's bytes. maxPages caps its memory.
func Module(maxPages uint32) []byte {
	type sig struct{ p, r []api.ValueType }
	var types []sig
	typeIdx := func(p, r []api.ValueType) int {
		for i, t := range types {
			if slices.Equal(t.p, p) && slices.Equal(t.r, r) {
				return i
			}
		}
		types = append(types, sig{p, r})
		return len(types) - 1
	}
	// Imports: the Go functions. Defined functions: the wrappers that
	// forward to them and check the abort flag, then the pure-Wasm kernel.
	nImp := len(GoFuncs)
	var funcs []kfunc
	for i, g := range GoFuncs {
		c := code{}
		for j := range g.Params {
			c = c.local(opLocalGet, j)
		}
		c = c.local(opCall, i).global(opGlobalGet, gAbort).trapIf()
		funcs = append(funcs, kfunc{name: g.Name, params: g.Params, results: g.Results, body: c})
	}
	funcs = append(funcs, kernelFuncs()...)

	section := func(out []byte, id byte, body []byte) []byte {
		return append(uleb(append(out, id), uint64(len(body))), body...)
	}
	vec := func(items [][]byte) []byte {
		b := uleb(nil, uint64(len(items)))
		for _, it := range items {
			b = append(b, it...)
		}
		return b
	}
	var imports, fnDecls, exports, bodies [][]byte
	for _, g := range GoFuncs {
		b := wname(wname(nil, GoModule), g.Name)
		imports = append(imports, uleb(append(b, 0x00), uint64(typeIdx(g.Params, g.Results))))
	}
	for i, f := range funcs {
		fnDecls = append(fnDecls, uleb(nil, uint64(typeIdx(f.params, f.results))))
		exports = append(exports, uleb(append(wname(nil, f.name), 0x00), uint64(nImp+i)))
		var body []byte
		if len(f.locals) == 0 {
			body = uleb(body, 0)
		} else {
			body = uleb(body, uint64(len(f.locals)))
			for _, l := range f.locals {
				body = append(uleb(body, 1), l)
			}
		}
		body = append(append(body, f.body...), opEnd)
		bodies = append(bodies, append(uleb(nil, uint64(len(body))), body...))
	}
	exports = append(exports, append(wname(nil, "memory"), 0x02, 0x00))
	globals := []struct {
		name string
		t    api.ValueType
		init int64
	}{{GlobalHeap, i64, Base}, {GlobalInOff, i64, 0}, {GlobalInLen, i64, 0}, {GlobalOutOff, i64, 0},
		{GlobalOutLen, i64, 0}, {GlobalErr, i64, 0}, {GlobalAbort, i32, 0}}
	var gdefs [][]byte
	for i, g := range globals {
		b := []byte{g.t, 0x01}
		if g.t == i64 {
			b = sleb(append(b, opI64Const), g.init)
		} else {
			b = sleb(append(b, opI32Const), g.init)
		}
		gdefs = append(gdefs, append(b, opEnd))
		exports = append(exports, uleb(append(wname(nil, g.name), 0x03), uint64(i)))
	}
	var tdefs [][]byte
	for _, t := range types {
		b := []byte{0x60}
		b = append(uleb(b, uint64(len(t.p))), t.p...)
		b = append(uleb(b, uint64(len(t.r))), t.r...)
		tdefs = append(tdefs, b)
	}
	out := []byte{0x00, 'a', 's', 'm'}
	out = binary.LittleEndian.AppendUint32(out, 1)
	out = section(out, 1, vec(tdefs))
	out = section(out, 2, vec(imports))
	out = section(out, 3, vec(fnDecls))
	out = section(out, 5, uleb(uleb([]byte{1, 0x01}, 1), uint64(max(maxPages, 1))))
	out = section(out, 6, vec(gdefs))
	out = section(out, 7, vec(exports))
	out = section(out, 10, vec(bodies))
	return out
}
