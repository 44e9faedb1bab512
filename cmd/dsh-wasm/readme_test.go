package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readmeCommands returns the commands of the README's first sh block.
func readmeCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```sh\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README.md has no sh block")
	}
	var cmds []string
	for _, l := range strings.Split(block, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			cmds = append(cmds, l)
		}
	}
	return cmds
}

// The README's first command runs as written on a fresh clone, with no
// key: the coding agent on its demo recording, the real Wasm tools acting
// in a fresh temp workspace. (Only `go run ./cmd/dsh-wasm` is replaced by
// the binary the tests built, to compile once.) The second is the tests.
func TestReadmeFirstCommand(t *testing.T) {
	needTool(t, "bwrap", "the coding agent's bash grant runs commands in bubblewrap")
	bash := needTool(t, "bash", "the README's commands are shell")
	cmds := readmeCommands(t)
	if len(cmds) < 2 || cmds[1] != "go test ./..." {
		t.Fatalf("the README's second command is not the tests: %q", cmds)
	}
	const goRun = "go run ./cmd/dsh-wasm "
	first := cmds[0]
	if !strings.HasPrefix(first, goRun+"run --config examples/coding-agent/dsh.yml --replay examples/coding-agent/demo.jsonl") {
		t.Fatalf("the README's first command is not the offline demo: %q", first)
	}
	tmp := t.TempDir()
	cmd := exec.Command(bash, "-c", binary(t)+" "+strings.TrimPrefix(first, goRun))
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "XDG_DATA_HOME="+t.TempDir(), "DEEPSEEK_API_KEY=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "printed **Hello from dsh-wasm!**") {
		t.Errorf("stdout lacks the answer:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "the model is a replay of examples/coding-agent/demo.jsonl") {
		t.Errorf("stderr does not say the model is a replay:\n%s", stderr.String())
	}
	// The write tool really wrote the script into the temp workspace.
	scripts, _ := filepath.Glob(filepath.Join(tmp, "*", "hello.sh"))
	if len(scripts) != 1 {
		t.Fatalf("hello.sh in the temp workspace: %v", scripts)
	}
	if b, _ := os.ReadFile(scripts[0]); string(b) != "#!/bin/sh\necho \"Hello from dsh-wasm!\"\n" {
		t.Errorf("hello.sh = %q", b)
	}
}
