package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/guests"
	"github.com/dsh-wasm/dsh-wasm/internal/agent"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/internal/plugintest"
	"github.com/dsh-wasm/dsh-wasm/internal/turntest"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

func init() { seamGroups = append(seamGroups, hooksAttacks) }

// The seam: a tool call's arguments and the policy files. The model's
// argument text was read twice, by the hook bridge (encoding/json) and by
// the tool (jsonobj), and the hook file was found through $PWD. Now the
// loop reads the arguments once (agent.CanonicalArguments) and hooks and
// tool get the same bytes; a relative hook file is the session cwd's,
// read when the session opens.
//
// Each attack runs a real agent turn with the built-in tool-bash and a
// hook bridge on a host of its own, in the workspace, with a hook that
// denies any call whose input mentions "touch <marker>"; the attack wins
// if the marker file appears.

// hookRun is one agent session against a bridge.
type hookRun struct {
	e       *env
	bridge  string
	cfg     string // the bridge's config JSON
	envVars []string
	cwd     string // the session's working directory; e.ws when empty
}

// denyMarker is a hook command that keeps its stdin in seen-<marker>.json
// and blocks a call whose input mentions "touch <marker>" or "> <marker>".
func denyMarker(marker string) string {
	return fmt.Sprintf(`cat > seen-%[1]s.json; if grep -q -e 'touch %[1]s' -e '> %[1]s' seen-%[1]s.json; then echo 'denied %[1]s' >&2; exit 2; fi`, marker)
}

// hookFileBody is a hook file whose PreToolUse hook is command.
func hookFileBody(command string) string {
	return `{"hooks":{"PreToolUse":[{"matcher":"bash","hooks":[{"type":"command","command":` + quoteJSON(command) + `}]}]}}`
}

func quoteJSON(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// session opens a session in the workspace on a host of the run's own
// and has the model call bash with each argument text; it returns the
// session's events, or the error of the open.
func (r hookRun) session(args ...string) ([]session.Event, error) {
	e := r.e
	logger := slog.New(captureHandler{c: e.logs})
	reg := prompt.NewRegistry(logger)
	if _, err := agent.RegisterBuiltinVariables(reg); err != nil {
		e.t.Fatal(err)
	}
	h, err := plugin.New(plugin.Options{Registry: reg, Builtins: guests.All(), Cache: plugintest.SharedCache(e.t), Logger: logger})
	if err != nil {
		e.t.Fatal(err)
	}
	defer h.Close(context.Background())
	ws := config.Grants{FS: []config.FSGrant{{Path: config.Workspace, Mode: config.ModeRW}}, Exec: config.ExecGrant{Allowed: true}}
	operator := filepath.Join(e.base, "operator")
	must(e.t, os.MkdirAll(operator, 0o755))
	bridge := ws
	bridge.FS = append([]config.FSGrant{{Path: operator, Mode: config.ModeRO}}, ws.FS...)
	bridge.SessionEvents = []string{"hook/invoked", "hook/result"}
	bridge.Events = []string{"agent/prompt-submit", "tools/pre-execute", "tools/post-execute", "agent/turn-stopping"}
	bridge.Env = r.envVars
	for _, p := range []struct {
		name, cfg string
		g         config.Grants
	}{{"tool-bash", "", ws}, {r.bridge, r.cfg, bridge}} {
		spec, err := plugin.SpecFromEntry("", config.Entry{Source: "builtin:" + p.name, Grants: p.g})
		if err != nil {
			e.t.Fatal(err)
		}
		if p.cfg != "" {
			spec.Config = []byte(p.cfg)
		}
		if _, err := h.Load(e.ctx, spec); err != nil {
			e.t.Fatalf("load %s: %v", p.name, err)
		}
	}
	prov := &scripted.Tools{}
	for _, a := range args {
		prov.Calls = append(prov.Calls, scripted.Call{Name: "bash", Arguments: a})
	}
	cwd := e.ws
	if r.cwd != "" {
		cwd = r.cwd
	}
	res, evs, err := turntest.Turn(e.ctx, e.t, h, agent.Options{Model: "m", Provider: prov, Registry: reg, Logger: logger}, cwd, "go")
	if errors.Is(err, agent.ErrListener) {
		return nil, err // the agent did not open: its hooks refused
	}
	if err != nil || res.End.Kind != session.EndCompleted {
		e.t.Fatalf("turn: %+v, %v", res.End, err)
	}
	return evs, nil
}

// results are a session's tool results.
func results(e *env, evs []session.Event) []session.ToolResult {
	var out []session.ToolResult
	for _, ev := range evs {
		if ev.Type == session.TypeToolResult {
			r, err := session.As[session.ToolResult](ev)
			must(e.t, err)
			out = append(out, r)
			e.record(r.Content.Text())
		}
	}
	return out
}

// noMarker fails the attack if bash created the marker.
func (e *env) noMarker(marker string) {
	e.t.Helper()
	if _, err := os.Stat(filepath.Join(e.ws, marker)); err == nil {
		e.t.Errorf("bash created %s: the hook's deny was bypassed", marker)
	}
}

// wantRefused checks that each result is the loop's INVALID_ARGS refusal
// and that no hook saw the call.
func (e *env) wantRefused(rs []session.ToolResult, n int, marker, why string) {
	e.t.Helper()
	if len(rs) != n {
		e.t.Fatalf("%d results, want %d", len(rs), n)
	}
	for _, r := range rs {
		if !r.IsError || r.Error == nil || r.Error.Code != agent.CodeInvalidArguments || !strings.Contains(r.Content.Text(), why) {
			e.t.Errorf("result %+v, want INVALID_ARGS saying %q", r, why)
		}
	}
	if _, err := os.Stat(filepath.Join(e.ws, "seen-"+marker+".json")); err == nil {
		e.t.Errorf("a hook saw arguments the loop refuses")
	}
	e.noMarker(marker)
}

func hooksAttacks() []hostileAttack {
	return []hostileAttack{
		{name: "seams-hooks-unicode-folded-key", run: func(e *env) string {
			// encoding/json folds "ſ" to "s" and the Kelvin sign to "k":
			// a case-insensitive hook reader and the exact tool would take
			// different members.
			run := hookRun{e: e, bridge: "hooks-claude", cfg: fmt.Sprintf(`{"config_path":%q}`, e.writeHooks("abs-fold.json", hookFileBody(denyMarker("fold1"))))}
			evs, err := run.session(`{"command":"touch fold1","deſcription":"a","description":"b"}`,
				"{\"command\":\"touch fold1\",\"\u212aind\":1,\"kind\":2}",
				`{"command":"touch fold1","opts":{"Mode":1,"mode":2}}`)
			if err != nil {
				e.t.Fatal(err)
			}
			e.wantRefused(results(e, evs), 3, "fold1", "differ only in case")
			return "refused: keys equal under Unicode case folding, at any depth, are INVALID_ARGS before any hook or tool"
		}},
		{name: "seams-hooks-parameter-case", run: func(e *env) string {
			// One key, the tool's parameter in another case: a reader
			// matching keys as encoding/json does takes it for the
			// command, an exact one sees none.
			run := hookRun{e: e, bridge: "hooks-codex", cfg: fmt.Sprintf(`{"config_path":%q}`, e.writeHooks("abs-case.json", hookFileBody(denyMarker("case1"))))}
			evs, err := run.session(`{"Command":"touch case1"}`, `{"COMMAND":"touch case1","description":"x"}`)
			if err != nil {
				e.t.Fatal(err)
			}
			e.wantRefused(results(e, evs), 2, "case1", "the tool's parameter \"command\" in another case")
			return "refused: a key that is one of the tool's parameters in another case is INVALID_ARGS before any hook or tool"
		}},
		{name: "seams-hooks-duplicate-key", run: func(e *env) string {
			// Readers differ on which of two equal keys wins; the Codex
			// bridge showed its hook one command and bash ran the other.
			run := hookRun{e: e, bridge: "hooks-codex", cfg: fmt.Sprintf(`{"config_path":%q}`, e.writeHooks("abs-dup.json", hookFileBody(denyMarker("dup1"))))}
			evs, err := run.session(`{"command":"touch dup1","command":"true"}`, `{"command":"true","\u0063ommand":"touch dup1"}`)
			if err != nil {
				e.t.Fatal(err)
			}
			e.wantRefused(results(e, evs), 2, "dup1", "duplicate key")
			return "refused: a duplicate key, spelled alike or through escapes, is INVALID_ARGS before any hook or tool"
		}},
		{name: "seams-hooks-deep-nesting", run: func(e *env) string {
			// A hook program whose parser runs out of stack fails, and a
			// failing hook does not block: nesting within encoding/json's
			// limit but past a hook's was a way around it.
			run := hookRun{e: e, bridge: "hooks-claude", cfg: fmt.Sprintf(`{"config_path":%q}`, e.writeHooks("abs-deep.json", hookFileBody(denyMarker("deep1"))))}
			deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
			evs, err := run.session(`{"command":"touch deep1","pad":`+deep+`}`, `{"pad":`+deep+`,"command":"touch deep1"}`)
			if err != nil {
				e.t.Fatal(err)
			}
			e.wantRefused(results(e, evs), 2, "deep1", "nested deeper than")
			return "refused: nesting past jsonobj.CanonicalMaxDepth is INVALID_ARGS before any hook or tool"
		}},
		{name: "seams-hooks-huge-number", run: func(e *env) string {
			// A number no float64 holds emptied the Claude hook's
			// tool_input; negative and nested ones too.
			run := hookRun{e: e, bridge: "hooks-claude", cfg: fmt.Sprintf(`{"config_path":%q}`, e.writeHooks("abs-num.json", hookFileBody(denyMarker("num1"))))}
			evs, err := run.session(`{"command":"touch num1","pad":-1e309}`, `{"command":"touch num1","x":[{"y":123e45678}]}`)
			if err != nil {
				e.t.Fatal(err)
			}
			e.wantRefused(results(e, evs), 2, "num1", "does not fit in a float64")
			return "refused: a number no float64 holds, anywhere in the arguments, is INVALID_ARGS before any hook or tool"
		}},
		{name: "seams-hooks-escaped-bytes", run: func(e *env) string {
			// A hook that greps its stdin missed what an encoder escaped
			// (> as \u003e) or what the model escaped (\u0074ouch); the
			// canonical bytes spell each string one way, as the tool
			// reads it.
			run := hookRun{e: e, bridge: "hooks-claude", cfg: fmt.Sprintf(`{"config_path":%q}`, e.writeHooks("abs-esc.json", hookFileBody(denyMarker("esc1"))))}
			evs, err := run.session(`{"command":"echo x \u003e esc1"}`, `{"command":"\u0074ouch esc1"}`)
			if err != nil {
				e.t.Fatal(err)
			}
			rs := results(e, evs)
			if len(rs) != 2 {
				e.t.Fatalf("%d results", len(rs))
			}
			for _, r := range rs {
				if !r.IsError || r.Content.Text() != "Error: denied esc1" {
					e.t.Errorf("result %+v, want the hook's deny", r)
				}
			}
			e.noMarker("esc1")
			return "denied: the hook reads the canonical bytes, escapes decoded and nothing HTML-escaped, as bash reads them"
		}},
		{name: "seams-hooks-file-swapped-after-open", run: func(e *env) string {
			// The session's own hook file is read at its open: the agent
			// replacing it (a write, a symlink) changes nothing until the
			// next open.
			must(e.t, os.WriteFile(filepath.Join(e.ws, "hooks.json"), []byte(hookFileBody(denyMarker("swap1"))), 0o644))
			defer os.Remove(filepath.Join(e.ws, "hooks.json"))
			run := hookRun{e: e, bridge: "hooks-claude", cfg: `{"config_path":"hooks.json"}`}
			evs, err := run.session(`{"command":"printf '{}' > hooks.json"}`, `{"command":"touch swap1"}`,
				`{"command":"rm hooks.json; ln -s /dev/null hooks.json"}`, `{"command":"touch swap1"}`)
			if err != nil {
				e.t.Fatal(err)
			}
			rs := results(e, evs)
			if len(rs) != 4 || rs[0].IsError || rs[2].IsError || rs[1].Content.Text() != "Error: denied swap1" || rs[3].Content.Text() != "Error: denied swap1" {
				e.t.Errorf("results %+v, want the swaps to run and both touches denied", rs)
			}
			e.noMarker("swap1")
			return "denied: the hook file read at the session's open stays its policy, whatever a tool writes over it"
		}},
		{name: "seams-hooks-file-outside-pwd", run: func(e *env) string {
			// $PWD, which a client spawning the process chooses, points at
			// a directory whose hook file allows everything; the policy
			// is the session cwd's.
			permissive := filepath.Join(e.base, "client-dir")
			must(e.t, os.MkdirAll(permissive, 0o755))
			must(e.t, os.WriteFile(filepath.Join(permissive, "codex-hooks.json"), []byte(`{"hooks":{}}`), 0o644))
			must(e.t, os.WriteFile(filepath.Join(e.ws, "codex-hooks.json"), []byte(hookFileBody(denyMarker("pwd1"))), 0o644))
			defer os.Remove(filepath.Join(e.ws, "codex-hooks.json"))
			e.t.Setenv("PWD", permissive)
			run := hookRun{e: e, bridge: "hooks-codex", cfg: `{"config_path":"./codex-hooks.json"}`, envVars: []string{"PWD"}}
			evs, err := run.session(`{"command":"touch pwd1"}`)
			if err != nil {
				e.t.Fatal(err)
			}
			if rs := results(e, evs); len(rs) != 1 || rs[0].Content.Text() != "Error: denied pwd1" {
				e.t.Errorf("results %+v, want the session cwd's hook to deny", rs)
			}
			e.noMarker("pwd1")
			return "denied: a relative hook file resolves against the session's cwd, never $PWD"
		}},
		{name: "seams-hooks-file-unusable", run: func(e *env) string {
			// A hook file the bridge cannot use (a directory, or a
			// symlink out of the jail to a secret) must not leave the
			// session running without its policy, nor show the secret.
			file := filepath.Join(e.ws, "hooks.json")
			run := hookRun{e: e, bridge: "hooks-claude", cfg: `{"config_path":"hooks.json"}`}
			must(e.t, os.Mkdir(file, 0o755))
			_, err := run.session(`{"command":"touch bad1"}`)
			e.recordErr(err)
			if err == nil || !errors.Is(err, agent.ErrListener) || !strings.Contains(err.Error(), file) {
				e.t.Errorf("open with a directory for a hook file: %v, want an error naming %s", err, file)
			}
			must(e.t, os.Remove(file))
			must(e.t, os.Symlink(filepath.Join(e.outside, "secret.txt"), file))
			defer os.Remove(file)
			evs, err := run.session(`{"command":"touch bad1"}`)
			e.recordErr(err)
			if err == nil {
				// Read as missing (the jail does not follow the link out):
				// then there are no hooks, and the call is bash's.
				results(e, evs)
				os.Remove(filepath.Join(e.ws, "bad1"))
			} else if !strings.Contains(err.Error(), file) {
				e.t.Errorf("open with a symlink out: %v, want an error naming %s", err, file)
			}
			return "refused: a hook file that exists but cannot be used fails the session's open, naming it; the secret behind a link out is never read"
		}},
	}
}

// writeHooks writes a hook file outside the workspace (the operator's,
// given by absolute path) and returns its path.
func (e *env) writeHooks(name, body string) string {
	e.t.Helper()
	dir := filepath.Join(e.base, "operator")
	must(e.t, os.MkdirAll(dir, 0o755))
	file := filepath.Join(dir, name)
	must(e.t, os.WriteFile(file, []byte(body), 0o644))
	return file
}
