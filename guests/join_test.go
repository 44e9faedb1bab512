package guests

import (
	"embed"
	"errors"
	"io/fs"
	"slices"
	"testing"
)

// Join reads each module from its part and lists the union at its root,
// sorted; All lists the eight built-ins.
func TestJoin(t *testing.T) {
	j := Join(ToolFS, Facts)
	got, err := fs.Glob(j, "*.wasm")
	if err != nil || !slices.Equal(got, []string{"facts.wasm", "tool-fs.wasm"}) {
		t.Fatalf("Glob = %v, %v", got, err)
	}
	for _, name := range []string{"facts.wasm.sha256", "tool-fs.wasm"} {
		if _, err := fs.ReadFile(j, name); err != nil {
			t.Errorf("read %s: %v", name, err)
		}
	}
	if _, err := fs.ReadFile(j, "tool-bash.wasm"); !errorsIsNotExist(err) {
		t.Errorf("read tool-bash.wasm from Join(ToolFS, Facts): %v, want not-exist", err)
	}
	all, _ := fs.Glob(All(), "*.wasm")
	want := []string{"facts.wasm", "hooks-claude.wasm", "hooks-codex.wasm", "subagent.wasm", "tool-bash.wasm", "tool-fs.wasm", "tool-todo.wasm", "tool-web.wasm"}
	if !slices.Equal(all, want) {
		t.Errorf("All() holds %v, want %v", all, want)
	}
}

func errorsIsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// All is one embed.FS, so that the plugin host streams its modules from
// the binary and trusts their committed digests instead of copying and
// hashing 32 MB at each start.
func TestAllIsOneEmbedFS(t *testing.T) {
	if _, ok := All().(embed.FS); !ok {
		t.Errorf("All() is a %T, want an embed.FS", All())
	}
}
