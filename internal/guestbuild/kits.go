package guestbuild

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// KitToolchain checks what the build.sh of an author kit of language
// lang (go, c, rust, as) in dir needs. It returns extra environment for
// build.sh, or a sentence saying what is missing and how to install it.
func KitToolchain(lang, dir string) (env []string, missing string) {
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
			return nil, "no rustc with a wasm32 WASI standard library (apt-get install rustc libstd-rust-dev-wasm32)"
		}
		return []string{"RUSTC=" + rustc, "TARGET=" + target}, ""
	case "as":
		if _, err := exec.LookPath("node"); err != nil {
			return nil, "node is not installed (apt-get install nodejs npm)"
		}
		if _, err := os.Stat(filepath.Join(dir, "node_modules", ".bin", "asc")); err != nil {
			return nil, "the AssemblyScript compiler is not installed (npm ci --prefix " + dir + ")"
		}
	default:
		return nil, "no kit for language " + lang
	}
	return nil, ""
}

// RustWasm finds a rustc that has a wasm32 WASI standard library: $RUSTC,
// Debian's /usr/bin/rustc, then rustc on PATH; with target wasm32-wasi
// (Debian's rustc) or wasm32-wasip1 (rustup's newer toolchains).
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
