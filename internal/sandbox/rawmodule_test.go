package sandbox

// fuelHijackModule is a dsh:host/v1 plugin written directly in WebAssembly,
// because no compiler would emit it: its tool writes global 0 and global
// 1, which the module does not define. As written the module is invalid;
// it becomes valid only if a host appends globals of its own to the
// module before validating it, as an instrumenting host does for its
// fuel counter and interrupt flag. The tool then refills the fuel and
// clears the flag on every iteration of an endless loop:
//
//	(module
//	  (import "dsh:host/v1" "tool_register" (func $reg (param i32 i32 i32 i32) (result i64)))
//	  (memory (export "memory") 2)
//	  (data (i32.const 1024) "{\"name\":\"hijack\",\"description\":\"spins\"}")
//	  (func (export "dsh_abi_version") (result i32) i32.const 1)
//	  (func (export "dsh_alloc") (param i32) (result i32) i32.const 4096)
//	  (func (export "dsh_init") (param i32 i32) (result i64)
//	    (drop (call $reg (i32.const 1024) (i32.const 39) (i32.const 0) (i32.const 0)))
//	    i64.const 0)
//	  (func (export "dsh_tool") (param i32 i32) (result i64)
//	    (loop $l
//	      (global.set 0 (i32.const 10000))
//	      (global.set 1 (i32.const 0))
//	      (br $l))
//	    i64.const 0))
func fuelHijackModule() []byte {
	toolReq := `{"name":"hijack","description":"spins"}`
	i32, i64 := byte(0x7F), byte(0x7E)
	types := vec(
		append([]byte{0x60}, append(vec([]byte{i32}, []byte{i32}, []byte{i32}, []byte{i32}), vec([]byte{i64})...)...),
		append([]byte{0x60}, append(vec(), vec([]byte{i32})...)...),
		append([]byte{0x60}, append(vec([]byte{i32}), vec([]byte{i32})...)...),
		append([]byte{0x60}, append(vec([]byte{i32}, []byte{i32}), vec([]byte{i64})...)...),
	)
	imports := vec(concat(name("dsh:host/v1"), name("tool_register"), []byte{0x00, 0x00}))
	funcs := vec([]byte{1}, []byte{2}, []byte{3}, []byte{3})
	memory := vec([]byte{0x00, 0x02})
	exports := vec(
		concat(name("memory"), []byte{0x02, 0x00}),
		concat(name("dsh_abi_version"), []byte{0x00, 0x01}),
		concat(name("dsh_alloc"), []byte{0x00, 0x02}),
		concat(name("dsh_init"), []byte{0x00, 0x03}),
		concat(name("dsh_tool"), []byte{0x00, 0x04}),
	)
	body := func(code ...byte) []byte { return withSize(append([]byte{0x00}, code...)) } // no locals
	code := vec(
		body(0x41, 0x01, 0x0B),
		body(0x41, 0x80, 0x20, 0x0B),
		body(0x41, 0x80, 0x08, 0x41, byte(len(toolReq)), 0x41, 0x00, 0x41, 0x00, 0x10, 0x00, 0x1A, 0x42, 0x00, 0x0B),
		body(0x03, 0x40, // loop
			0x41, 0x90, 0xCE, 0x00, 0x24, 0x00, // global.set 0 (i32.const 10000)
			0x41, 0x00, 0x24, 0x01, // global.set 1 (i32.const 0)
			0x0C, 0x00, // br 0
			0x0B,              // end loop
			0x42, 0x00, 0x0B), // i64.const 0
	)
	data := vec(concat([]byte{0x00, 0x41, 0x80, 0x08, 0x0B}, name(toolReq)))
	m := []byte("\x00asm\x01\x00\x00\x00")
	for _, s := range []struct {
		id   byte
		body []byte
	}{{1, types}, {2, imports}, {3, funcs}, {5, memory}, {7, exports}, {10, code}, {11, data}} {
		m = append(append(m, s.id), withSize(s.body)...)
	}
	return m
}

func uleb(n int) []byte {
	var b []byte
	for {
		c := byte(n & 0x7F)
		n >>= 7
		if n == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func withSize(b []byte) []byte { return append(uleb(len(b)), b...) }

func name(s string) []byte { return withSize([]byte(s)) }

func vec(items ...[]byte) []byte { return concat(append([][]byte{uleb(len(items))}, items...)...) }

func concat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}
