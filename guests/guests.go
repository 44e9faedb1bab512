// Package guests holds dsh-wasm's built-in plugins: each subdirectory NAME
// is a wasip1 plugin whose committed build, NAME.wasm, is embedded here
// and loaded as the source "builtin:NAME" (pass All, or only the ones a
// program loads, as deploy.Options.Builtins or plugin.Options.Builtins).
//
// The built-ins are opt-in: a program links only the modules it names.
// Each module is its own variable (Facts, ToolFS, ...), so a program that
// passes guests.ToolFS links tool-fs alone (about 4 MB), one that calls
// All links all eight (about 32 MB), and one that does not import this
// package links none.
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
	"errors"
	"io/fs"
	"slices"
	"strings"
)

//go:generate go run ./internal/gen

// One variable per module, each holding NAME.wasm and NAME.wasm.sha256
// at its root: the linker keeps only the ones a program refers to.
var (
	//go:embed facts.wasm facts.wasm.sha256
	Facts embed.FS
	//go:embed hooks-claude.wasm hooks-claude.wasm.sha256
	HooksClaude embed.FS
	//go:embed hooks-codex.wasm hooks-codex.wasm.sha256
	HooksCodex embed.FS
	//go:embed subagent.wasm subagent.wasm.sha256
	Subagent embed.FS
	//go:embed tool-bash.wasm tool-bash.wasm.sha256
	ToolBash embed.FS
	//go:embed tool-fs.wasm tool-fs.wasm.sha256
	ToolFS embed.FS
	//go:embed tool-todo.wasm tool-todo.wasm.sha256
	ToolTodo embed.FS
	//go:embed tool-web.wasm tool-web.wasm.sha256
	ToolWeb embed.FS

	//go:embed *.wasm *.wasm.sha256
	all embed.FS
)

// All holds every built-in module as NAME.wasm at its root. It is one
// embed.FS, which the plugin host streams from the binary without
// copying, trusting the committed digests.
func All() fs.FS { return all }

// Join holds the files at the roots of parts, as one directory: the
// built-ins a program chooses, e.g. Join(guests.Facts, guests.ToolFS).
// A name in more than one part is read from the first. Unlike one
// embed.FS (All, ToolFS, ...), whose modules the host streams and
// trusts by their committed digests, a joined set is read like any
// fs.FS: each module is copied and hashed as it loads.
func Join(parts ...fs.FS) fs.FS { return joined(parts) }

type joined []fs.FS

func (j joined) Open(name string) (fs.File, error) {
	if name == "." {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("a joined set of built-ins lists with ReadDir")}
	}
	for _, p := range j {
		f, err := p.Open(name)
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return f, err
		}
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// ReadDir lists the root only: the built-ins sit at it.
func (j joined) ReadDir(name string) ([]fs.DirEntry, error) {
	if name != "." {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	var out []fs.DirEntry
	seen := map[string]bool{}
	for _, p := range j {
		es, err := fs.ReadDir(p, ".")
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			if !seen[e.Name()] {
				seen[e.Name()] = true
				out = append(out, e)
			}
		}
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}
