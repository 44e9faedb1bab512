// Package guests holds dsh-wasm's built-in plugins: each subdirectory NAME
// is a wasip1 plugin whose committed build, NAME.wasm, is embedded here
// and loaded as the source "builtin:NAME" (pass FS as
// plugin.Options.Builtins).
//
// The modules are committed so that the host builds without a wasip1
// toolchain step, and they are reproducible: `go generate ./guests`
// rebuilds every one with
//
//	GOOS=wasip1 GOARCH=wasm go build -trimpath -buildvcs=false -buildmode=c-shared -o NAME.wasm ./NAME
//
// and writes NAME.wasm.sha256, the module's digest, which the host reads
// instead of hashing the module at every start. .ci/check-guests fails
// when a committed module or digest differs from a fresh build. Regenerate after changing a guest, the SDK (hostfns) or the Go
// toolchain.
package guests

import (
	"embed"
	"io/fs"
)

//go:generate go run ./internal/gen

//go:embed *.wasm *.wasm.sha256
var embedded embed.FS

// FS holds the built-in modules as NAME.wasm at its root.
var FS fs.FS = embedded
