//go:build wasip1

// Command noexports is a WASI reactor that exports none of the functions
// a dsh:host/v1 plugin must: the host must refuse to load it.
package main

func main() {}

//go:wasmexport run
func run() int32 { return 42 }
