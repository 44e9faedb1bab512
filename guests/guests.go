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
// and .ci/check-guests fails when a committed module differs from a fresh
// build. Regenerate after changing a guest, the SDK (hostfns) or the Go
// toolchain.
package guests

import (
	"embed"
	"io/fs"
)

//go:generate go run ./internal/gen

//go:embed *.wasm
var embedded embed.FS

// FS holds the built-in modules as NAME.wasm at its root.
var FS fs.FS = embedded
