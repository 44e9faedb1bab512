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
// hook file is the operator's (an absolute config_path, read at load)
// shows a skipped group's warning with file, line and group; a file that
// is not JSON refuses the plugin, naming the file and line; a good file
// gives its subscriptions.
func TestInspectMalformedHookFile(t *testing.T) {
	bin := binary(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "hooks.json")
	deployment := "model: m\nplugins:\n  - source: builtin:hooks-claude\n    config: {config_path: " + file + "}\n" +
		"    grants:\n      fs: [{path: workspace, mode: rw}, {path: " + dir + ", mode: ro}]\n" +
		"      exec: {allowed: true}\n      session_events: [hook/invoked, hook/result]\n" +
		"      events: [agent/prompt-submit, tools/pre-execute, tools/post-execute, agent/turn-stopping]\n"
	if err := os.WriteFile(filepath.Join(dir, "dsh.yml"), []byte(deployment), 0o644); err != nil {
		t.Fatal(err)
	}
	inspect := func(hooks string) (subs []string, stderr string, err error) {
		t.Helper()
		if err := os.WriteFile(file, []byte(hooks), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "plugin", "inspect", "--config", "dsh.yml", "hooks-claude")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+t.TempDir())
		var errb bytes.Buffer
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil {
			return nil, errb.String(), err
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
		return subs, errb.String(), nil
	}
	subs, stderr, err := inspect("{\n \"hooks\": {\n  \"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": 3}]}],\n  \"PreToolUse\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"true\"}]}]\n }\n}\n")
	if err != nil || strings.Join(subs, ",") != "tools/pre-execute" || !strings.Contains(stderr, file+":3: Stop[0]: hooks[0].command must be a non-empty string") {
		t.Errorf("a malformed group: %v, subscriptions %v, stderr:\n%s", err, subs, stderr)
	}
	_, stderr, err = inspect("{\n \"hooks\": {,}\n}\n")
	if err == nil || !strings.Contains(stderr, file+":2: invalid JSON") {
		t.Errorf("a file that is not JSON: %v, stderr:\n%s", err, stderr)
	}
	subs, stderr, err = inspect(`{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}], "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}]}]}}`)
	if err != nil || strings.Join(subs, ",") != "tools/pre-execute,agent/turn-stopping" || strings.Contains(stderr, "ERROR") {
		t.Errorf("good file: %v, subscriptions %v, stderr:\n%s", err, subs, stderr)
	}
}
