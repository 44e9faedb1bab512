package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/prereq"
)

// Each language's scaffold builds with its own build.sh and its tool
// answers through plugin call.
func TestPluginNewBuildsAndCalls(t *testing.T) {
	root, err := guestbuild.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ lang, tool, args, want string }{
		{"go", "demo_greet", `{"name":"Ann"}`, "Hello, Ann! (greeting #1)\n"},
		{"c", "demo_reverse", `{"text":"abc"}`, "cba\n"},
		{"rust", "demo_words", `{"text":"a b c"}`, "3\n"},
		{"as", "demo_upper", `{"text":"abc"}`, "ABC\n"},
	} {
		t.Run(c.lang, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "demo")
			if c.lang == "as" {
				// npm ci would fetch the compiler again: reuse the kit's.
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				os.Symlink(filepath.Join(root, "examples", "plugins", "as", "node_modules"), filepath.Join(dir, "node_modules"))
			}
			env, missing := guestbuild.KitToolchain(c.lang, dir)
			if missing != "" {
				prereq.Missing(t, "%s kit: %s", c.lang, missing)
			}
			if c.lang == "as" {
				os.Remove(filepath.Join(dir, "node_modules"))
				os.Remove(dir)
			}
			code, stdout, stderr := runCLI(t, "", "plugin", "new", "--lang", c.lang, "--dir", dir, "--sdk", root, "demo")
			if code != 0 || !strings.Contains(stdout, c.tool) {
				t.Fatalf("new: exit %d stdout %q stderr %q", code, stdout, stderr)
			}
			if c.lang == "as" {
				os.Symlink(filepath.Join(root, "examples", "plugins", "as", "node_modules"), filepath.Join(dir, "node_modules"))
			}
			build := exec.Command("sh", filepath.Join(dir, "build.sh"))
			build.Env = append(os.Environ(), env...)
			if b, err := build.CombinedOutput(); err != nil {
				t.Fatalf("build.sh: %v\n%s", err, b)
			}
			code, stdout, stderr = runCLI(t, "", "plugin", "call", filepath.Join(dir, "demo.wasm"), c.tool, c.args)
			if code != 0 || stdout != c.want {
				t.Fatalf("call: exit %d stdout %q stderr %q", code, stdout, stderr)
			}
			code, stdout, _ = runCLI(t, "", "plugin", "inspect", "--render", filepath.Join(dir, "demo.wasm"))
			if code != 0 || !strings.Contains(stdout, `"demo_greeting": "hello from`) && !strings.Contains(stdout, `"demo_greeting": "Hello"`) {
				t.Errorf("inspect --render: %s", stdout)
			}
		})
	}
}

func TestPluginNewRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--lang", "cobol", "x"}, 2, `--lang "cobol": want go, c, rust or as`},
		{[]string{"--lang", "c", "Bad-Name"}, 2, `NAME "Bad-Name"`},
		{[]string{"--lang", "c", "--dir", dir, "x"}, 1, "exists; choose another --dir"},
	} {
		code, _, stderr := runCLI(t, "", append([]string{"plugin", "new"}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d stderr %q", c.args, code, stderr)
		}
	}
}
