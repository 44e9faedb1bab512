package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/prereq"
)

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// binary builds the dsh-wasm command once per test process, for tests
// that run it as a child process (the ACP client, tmux, the README).
func binary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "dsh-wasm-bin")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "dsh-wasm")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = &buildError{out: string(out), err: err}
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + e.out }

func removeBinary() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// needTool returns the path of an external program a test needs, or
// skips the test without it; under CI=true a missing program fails.
func needTool(t *testing.T, name, why string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		prereq.Missing(t, "%s not found (%s); .ci/run installs it: %v", name, why, err)
	}
	return p
}
