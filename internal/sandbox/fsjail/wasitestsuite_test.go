//go:build unix

package fsjail

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// wasiTestsuiteDir finds the official WASI test suite's prebuilt wasip1
// tests, which live outside the repository at ../shared/wasi-testsuite
// beside the module root (DSH_WASI_TESTSUITE overrides the place). It skips
// when they are absent, and fails under CI=true.
func wasiTestsuiteDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("DSH_WASI_TESTSUITE")
	if dir == "" {
		root, err := guestbuild.ModuleRoot()
		if err != nil {
			t.Fatalf("module root: %v", err)
		}
		dir = filepath.Join(filepath.Dir(root), "shared", "wasi-testsuite")
	}
	if _, err := os.Stat(filepath.Join(dir, "rust", "manifest.json")); err != nil {
		msg := "WASI test suite not found at " + dir + " (../shared/wasi-testsuite beside the checkout, or DSH_WASI_TESTSUITE): " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dir
}

// wasiTest is one test of the suite: NAME.wasm and its optional NAME.json.
type wasiTest struct {
	suite, name, wasm string
	Args              []string          `json:"args"`
	Env               map[string]string `json:"env"`
	Root              string            `json:"root"`
	ExitCode          uint32            `json:"exit_code"`
	Stdout            string            `json:"stdout"`
	Stderr            string            `json:"stderr"`
}

func loadWASITests(t *testing.T, dir string) []*wasiTest {
	t.Helper()
	var tests []*wasiTest
	for _, suite := range []string{"c", "rust", "assemblyscript"} {
		wasms, err := filepath.Glob(filepath.Join(dir, suite, "*.wasm"))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wasms {
			tc := &wasiTest{suite: suite, name: strings.TrimSuffix(filepath.Base(w), ".wasm"), wasm: w}
			spec, err := os.ReadFile(strings.TrimSuffix(w, ".wasm") + ".json")
			switch {
			case err == nil:
				if err := json.Unmarshal(spec, tc); err != nil {
					t.Fatalf("%s/%s.json: %v", suite, tc.name, err)
				}
			case !errors.Is(err, fs.ErrNotExist):
				t.Fatal(err)
			}
			tests = append(tests, tc)
		}
	}
	if len(tests) == 0 {
		t.Fatalf("no tests under %s", dir)
	}
	return tests
}

// copyTree copies a fixture directory, making everything writable: the
// tests write into their fixture, and the shared copy is read-only.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(out, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, out)
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(out, data, 0o644)
		}
	})
	if err != nil {
		t.Fatalf("copying fixture %s: %v", src, err)
	}
}

// runWASITest runs tc once with its fixture (a fresh copy) mounted at "/"
// by mount, and reports why it failed, or "" when it passed.
func runWASITest(t *testing.T, rt wazero.Runtime, compiled wazero.CompiledModule, tc *wasiTest,
	mount func(t *testing.T, dir string) wazero.FSConfig) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithArgs(append([]string{tc.name}, tc.Args...)...).
		WithSysWalltime().
		WithSysNanotime().
		WithSysNanosleep().
		WithRandSource(rand.Reader).
		WithStdout(&stdout).
		WithStderr(&stderr)
	keys := make([]string, 0, len(tc.Env))
	for k := range tc.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		cfg = cfg.WithEnv(k, tc.Env[k])
	}
	if tc.Root != "" {
		dir := t.TempDir()
		copyTree(t, filepath.Join(filepath.Dir(tc.wasm), tc.Root), dir)
		cfg = cfg.WithFSConfig(mount(t, dir))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mod, err := rt.InstantiateModule(ctx, compiled, cfg)
	var code uint32
	if err != nil {
		var exit *sys.ExitError
		if !errors.As(err, &exit) {
			return "instantiating: " + clip(err.Error())
		}
		code = exit.ExitCode()
	} else {
		_ = mod.Close(ctx)
	}
	switch {
	case code != tc.ExitCode:
		return "exit code " + strconv.Itoa(int(code)) + ", want " + strconv.Itoa(int(tc.ExitCode)) + "; stderr: " + clip(stderr.String())
	case !strings.HasPrefix(stdout.String(), tc.Stdout):
		return "stdout " + clip(stdout.String()) + ", want prefix " + clip(tc.Stdout)
	case !strings.HasPrefix(stderr.String(), tc.Stderr):
		return "stderr " + clip(stderr.String()) + ", want prefix " + clip(tc.Stderr)
	}
	return ""
}

func clip(s string) string {
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return strings.TrimSpace(s)
}

// TestWASITestsuiteThroughJail runs the official WASI test suite twice:
// with plain wazero's directory mount, and through the jail exactly as the
// plugin host builds it for a read-write grant (quota included). Every test
// plain wazero passes must pass through the jail. The jail also passes
// pwrite-with-append, which plain wazero fails; that must stay so.
func TestWASITestsuiteThroughJail(t *testing.T) {
	dir := wasiTestsuiteDir(t)
	tests := loadWASITests(t, dir)

	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(true))
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)

	plain := func(t *testing.T, dir string) wazero.FSConfig {
		return wazero.NewFSConfig().WithDirMount(dir, "/")
	}
	jailed := func(t *testing.T, dir string) wazero.FSConfig {
		j, err := New([]Mount{{HostPath: dir, GuestPath: "/"}},
			WithQuota(NewQuota(DefaultDiskBytes, DefaultDiskFiles)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = j.Close() })
		return j.FSConfig()
	}

	var plainPassed, jailPassed int
	for _, tc := range tests {
		t.Run(tc.suite+"/"+tc.name, func(t *testing.T) {
			bin, err := os.ReadFile(tc.wasm)
			if err != nil {
				t.Fatal(err)
			}
			compiled, err := rt.CompileModule(ctx, bin)
			if err != nil {
				t.Fatalf("compiling: %v", err)
			}
			defer compiled.Close(ctx)
			plainWhy := runWASITest(t, rt, compiled, tc, plain)
			jailWhy := runWASITest(t, rt, compiled, tc, jailed)
			if plainWhy == "" {
				plainPassed++
			}
			if jailWhy == "" {
				jailPassed++
			}
			switch {
			case plainWhy == "" && jailWhy != "":
				t.Errorf("passes with plain wazero but fails through the jail: %s", jailWhy)
			case tc.name == "pwrite-with-append" && jailWhy != "":
				t.Errorf("the jail no longer passes pwrite-with-append: %s", jailWhy)
			case jailWhy != "":
				t.Logf("fails with plain wazero (%s) and through the jail (%s)", plainWhy, jailWhy)
			}
		})
	}
	t.Logf("%d tests: plain wazero passed %d, the jail passed %d", len(tests), plainPassed, jailPassed)
	if plainPassed == 0 {
		t.Errorf("plain wazero passed none of %d tests: the runner is broken", len(tests))
	}
}
