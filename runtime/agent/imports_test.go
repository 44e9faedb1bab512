package agent

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/prereq"
)

// TestLoopKnowsNoWasm keeps the agent loop free of the plugin host: the
// loop serves Wasm tools, native tools, subagents and MCP-client tools
// through one ToolRunner, and shares only leaf types with them (prompt,
// runtime/tool, runtime/pluginstate). It fails when the package, tests
// aside, depends on the plugin host, on a Wasm runtime, or on the
// embedding API built on top of it.
func TestLoopKnowsNoWasm(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			prereq.Missing(t, "no go command to list the package's dependencies")
		}
	}
	const module = "github.com/dsh-wasm/dsh-wasm/"
	out, err := exec.Command(goBin, "list", "-deps", "-test=false", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list -deps: %v\n%s", err, msg)
	}
	forbidden := func(p string) bool {
		switch {
		case p == module+"runtime/plugin", strings.HasPrefix(p, module+"runtime/plugin/"),
			p == module+"runtime/deploy", strings.HasPrefix(p, module+"runtime/deploy/"),
			strings.HasPrefix(p, "github.com/tetratelabs/wazero"),
			strings.Contains(strings.ToLower(p), "extism"):
			return true
		}
		return false
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps listed nothing")
	}
	var bad []string
	for _, p := range deps {
		if forbidden(p) {
			bad = append(bad, p)
		}
	}
	if len(bad) > 0 {
		t.Errorf("runtime/agent depends on %s; the loop must not know the plugin host (share a leaf type instead)", strings.Join(bad, ", "))
	}
}
