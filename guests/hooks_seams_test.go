package guests

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/agent"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// scriptedArgs is a model that calls tool with each argument text in turn,
// as it is, then answers "done"; an argument text "<done>" answers "done"
// in its turn instead (ending that prompt's turn).
func scriptedArgs(tool string, args ...string) model.Provider {
	m := &scripted.Tools{}
	for _, a := range args {
		c := scripted.Call{Name: tool, Arguments: a}
		if a == "<done>" {
			c = scripted.Call{}
		}
		m.Calls = append(m.Calls, c)
	}
	return m
}

// denyTouch is a PreToolUse hook that keeps its stdin and blocks any call
// whose input mentions "touch pwned".
const denyTouch = `cat > stdin.json; if grep -q 'touch pwned' stdin.json; then echo 'no pwning' >&2; exit 2; fi`

// TestHookArgumentTricks: arguments whose meaning differs between the
// hook's reader and the tool's are refused before either sees them. For a
// Codex hook a key that differs only in case showed the hook the harmless
// command; for a Claude hook a number encoding/json cannot hold made the
// hook's tool_input {}; either way bash ran the command the hook denies.
func TestHookArgumentTricks(t *testing.T) {
	for _, c := range []struct{ bridge, file, args string }{
		{"hooks-codex", "codex-hooks.json", `{"command":"touch pwned","Command":"echo harmless"}`},
		{"hooks-claude", "hooks.json", `{"command":"touch pwned","pad":1e400}`},
		{"hooks-claude", "hooks.json", `{"command":"touch pwned","ſ":1,"s":2}`},
	} {
		t.Run(c.bridge, func(t *testing.T) {
			dir, file := writeHooks(t, c.file, `{"hooks":{"PreToolUse":[{"matcher":"bash","hooks":[{"type":"command","command":`+mustJSON(denyTouch)+`}]}]}}`)
			r := newHookRig(t, c.bridge, fmt.Sprintf(`{"config_path":%q}`, file), hookGrants(dir, config.ExecGrant{}), scriptedArgs("bash", c.args, `{"command":"touch pwned"}`), "", agent.Options{})
			r.prompt(t, "go")
			if _, err := os.Stat(filepath.Join(r.ws, "pwned")); err == nil {
				t.Fatal("bash ran the command the hook denies")
			}
			rs := toolResults(t, r.sess)
			if len(rs) != 2 {
				t.Fatalf("results %+v", rs)
			}
			if !rs[0].IsError || rs[0].Error == nil || rs[0].Error.Code != agent.CodeInvalidArguments {
				t.Errorf("the trick's result %+v, want INVALID_ARGS", rs[0])
			}
			// The plain call reaches the hook, which denies it.
			if !rs[1].IsError || rs[1].Content.Text() != "Error: no pwning" {
				t.Errorf("the plain call's result %+v, want the hook's deny", rs[1])
			}
			if n := len(eventsOf(t, r.sess, session.TypeHookInvoked)); n != 1 {
				t.Errorf("%d hooks ran, want 1 (the plain call's)", n)
			}
		})
	}
}

// TestHookSeesTheCanonicalBytes: a Claude hook's tool_input is, byte for
// byte, what bash gets: the canonical form of the model's text (escapes
// of plain letters decoded, no HTML escaping, no whitespace), and a Codex
// hook's command is its "command" member as it stands there.
func TestHookSeesTheCanonicalBytes(t *testing.T) {
	args := `{ "command" : "echo \u003c\u0041> \u0026 \u00e9",  "description":"x"}`
	canon, err := agent.CanonicalArguments(args)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ bridge, file, want string }{
		{"hooks-claude", "hooks.json", `"tool_input":` + string(canon)},
		{"hooks-codex", "codex-hooks.json", `"tool_input":{"command":"echo <A> & é"}`},
	} {
		t.Run(c.bridge, func(t *testing.T) {
			dir, file := writeHooks(t, c.file, `{"hooks":{"PreToolUse":[{"hooks":[{"type":"command","command":"cat > stdin.json"}]}]}}`)
			r := newHookRig(t, c.bridge, fmt.Sprintf(`{"config_path":%q}`, file), hookGrants(dir, config.ExecGrant{}), scriptedArgs("bash", args), "", agent.Options{})
			r.prompt(t, "go")
			b, err := os.ReadFile(filepath.Join(r.ws, "stdin.json"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), c.want) {
				t.Errorf("stdin %s\nwant it to hold %s", b, c.want)
			}
			rs := toolResults(t, r.sess)
			if len(rs) != 1 || rs[0].IsError || !strings.Contains(rs[0].Content.Text(), "<A> & é") {
				t.Errorf("bash ran %+v", rs)
			}
		})
	}
}

// TestHookFileInTheSessionCwd: a relative config_path names a file in the
// session's working directory, whatever the process's PWD: an editor that
// starts dsh-wasm acp in its own directory still gets the project's hooks.
func TestHookFileInTheSessionCwd(t *testing.T) {
	foreign, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// The foreign directory holds a hook file that allows everything.
	if err := os.WriteFile(filepath.Join(foreign, "hooks.json"), []byte(`{"hooks":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PWD", foreign)
	seed, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	hooks := `{"hooks":{"PreToolUse":[{"matcher":"bash","hooks":[{"type":"command","command":"echo from the session cwd >&2; exit 2"}]}]}}`
	if err := os.WriteFile(filepath.Join(seed, "hooks.json"), []byte(hooks), 0o644); err != nil {
		t.Fatal(err)
	}
	g := hookGrants(foreign, config.ExecGrant{})
	g.Env = []string{"PWD"}
	for _, path := range []string{"hooks.json", "./hooks.json"} {
		r := newHookRig(t, "hooks-claude", fmt.Sprintf(`{"config_path":%q}`, path), g, scriptedBash("echo RAN"), seed, agent.Options{})
		r.prompt(t, "go")
		rs := toolResults(t, r.sess)
		if len(rs) != 1 || !rs[0].IsError || rs[0].Content.Text() != "Error: from the session cwd" {
			t.Fatalf("%s: results %+v, want the session cwd's hook to deny", path, rs)
		}
	}
}

// TestHookFileMissingInTheSessionCwd: no hook file in the session's cwd
// is no hooks, logged at info, and turns run.
func TestHookFileMissingInTheSessionCwd(t *testing.T) {
	r := newHookRig(t, "hooks-codex", `{"config_path":"codex-hooks.json"}`, hookGrants("", config.ExecGrant{}), scriptedBash("echo RAN"), "", agent.Options{})
	res := r.prompt(t, "go")
	rs := toolResults(t, r.sess)
	if res.End.Kind != session.EndCompleted || len(rs) != 1 || rs[0].IsError || len(eventsOf(t, r.sess, session.TypeHookInvoked)) != 0 {
		t.Fatalf("turn %+v results %+v", res.End, rs)
	}
	want := "no hook file " + filepath.Join(r.ws, "codex-hooks.json")
	if !strings.Contains(r.logs.String(), want) || !strings.Contains(r.logs.String(), "level=INFO") {
		t.Errorf("log does not say %q at info:\n%s", want, r.logs.String())
	}
}

// TestHookFileUnusableFailsTheOpen: a hook file in the session's cwd that
// exists but cannot be parsed or read fails the session's open, with an
// error naming the file (and line); no turn runs without its policy.
func TestHookFileUnusableFailsTheOpen(t *testing.T) {
	for _, c := range []struct {
		name string
		make func(t *testing.T, ws string)
		want string
	}{
		{"syntax", func(t *testing.T, ws string) {
			if err := os.WriteFile(filepath.Join(ws, "hooks.json"), []byte("{\n\"hooks\": {,}\n}"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "hooks.json:2: invalid JSON"},
		{"hooks-not-an-object", func(t *testing.T, ws string) {
			if err := os.WriteFile(filepath.Join(ws, "hooks.json"), []byte(`{"hooks": [1]}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}, `hooks.json:1: "hooks" must be an object`},
		{"a-directory", func(t *testing.T, ws string) {
			if err := os.Mkdir(filepath.Join(ws, "hooks.json"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "hooks.json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			seed, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			c.make(t, seed)
			r, err := openHookRig(t, "hooks-claude", `{"config_path":"hooks.json"}`, hookGrants("", config.ExecGrant{}), scriptedBash("echo RAN"), seed, agent.Options{})
			if err == nil {
				t.Fatal("the session opened with a hook file it cannot use")
			}
			if !errors.Is(err, agent.ErrListener) || !strings.Contains(err.Error(), filepath.Join(r.ws, c.want)) {
				t.Errorf("open: %v\nwant an error naming %s", err, filepath.Join(r.ws, c.want))
			}
		})
	}
}

// TestHookAbsoluteFileUnusableFailsTheLoad: an absolute config_path is
// the deployment's: a file there that cannot be parsed fails the load,
// naming the file and line.
func TestHookAbsoluteFileUnusableFailsTheLoad(t *testing.T) {
	dir, file := writeHooks(t, "codex-hooks.json", "{\n  \"hooks\": {\n    \"PreToolUse\": [\n      {\"matcher\": \"bash\",, }\n    ]\n  }\n}\n")
	h, err := plugin.New(plugin.Options{Registry: prompt.NewRegistry(nil), Builtins: All(), Cache: testCache, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(bg)
	spec, err := plugin.SpecFromEntry("", config.Entry{Source: "builtin:hooks-codex", Grants: hookGrants(dir, config.ExecGrant{})})
	if err != nil {
		t.Fatal(err)
	}
	spec.Config = json.RawMessage(fmt.Sprintf(`{"config_path":%q}`, file))
	if _, err := h.Load(bg, spec); err == nil || !strings.Contains(err.Error(), file+":4: invalid JSON") {
		t.Fatalf("load: %v, want an error naming %s:4", err, file)
	}
	// read_from_workspace is gone, with an error that says what replaced it.
	spec.Config = json.RawMessage(`{"config_path":"hooks.json","read_from_workspace":true}`)
	if _, err := h.Load(bg, spec); err == nil || !strings.Contains(err.Error(), "read_from_workspace is gone") {
		t.Fatalf("load with read_from_workspace: %v", err)
	}
}

// TestHookBadGroupSkipped: one malformed group (a matcher RE2 cannot
// compile, a command that is no string) is skipped with a warning naming
// the file, line and group; the file's other groups still apply.
func TestHookBadGroupSkipped(t *testing.T) {
	body := "{\"hooks\": {\n\"PreToolUse\": [\n{\"matcher\": \"ba(sh\", \"hooks\": [{\"type\": \"command\", \"command\": \"exit 0\"}]},\n{\"matcher\": \"bash\", \"hooks\": [{\"type\": \"command\", \"command\": 7}]},\n{\"matcher\": \"bash\", \"hooks\": [{\"type\": \"command\", \"command\": \"echo still here >&2; exit 2\"}]}\n]}}\n"
	dir, file := writeHooks(t, "codex-hooks.json", body)
	r := newHookRig(t, "hooks-codex", fmt.Sprintf(`{"config_path":%q}`, file), hookGrants(dir, config.ExecGrant{}), scriptedBash("echo RAN"), "", agent.Options{})
	for _, want := range []string{file + ":3: PreToolUse[0]: matcher: invalid regular expression", file + ":4: PreToolUse[1]: hooks[0].command must be a non-empty string"} {
		if !strings.Contains(r.logs.String(), want) {
			t.Errorf("log does not name %s:\n%s", want, r.logs.String())
		}
	}
	r.prompt(t, "go")
	rs := toolResults(t, r.sess)
	if len(rs) != 1 || !rs[0].IsError || rs[0].Content.Text() != "Error: still here" {
		t.Fatalf("results %+v, want the good group's deny", rs)
	}
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestHookFileKeptForTheSession: the session's hook file as read at its
// open stays its policy for the whole session, also in a new instance of
// the bridge (the agent's first one ended), whatever was written over the
// file since.
func TestHookFileKeptForTheSession(t *testing.T) {
	seed, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(seed, "hooks.json"), []byte(`{"hooks":{"PreToolUse":[{"matcher":"bash","hooks":[{"type":"command","command":`+mustJSON(denyTouch)+`}]}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := newHookRig(t, "hooks-claude", `{"config_path":"hooks.json"}`, hookGrants("", config.ExecGrant{}),
		scriptedArgs("bash", `{"command":"touch pwned"}`, "<done>", `{"command":"touch pwned"}`), seed, agent.Options{})
	r.prompt(t, "go")
	if rs := toolResults(t, r.sess); len(rs) != 1 || rs[0].Content.Text() != "Error: no pwning" {
		t.Fatalf("first turn's results %+v", rs)
	}
	if err := os.WriteFile(filepath.Join(r.ws, "hooks.json"), []byte(`{"hooks":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	before := r.h.Plugin("hooks-claude").Instances()
	r.h.EndAgent(bg, r.a.Facts().ID) // the bridge's instance for the agent goes
	if after := r.h.Plugin("hooks-claude").Instances(); after >= before {
		t.Fatalf("instances %d before EndAgent, %d after: none ended", before, after)
	}
	r.prompt(t, "again")
	rs := toolResults(t, r.sess)
	if len(rs) != 2 || rs[1].Content.Text() != "Error: no pwning" {
		t.Fatalf("results %+v, want the second call denied by the policy read at the open", rs)
	}
	if _, err := os.Stat(filepath.Join(r.ws, "pwned")); err == nil {
		t.Fatal("bash ran the command the session's policy denies")
	}
}
