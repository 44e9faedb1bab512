package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInspectMalformedHookFile: plugin inspect of a hook bridge whose
// ./hooks.json (relative: resolved in the directory the process starts
// in) is malformed prints the error with file and line, and the bridge
// subscribes to nothing; a good file gives its subscriptions.
func TestInspectMalformedHookFile(t *testing.T) {
	bin := binary(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	deployment := "model: m\nplugins:\n  - source: builtin:hooks-claude\n    config: {config_path: ./hooks.json}\n" +
		"    grants:\n      fs: [{path: workspace, mode: rw}, {path: " + dir + ", mode: ro}]\n      env: [PWD]\n" +
		"      exec: {allowed: true}\n      session_events: [hook/invoked, hook/result]\n" +
		"      events: [agent/prompt-submit, tools/pre-execute, tools/post-execute, agent/turn-stopping]\n"
	if err := os.WriteFile(filepath.Join(dir, "dsh.yml"), []byte(deployment), 0o644); err != nil {
		t.Fatal(err)
	}
	inspect := func(hooks string) (subs []string, stderr string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "hooks.json"), []byte(hooks), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "plugin", "inspect", "--config", "dsh.yml", "hooks-claude")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PWD="+dir, "XDG_CACHE_HOME="+t.TempDir())
		var errb bytes.Buffer
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("inspect: %v\n%s", err, errb.String())
		}
		var r struct {
			Subscriptions []struct{ Event string }
		}
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		for _, s := range r.Subscriptions {
			subs = append(subs, s.Event)
		}
		return subs, errb.String()
	}
	subs, stderr := inspect("{\n \"hooks\": {\n  \"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": 3}]}]\n }\n}\n")
	if len(subs) != 0 || !strings.Contains(stderr, "./hooks.json:3: Stop[0].hooks[0].command must be a non-empty string") {
		t.Errorf("malformed file: subscriptions %v, stderr:\n%s", subs, stderr)
	}
	subs, stderr = inspect(`{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}], "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}]}]}}`)
	if strings.Join(subs, ",") != "tools/pre-execute,agent/turn-stopping" || strings.Contains(stderr, "ERROR") {
		t.Errorf("good file: subscriptions %v, stderr:\n%s", subs, stderr)
	}
}
