package agent

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/prereq"
)

const modulePath = "github.com/dsh-wasm/dsh-wasm/"

// listDeps lists what the package at dir depends on, tests aside.
func listDeps(t *testing.T, dir string) []string {
	t.Helper()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			prereq.Missing(t, "no go command to list the package's dependencies")
		}
	}
	cmd := exec.Command(goBin, "list", "-deps", "-test=false", "-f", "{{.ImportPath}}", ".")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list -deps in %s: %v\n%s", dir, err, msg)
	}
	list := strings.Fields(string(out))
	if len(list) == 0 {
		t.Fatalf("go list -deps in %s listed nothing", dir)
	}
	return list
}

// TestLoopKnowsNoWasm keeps the agent loop free of the plugin host: the
// loop serves Wasm tools, native tools, subagents and MCP-client tools
// through one ToolRunner, and shares only leaf types with them (prompt,
// runtime/tool, internal/pluginstate). It fails when the package, tests
// aside, depends on the plugin host, on a Wasm runtime, or on the
// embedding API built on top of it.
func TestLoopKnowsNoWasm(t *testing.T) {
	forbidden := func(p string) bool {
		switch {
		case p == modulePath+"internal/plugin", strings.HasPrefix(p, modulePath+"internal/plugin/"),
			p == modulePath+"runtime/deploy", strings.HasPrefix(p, modulePath+"runtime/deploy/"),
			strings.HasPrefix(p, "github.com/tetratelabs/wazero"),
			strings.Contains(strings.ToLower(p), "extism"):
			return true
		}
		return false
	}
	var bad []string
	for _, p := range listDeps(t, ".") {
		if forbidden(p) {
			bad = append(bad, p)
		}
	}
	if len(bad) > 0 {
		t.Errorf("internal/agent depends on %s; the loop must not know the plugin host (share a leaf type instead)", strings.Join(bad, ", "))
	}
}

// TestSharedTypesAreLeaves: the packages the loop shares with the plugin
// host import nothing of the modulePath, so sharing them can never pull the
// host in.
func TestSharedTypesAreLeaves(t *testing.T) {
	for _, pkg := range []string{"runtime/tool", "internal/pluginstate"} {
		for _, p := range listDeps(t, filepath.Join("..", "..", pkg)) {
			if strings.HasPrefix(p, modulePath) && p != modulePath+pkg {
				t.Errorf("%s depends on %s; it must stay a leaf", pkg, p)
			}
		}
	}
}
