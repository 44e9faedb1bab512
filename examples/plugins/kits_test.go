// Package plugins_test builds each author kit in examples/plugins from
// source with its own build.sh and runs its example plugin through the
// real agent loop: the model calls its tool, and its section, with its
// variable's value, is in the system prompt the model was sent.
//
// A missing toolchain skips a kit locally and fails it under CI=true,
// where .ci/run installs them all.
package plugins_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/prereq"
	"github.com/dsh-wasm/dsh-wasm/plugintest"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

// Kit is one language kit's example and what it must show.
type kit struct {
	lang, tool, args, result, system string
}

var kits = []kit{
	{"go", "greet", `{"name":"Ann"}`, "Hello, Ann! (greeting #1)", "Greet people with the greet tool, never by hand; it says Hello."},
	{"c", "c_reverse", `{"text":"h\u00e9llo \"q\""}`, `"q" olléh`, "The C kit says hello from C. Reverse text with c_reverse."},
	{"rust", "rust_words", `{"text":"one two  three \ud83d\ude00"}`, "4", "The Rust kit says hello from Rust. Count words with rust_words."},
	{"as", "as_upper", `{"text":"shout \u00e9"}`, "SHOUT É", "The AssemblyScript kit says hello from AssemblyScript. Shout with as_upper."},
}

func TestKitsThroughTheLoop(t *testing.T) {
	for _, k := range kits {
		t.Run(k.lang, func(t *testing.T) {
			wasm := BuildKit(t, k.lang, k.lang, filepath.Join(t.TempDir(), k.lang+".wasm"))
			h := plugintest.New(t)
			h.Load(wasm)
			turn := h.Turn(k.tool, k.args)
			if turn.IsError || turn.Result != k.result {
				t.Errorf("%s = %q (error %v), want %q", k.tool, turn.Result, turn.IsError, k.result)
			}
			if !strings.Contains(turn.System, k.system) {
				t.Errorf("the system prompt lacks %q:\n%s", k.system, turn.System)
			}
		})
	}
}

// The Go kit's example is the one docs/ABI.md shows, byte for byte.
func TestGoKitIsTheABIDocExample(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "ABI.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join("go", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```go\n"+string(src)+"```\n") {
		t.Error("examples/plugins/go/main.go is not the Go example of docs/ABI.md; keep them the same")
	}
}

// The grant example of docs/ABI.md is a valid config entry.
func TestABIDocGrantExampleDecodes(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "ABI.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\nsource: ./github-issues.wasm")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/ABI.md has no grant example")
	}
	e, err := config.Load("ABI.md", []byte("source: ./github-issues.wasm"+block))
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Grants.FS) != 2 || !e.Grants.Exec.Allowed || e.Grants.Net.AllowedHosts[0] != "api.github.com" || e.Grants.Env[0] != "GITHUB_TOKEN" {
		t.Errorf("decoded %+v", e.Grants)
	}
}

// BuildKit runs the build.sh in dir (relative to examples/plugins) for a
// kit of language lang, writing out. It skips when the toolchain is
// missing, except under CI=true.
func BuildKit(t *testing.T, lang, dir, out string) string {
	t.Helper()
	env, missing := guestbuild.KitToolchain(lang, dir)
	if missing != "" {
		prereq.Missing(t, "%s kit: %s", lang, missing)
	}
	cmd := exec.Command("sh", filepath.Join(dir, "build.sh"), out)
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s kit: build.sh: %v\n%s", lang, err, b)
	}
	return out
}
