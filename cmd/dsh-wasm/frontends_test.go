package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// exampleConfig is the path of an example deployment from this package.
func exampleConfig(name string) string {
	return filepath.Join("..", "..", "examples", name, "dsh.yml")
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/dsh-wasm -run Golden -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// The system prompt of each example, byte for byte: the identity first,
// then the persona with the model, then the tools' guidance in order.
func TestPromptGolden(t *testing.T) {
	// A fixed cwd keeps the goldens' sizes the same on every machine. An
	// empty model key keeps the coding agent's web_search out, as on a
	// machine without one.
	t.Setenv("DEEPSEEK_API_KEY", "")
	cwd := string(filepath.Separator)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"coding-agent.prompt.golden", []string{"prompt", "--config", exampleConfig("coding-agent"), "--cwd", cwd}},
		{"acp-agent.prompt.golden", []string{"prompt", "--config", exampleConfig("acp-agent"), "--cwd", cwd}},
		{"acp-agent.explain.golden", []string{"prompt", "--config", exampleConfig("acp-agent"), "--cwd", cwd, "--explain"}},
		{"coding-agent.tools.golden", []string{"tools", "--config", exampleConfig("coding-agent")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, "", c.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if errOut != "" {
				t.Errorf("stderr: %s", errOut)
			}
			checkGolden(t, c.name, []byte(out))
		})
	}
}

// The prompt has no default cwd: the ACP example, whose persona states the
// working directory, fails without one, naming the section and variable.
func TestPromptWithoutCwdNamesTheVariable(t *testing.T) {
	code, out, errOut := runCLI(t, "", "prompt", "--config", exampleConfig("acp-agent"))
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	for _, want := range []string{"error: ", `section "deployment:persona"`, "{{cwd}}", "no value"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q lacks %q", errOut, want)
		}
	}
	if strings.Count(errOut, "\n") != 1 {
		t.Errorf("stderr is not one line: %q", errOut)
	}
}

func TestDeploymentCommandsNeedConfig(t *testing.T) {
	for _, cmd := range []string{"prompt", "tools", "run", "acp"} {
		code, _, errOut := runCLI(t, "", cmd, "-p", "x")
		if cmd == "prompt" || cmd == "tools" || cmd == "acp" {
			code, _, errOut = runCLI(t, "", cmd)
		}
		if code != 2 || !strings.Contains(errOut, "--config FILE is required") {
			t.Errorf("%s without --config: exit %d, %q", cmd, code, errOut)
		}
	}
}

// plugin inspect --config FILE NAME reports what the deployment grants a
// plugin and which of its declared needs the grants refuse.
func TestInspectDeployedPlugin(t *testing.T) {
	file := filepath.Join(t.TempDir(), "dsh.yml")
	src := "model: m\nplugins:\n  - {name: granted, source: builtin:facts, grants: {env: [TZ]}}\n" +
		"  - {name: kit, source: " + testkitPath(t) + `, config: {needs: {exec: true, env: [HOME], session_events: [kit/note]}}, grants: {env: [HOME], limits: {memory: 64MiB}}}` + "\n"
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	var r struct {
		Name     string
		Grants   map[string]any
		Limits   map[string]any
		Refusals []string
	}
	code, out, errOut := runCLI(t, "", "plugin", "inspect", "--config", file, "kit")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Name != "kit" || r.Limits["memory"] != "64MiB" || fmt.Sprint(r.Grants["env"]) != "[HOME]" {
		t.Errorf("report = %+v", r)
	}
	if len(r.Refusals) != 2 || !strings.Contains(r.Refusals[0], "needs grant exec") ||
		!strings.Contains(r.Refusals[1], "session_events") || !strings.Contains(r.Refusals[1], "kit/note") {
		t.Errorf("refusals = %q, want exactly the exec need and the session event kit/note", r.Refusals)
	}
	// The deployment refuses the plugin for exactly those needs.
	code, _, errOut = runCLI(t, "", "prompt", "--config", file)
	if code == 0 || !strings.Contains(errOut, "exec") || !strings.Contains(errOut, "kit/note") {
		t.Errorf("prompt of the deployment: exit %d, %q; want the plugin refused for exec and kit/note", code, errOut)
	}
	code, _, errOut = runCLI(t, "", "plugin", "inspect", "--config", file, "nope")
	if code != 1 || !strings.Contains(errOut, `no plugin "nope" (it has granted, kit)`) {
		t.Errorf("unknown name: exit %d, %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "", "plugin", "inspect", "--config", file, "--set", "a=1", "kit")
	if code != 2 || !strings.Contains(errOut, "do not mix") {
		t.Errorf("--set with --config: exit %d, %q", code, errOut)
	}
}

func testkitPath(t testing.TB) string {
	t.Helper()
	p, err := guestbuild.Build("testdata/guests/testkit")
	if err != nil {
		t.Fatal(err)
	}
	return p
}
