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

	"github.com/dsh-wasm/dsh-wasm/plugintest"
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

// BuildKit runs the build.sh in dir (relative to examples/plugins) for a
// kit of language lang, writing out. It skips when the toolchain is
// missing, except under CI=true.
func BuildKit(t *testing.T, lang, dir, out string) string {
	t.Helper()
	env, missing := toolchain(lang, dir)
	if missing != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s kit: %s (CI=true: .ci/run installs it)", lang, missing)
		}
		t.Skipf("%s kit: %s", lang, missing)
	}
	cmd := exec.Command("sh", filepath.Join(dir, "build.sh"), out)
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s kit: build.sh: %v\n%s", lang, err, b)
	}
	return out
}

// toolchain checks what a kit's build.sh needs and returns extra
// environment for it, or what is missing.
func toolchain(lang, dir string) (env []string, missing string) {
	switch lang {
	case "go":
		if _, err := exec.LookPath("go"); err != nil {
			return nil, "go is not installed"
		}
	case "c":
		for _, tool := range []string{"clang", "wasm-ld"} {
			if _, err := exec.LookPath(tool); err != nil {
				return nil, tool + " is not installed (apt-get install clang lld)"
			}
		}
		if _, err := os.Stat("/usr/include/wasm32-wasi/stdlib.h"); err != nil {
			return nil, "wasi-libc is not installed (apt-get install wasi-libc libclang-rt-dev-wasm32)"
		}
	case "rust":
		rustc, target := RustWasm()
		if rustc == "" {
			return nil, "no rustc with a wasm32-wasi standard library (apt-get install rustc libstd-rust-dev-wasm32)"
		}
		return []string{"RUSTC=" + rustc, "TARGET=" + target}, ""
	case "as":
		if _, err := exec.LookPath("node"); err != nil {
			return nil, "node is not installed (apt-get install nodejs npm)"
		}
		if _, err := os.Stat(filepath.Join(dir, "node_modules", ".bin", "asc")); err != nil {
			return nil, "the AssemblyScript compiler is not installed (npm ci --prefix " + dir + ")"
		}
	}
	return nil, ""
}

// RustWasm finds a rustc that has a wasm32 WASI standard library: $RUSTC,
// Debian's /usr/bin/rustc, then rustc on PATH; wasm32-wasi (Debian's
// rustc) or wasm32-wasip1 (rustup's newer ones).
func RustWasm() (rustc, target string) {
	var cands []string
	if r := os.Getenv("RUSTC"); r != "" {
		cands = append(cands, r)
	}
	cands = append(cands, "/usr/bin/rustc")
	if r, err := exec.LookPath("rustc"); err == nil {
		cands = append(cands, r)
	}
	for _, r := range cands {
		for _, tgt := range []string{"wasm32-wasi", "wasm32-wasip1"} {
			b, err := exec.Command(r, "--print", "target-libdir", "--target", tgt).Output()
			if err != nil {
				continue
			}
			if m, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(b)), "libstd-*.rlib")); len(m) > 0 {
				return r, tgt
			}
		}
	}
	return "", ""
}
