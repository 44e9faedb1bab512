package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/testcorpus"
)

// hookDeployment is the deployment the hook scenarios run under: the
// coding agent's bash, and the scenario's hook bridge reading
// ./hooks.json or ./codex-hooks.json from the session's working
// directory when the session opens (the seeded workspace, where the
// process also starts, as the reference reads it). Hook commands and bash
// run in the exec sandbox.
func hookDeployment(bridge, file, startDir string) string {
	return fmt.Sprintf(`model: deepseek-v4-flash
persona: You are a coding agent. The working directory is {{cwd}}.
plugins:
  - source: builtin:tool-bash
    grants:
      fs: [{path: workspace, mode: rw}]
      exec: {allowed: true, sandbox: true, timeout: 2m, max_timeout: 10m}
  - source: builtin:%s
    config:
      config_path: ./%s
    grants:
      fs: [{path: workspace, mode: rw}, {path: %q, mode: ro}]
      exec: {allowed: true, sandbox: true, timeout: 1m, max_timeout: 10m}
      session_events: [hook/invoked, hook/result]
      events: [agent/prompt-submit, tools/pre-execute, tools/post-execute, agent/turn-stopping]
`, bridge, file, startDir)
}

// TestACPHookConformance runs the 13 hook scenarios through `dsh-wasm acp
// --replay`, started in the seeded workspace and driven by the official
// ACP client library, and checks what the client saw against the
// recording: the same tool calls with the same kind and final status, the
// same message text per prompt, the same stop reason. No scenario asks
// the client for permission: the ask scenario's hook fails the call with
// its reason, as the reference's bridge does.
func TestACPHookConformance(t *testing.T) {
	dir := filepath.Join(testcorpus.Dir(t), "hook-sessions")
	node := needTool(t, "node", "the ACP conformance driver")
	driver, err := filepath.Abs(filepath.Join("..", "..", "internal", "acpdriver"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(driver, "node_modules", "@agentclientprotocol", "sdk")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the ACP client library is not installed (npm ci in internal/acpdriver): %v", err)
		}
		t.Skipf("the ACP client library is not installed; run npm ci in %s", driver)
	}
	bin := binary(t)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		ran++
		name := e.Name()
		t.Run(name, func(t *testing.T) {
			scenario := filepath.Join(dir, name)
			cwd, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if err := os.CopyFS(cwd, os.DirFS(filepath.Join(scenario, "workspace"))); err != nil {
				t.Fatal(err)
			}
			bridge, file := "hooks-claude", "hooks.json"
			if _, err := os.Stat(filepath.Join(cwd, "codex-hooks.json")); err == nil {
				bridge, file = "hooks-codex", "codex-hooks.json"
			}
			config := filepath.Join(t.TempDir(), "dsh.yml")
			if err := os.WriteFile(config, []byte(hookDeployment(bridge, file, cwd)), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(node, filepath.Join(driver, "driver.mjs"), filepath.Join(scenario, "input.json"), cwd, "--",
				bin, "acp", "--config", config, "--replay", filepath.Join(scenario, "session.jsonl"))
			cmd.Dir = cwd
			cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+t.TempDir(), "PWD="+cwd)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("driver: %v\nstderr:\n%s", err, stderr.String())
			}
			var run struct {
				Transcript []struct {
					Type   string         `json:"type"`
					Update map[string]any `json:"update"`
					Result map[string]any `json:"result"`
					Error  *struct {
						Code int `json:"code"`
					} `json:"error"`
				} `json:"transcript"`
				Exit struct {
					Code *int `json:"code"`
				} `json:"exit"`
			}
			if err := json.Unmarshal(out, &run); err != nil {
				t.Fatalf("driver output: %v\n%s", err, out)
			}
			if run.Exit.Code == nil || *run.Exit.Code != 0 {
				t.Errorf("the agent exited %v; stderr:\n%s", run.Exit.Code, stderr.String())
			}
			var got []acpItem
			asked := 0
			for _, it := range run.Transcript {
				switch it.Type {
				case "update":
					got = append(got, acpItem{update: it.Update})
				case "permission":
					asked++
				default:
					item := acpItem{response: true, result: it.Result}
					if it.Error != nil {
						item.errCode = it.Error.Code
					}
					got = append(got, item)
				}
			}
			if asked != 0 {
				// The reference's Claude bridge fails an ask with its
				// reason; the client is never asked (docs/HOOKS.md).
				t.Errorf("%d permission requests, want none", asked)
			}
			want := summarize(goldenItems(t, filepath.Join(scenario, "stdout.golden.jsonl")))
			have := summarize(got)
			if len(have) != len(want) {
				t.Fatalf("%d responses, want %d:\ngot  %v\nwant %v\nstderr:\n%s", len(have), len(want), have, want, stderr.String())
			}
			for i := range want {
				if have[i].String() != want[i].String() {
					t.Errorf("response %d:\ngot  %v\nwant %v\nstderr:\n%s", i+1, have[i], want[i], stderr.String())
				}
			}
			// The hooks ran: each scenario's session records them.
			if !strings.Contains(stderr.String(), "the model is a replay of") {
				t.Errorf("stderr does not say the model is a replay:\n%s", stderr.String())
			}
		})
	}
	if ran != 13 {
		t.Errorf("%d hook scenarios, want 13", ran)
	}
}
