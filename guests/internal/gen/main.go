// Command gen rebuilds dsh-wasm's built-in plugins. Every subdirectory NAME
// of the guests directory that holds Go files (all but internal, testdata
// and names starting with "." or "_") is a guest, built with
//
//	GOOS=wasip1 GOARCH=wasm go build -trimpath -buildvcs=false -buildmode=c-shared -o NAME.wasm ./NAME
//
// run in the guests directory. `go generate ./guests` runs gen there and
// writes the modules beside the sources; .ci/check-guests runs it with -out
// set to a temporary directory and compares the results with the committed
// modules. A NAME.wasm in the output directory with no guest NAME is stale
// and is removed.
//
// Usage:
//
//	go run ./internal/gen [-dir GUESTS_DIR] [-out OUT_DIR]
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	dir := flag.String("dir", ".", "the guests directory")
	out := flag.String("out", "", "where to write NAME.wasm (default: the guests directory)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: gen [-dir GUESTS_DIR] [-out OUT_DIR]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if *out == "" {
		*out = *dir
	}
	if err := generate(*dir, *out, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// errBadName: a guest directory's name cannot be a plugin name.
var errBadName = errors.New("guest directory name is not a valid plugin name")

// generate builds every guest in dir into out and removes stale modules
// from out.
func generate(dir, out string, log io.Writer) error {
	names, err := guests(dir)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return fmt.Errorf("no guests in %s", dir)
	}
	for _, name := range names {
		sum, size, err := build(dir, out, name)
		if err != nil {
			return err
		}
		fmt.Fprintf(log, "%s.wasm: %d bytes, sha256:%s\n", name, size, sum)
	}
	stale, err := filepath.Glob(filepath.Join(out, "*.wasm"))
	if err != nil {
		return err
	}
	sums, err := filepath.Glob(filepath.Join(out, "*.wasm.sha256"))
	if err != nil {
		return err
	}
	for _, f := range append(stale, sums...) {
		if !slices.Contains(names, strings.TrimSuffix(strings.TrimSuffix(filepath.Base(f), ".sha256"), ".wasm")) {
			if err := os.Remove(f); err != nil {
				return fmt.Errorf("remove stale module: %w", err)
			}
			fmt.Fprintf(log, "%s: removed, no guest of that name\n", filepath.Base(f))
		}
	}
	return nil
}

// guests lists the guest directories in dir, sorted.
func guests(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list guests: %w", err)
	}
	var names []string
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || name == "internal" || name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			continue
		}
		gofiles, err := filepath.Glob(filepath.Join(dir, name, "*.go"))
		if err != nil {
			return nil, err
		}
		if len(gofiles) == 0 {
			continue
		}
		if !validName(name) {
			return nil, fmt.Errorf("%w: %q (want [a-z0-9][a-z0-9_.-]{0,63}, as builtin:NAME requires)", errBadName, name)
		}
		names = append(names, name)
	}
	return names, nil
}

// validName is the plugin host's rule for plugin names.
func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '_' || c == '.' || c == '-')) {
			return false
		}
	}
	return true
}

// build compiles guest name into out/name.wasm, through a temporary
// directory so that a failed build leaves the previous module in place.
func build(dir, out, name string) (sum string, size int, err error) {
	absOut, err := filepath.Abs(out)
	if err != nil {
		return "", 0, err
	}
	if err := os.MkdirAll(absOut, 0o755); err != nil {
		return "", 0, fmt.Errorf("build %s: %w", name, err)
	}
	tmpDir, err := os.MkdirTemp(absOut, ".gen-")
	if err != nil {
		return "", 0, fmt.Errorf("build %s: %w", name, err)
	}
	defer os.RemoveAll(tmpDir)
	tmp := filepath.Join(tmpDir, name+".wasm")

	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-buildmode=c-shared", "-o", tmp, "./"+name)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", 0, fmt.Errorf("build %s: %w\n%s", name, err, b)
	}
	b, err := os.ReadFile(tmp)
	if err != nil {
		return "", 0, fmt.Errorf("build %s: %w", name, err)
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return "", 0, fmt.Errorf("build %s: %w", name, err)
	}
	if err := os.Rename(tmp, filepath.Join(absOut, name+".wasm")); err != nil {
		return "", 0, fmt.Errorf("build %s: %w", name, err)
	}
	h := sha256.Sum256(b)
	sum = hex.EncodeToString(h[:])
	// The digest beside the module spares every process that loads it
	// from hashing megabytes at start (see plugin.Options.Builtins).
	if err := os.WriteFile(filepath.Join(absOut, name+".wasm.sha256"), []byte(sum+"\n"), 0o644); err != nil {
		return "", 0, fmt.Errorf("build %s: %w", name, err)
	}
	return sum, len(b), nil
}
