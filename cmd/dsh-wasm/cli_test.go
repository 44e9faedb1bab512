package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestRender(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tmpl.txt")
	if err := os.WriteFile(file, []byte("From a file: {{x}}"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stdout string
		stderr string // substring; "" means stderr must be empty
	}{
		{"readme example", "Running {{model}}.", []string{"render", "--var", "model=deepseek-chat"}, 0, "Running deepseek-chat.", ""},
		{"stdin dash", "{{a}}", []string{"render", "--var", "a=1", "-"}, 0, "1", ""},
		{"file", "", []string{"render", "--var", "x=y", file}, 0, "From a file: y", ""},
		{"flags after file", "", []string{"render", file, "--var", "x=z"}, 0, "From a file: z", ""},
		{"split at first equals", "{{a}}", []string{"render", "--var", "a=b=c"}, 0, "b=c", ""},
		{"empty value is a value", "[{{a}}]", []string{"render", "--var", "a="}, 0, "[]", ""},
		{"comma kept in value", "{{a}}", []string{"render", "--var", "a=x,y"}, 0, "x,y", ""},
		{"no trailing newline added", "line\n", []string{"render"}, 0, "line\n", ""},
		{"lone open passes", "a {{ b", []string{"render"}, 0, "a {{ b", ""},
		{"no built-in variables", "{{model}}", []string{"render"}, 1, "", `error: render section "template": unknown variable {{model}}`},
		{"unset has no value", "{{cwd}}", []string{"render", "--unset", "cwd"}, 1, "", "variable has no value"},
		{"malformed reference", "{{ model }}", []string{"render", "--var", "model=m"}, 1, "", "malformed variable reference"},
		{"unbalanced", "{{{model}}}", []string{"render", "--var", "model=m"}, 1, "", "unbalanced braces"},
		{"malformed var name", "", []string{"render", "--var", "Model=m"}, 1, "", `invalid variable name`},
		{"duplicate var", "", []string{"render", "--var", "a=1", "--var", "a=2"}, 1, "", "duplicate variable name"},
		{"var and unset clash", "", []string{"render", "--var", "a=1", "--unset", "a"}, 1, "", "duplicate variable name"},
		{"var without equals", "", []string{"render", "--var", "a"}, 2, "", "want NAME=VALUE"},
		{"unknown flag", "", []string{"render", "--bogus"}, 2, "", "unknown flag"},
		{"two files", "", []string{"render", "a", "b"}, 2, "", "accepts at most 1 arg"},
		{"unknown command", "", []string{"nope"}, 2, "", "unknown command"},
		{"missing file", "", []string{"render", filepath.Join(t.TempDir(), "absent")}, 1, "", "read template"},
		{"newline in error stays one line", "{{a\nb}}", []string{"render"}, 1, "", `{{a\nb}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.stdin, tc.args...)
			if code != tc.code || stdout != tc.stdout {
				t.Fatalf("exit %d stdout %q stderr %q; want exit %d stdout %q", code, stdout, stderr, tc.code, tc.stdout)
			}
			if tc.stderr == "" {
				if stderr != "" {
					t.Fatalf("unexpected stderr %q", stderr)
				}
				return
			}
			if !strings.HasPrefix(stderr, "error: ") || !strings.Contains(stderr, tc.stderr) || strings.Count(stderr, "\n") != 1 {
				t.Fatalf("stderr %q: want one line starting error: containing %q", stderr, tc.stderr)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"render", "--help"}, {"help", "render"}} {
		code, stdout, stderr := runCLI(t, "", args...)
		if code != 0 || !strings.Contains(stdout, "Usage:") || stderr != "" {
			t.Fatalf("%v: exit %d stdout %q stderr %q", args, code, stdout, stderr)
		}
	}
}

func TestCacheFlags(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCLI(t, "", "plugin", "inspect", "--cache-dir", dir, "builtin:facts")
	if code != 0 || !strings.Contains(stdout, `"date"`) {
		t.Fatalf("exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) == 0 {
		t.Fatal("--cache-dir: nothing was cached")
	}
	code, stdout, stderr = runCLI(t, "", "--no-cache", "plugin", "inspect", "builtin:facts")
	if code != 0 || !strings.Contains(stdout, `"platform"`) {
		t.Fatalf("--no-cache: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
}
