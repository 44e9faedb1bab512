//go:build wasip1

// Command extism is an Extism-ABI module (it imports the Extism kernel and
// exports "call") that speaks no known tool ABI (it lacks describe), which
// the host must refuse.
package main

//go:wasmimport extism:host/env input_length
func inputLength() uint64

//go:wasmimport extism:host/env output_set
func outputSet(offset, length uint64)

func main() {}

//go:wasmexport call
func call() int32 {
	outputSet(0, inputLength())
	return 0
}
