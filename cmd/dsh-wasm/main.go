// Command dsh-wasm runs AI agents whose tools and prompt contributors are
// sandboxed WebAssembly plugins.
//
// Exit status: 0 on success, 1 when the work failed, 2 on a usage error.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
