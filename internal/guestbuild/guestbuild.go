// Package guestbuild compiles plugin sources to Wasm modules for tests: Go
// (a wasip1 c-shared build) or, for a directory holding .c files,
// freestanding C with clang. A build runs once per process per source
// directory, under a lock, and its output is cached on disk keyed by the
// sources, go.sum and the Go version, so a warm test run compiles nothing.
package guestbuild

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
)

var (
	mu    sync.Mutex
	built = map[string]string{}
)

// ModuleRoot finds the directory holding go.mod, walking up from the
// working directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("guestbuild: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Build compiles the main package in dir (relative to the module root) as
// a c-shared wasip1 module and returns the .wasm path.
func Build(dir string) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if p, ok := built[dir]; ok {
		return p, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	key, err := sourceKey(root, dir)
	if err != nil {
		return "", err
	}
	cacheDir, err := CacheDir()
	if err != nil {
		return "", err
	}
	out := filepath.Join(cacheDir, "guests", strings.ReplaceAll(filepath.ToSlash(dir), "/", "_")+"-"+key[:16]+".wasm")
	if _, err := os.Stat(out); err == nil {
		built[dir] = out
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	tmp := out + fmt.Sprintf(".%d.tmp", os.Getpid())
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-buildmode=c-shared", "-o", tmp, "./"+filepath.ToSlash(dir))
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if srcs, _ := filepath.Glob(filepath.Join(root, dir, "*.c")); len(srcs) > 0 {
		if cmd, err = clangCommand(tmp, srcs, true); err != nil {
			return "", err
		}
	}
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("guestbuild: build %s: %v\n%s", dir, err, b)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	built[dir] = out
	return out, nil
}

// ErrNoClang: a C guest cannot be built because clang or wasm-ld is not
// installed (Debian: apt-get install clang lld).
var ErrNoClang = errors.New("guestbuild: clang and wasm-ld are needed to build C guests (apt-get install clang lld)")

// clangCommand builds freestanding C sources (no libc, no WASI) into a
// module exporting what its sources mark with export_name.
// strict adds -Wall -Wextra -Werror, for our own sources.
func clangCommand(out string, srcs []string, strict bool) (*exec.Cmd, error) {
	clang, err := exec.LookPath("clang")
	if err == nil {
		_, err = exec.LookPath("wasm-ld")
	}
	if err != nil {
		return nil, ErrNoClang
	}
	// The flags of docs/ABI.md's C example.
	args := []string{"--target=wasm32", "-O2", "-ffreestanding", "-nostdlib", "-Wl,--no-entry", "-o", out}
	if strict {
		args = append(args, "-Wall", "-Wextra", "-Werror")
	}
	return exec.Command(clang, append(args, srcs...)...), nil
}

// CompileC builds freestanding C sources into the module out, uncached,
// with exactly the flags docs/ABI.md gives.
func CompileC(out string, srcs ...string) error {
	cmd, err := clangCommand(out, srcs, false)
	if err != nil {
		return err
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("guestbuild: clang: %v\n%s", err, b)
	}
	return nil
}

// CacheDir is where built guests and the tests' compilation cache live:
// $DSH_WASM_TEST_CACHE, or <user cache dir>/dsh-wasm-test.
func CacheDir() (string, error) {
	if d := os.Getenv("DSH_WASM_TEST_CACHE"); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "dsh-wasm-test"), nil
}

// CompileCacheDir is the tests' shared compilation cache, inside
// CacheDir: every test helper that opens the shared cache (plugin's,
// plugintest's, deploytest's, the hostile suite's children) opens this
// one, so each guest compiles once per machine.
func CompileCacheDir() (string, error) {
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "wazero"), nil
}

// sourceKey hashes everything a guest build depends on inside the module:
// the guest's own files, the SDK, go.mod, go.sum and the toolchain.
func sourceKey(root, dir string) (string, error) {
	h := sha256.New()
	fmt.Fprintln(h, runtime.Version())
	var files []string
	for _, d := range []string{dir, "hostfns"} {
		err := filepath.WalkDir(filepath.Join(root, d), func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !e.IsDir() && (strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".c") || strings.HasSuffix(path, ".h")) {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("guestbuild: %w", err)
		}
	}
	files = append(files, filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum"))
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(root, f)
		fmt.Fprintf(h, "%s %d\n", rel, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
