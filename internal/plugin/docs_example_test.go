package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// TestDocsCExample builds the freestanding C plugin of docs/ABI.md as the
// guide says, loads it, and renders what it contributes, so the guide
// cannot drift from the ABI.
func TestDocsCExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/ABI.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	i := strings.Index(text, "A complete plugin in freestanding C")
	if i < 0 {
		t.Fatal("docs/ABI.md has no C example")
	}
	start := strings.Index(text[i:], "```c\n")
	end := strings.Index(text[i+start+5:], "```")
	if start < 0 || end < 0 {
		t.Fatal("the C example is not a ```c block")
	}
	src := filepath.Join(t.TempDir(), "hello.c")
	if err := os.WriteFile(src, []byte(text[i+start+5:i+start+5+end]), 0o644); err != nil {
		t.Fatal(err)
	}
	wasm := filepath.Join(t.TempDir(), "hello.wasm")
	checkCBuild(t, guestbuild.CompileC(wasm, src))
	h := newHost(t)
	if _, err := h.Load(bg, Spec{Name: "hello", Source: wasm}); err != nil {
		t.Fatal(err)
	}
	a, err := h.Registry().Assemble(bg, prompt.AssembleContext{Agent: agent("a", "m")})
	if err != nil {
		t.Fatal(err)
	}
	out, err := prompt.Render(a)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Greet with hello from C.") {
		t.Fatalf("assembled prompt %q lacks the example's section", out)
	}
}
