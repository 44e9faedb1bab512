package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/internal/replay"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// runTools runs one headless turn whose model makes calls, then answers
// "done", and returns the tool results in order.
func runTools(t *testing.T, args []string, calls ...scripted.Call) []session.ToolResult {
	t.Helper()
	rec := writeReplay(t,
		replay.Entry{Kind: replay.KindChunks, Chunks: scripted.Answer{Calls: calls}.Chunks()},
		replay.Entry{Kind: replay.KindChunks, Chunks: scripted.Answer{Text: "done"}.Chunks()})
	code, out, errOut := runCLI(t, "", append(args, "--replay", rec, "-p", "go", "--json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rs []session.ToolResult
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		var e session.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if e.Type == session.TypeToolResult {
			r, err := session.As[session.ToolResult](e)
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, r)
		}
	}
	if len(rs) != len(calls) {
		t.Fatalf("%d tool results, want %d: %s", len(rs), len(calls), out)
	}
	return rs
}

func argsJSON(kv ...string) string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// dsh-wasm starts in $HOME, where the default compile cache and sessions
// directory both lie inside the workspace: the agent works on $HOME and
// reaches neither.
func TestStartInHome(t *testing.T) {
	home, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv(plugin.EnvCacheDir, "") // the default: under $HOME
	conf := filepath.Join(t.TempDir(), "dsh.yml")
	if err := os.WriteFile(conf, []byte("model: m\nplugins:\n  - source: builtin:tool-fs\n    grants:\n      fs: [{path: workspace, mode: rw}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sessions := filepath.Join(home, ".local", "share", "dsh-wasm", "sessions")
	cache := filepath.Join(home, ".cache", "dsh-wasm", "wazero")
	rs := runTools(t, []string{"run", "--config", conf, "--cwd", home},
		scripted.Call{ID: "c1", Name: "write", Arguments: argsJSON("file_path", filepath.Join(home, "notes.txt"), "content", "mine")},
		scripted.Call{ID: "c2", Name: "write", Arguments: argsJSON("file_path", filepath.Join(sessions, "forged.jsonl"), "content", "{}")},
		scripted.Call{ID: "c3", Name: "write", Arguments: argsJSON("file_path", filepath.Join(cache, "planted"), "content", "x")},
	)
	if rs[0].IsError {
		t.Errorf("writing in $HOME: %s", rs[0].Content.Text())
	}
	for i, what := range []string{"", "a session file", "a cache entry"} {
		if i > 0 && !rs[i].IsError {
			t.Errorf("writing %s: %s", what, rs[i].Content.Text())
		}
	}
	if _, err := os.Stat(cache); err != nil {
		t.Errorf("the default cache is not under $HOME: %v", err)
	}
	for _, p := range []string{filepath.Join(sessions, "forged.jsonl"), filepath.Join(cache, "planted")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	if fi, err := os.Stat(cache); err == nil && fi.Mode().Perm() != 0o700 {
		t.Errorf("the cache directory's mode is %v, want 0700", fi.Mode().Perm())
	}
}

// dsh-wasm starts in a project that holds its own deployment and hook
// files: they are the project's, not the host's, so the agent reads them,
// and the project's hooks run.
func TestStartInAProjectWithItsOwnFiles(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	project, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(project, "dsh.yml")
	yml := `model: m
plugins:
  - source: builtin:tool-fs
    grants:
      fs: [{path: workspace, mode: rw}]
  - source: builtin:hooks-claude
    config: {config_path: .claude/settings.json}
    grants:
      fs: [{path: workspace, mode: ro}]
      exec: {allowed: true}
      events: [agent/prompt-submit, tools/pre-execute, tools/post-execute, agent/turn-stopping]
      session_events: [hook/invoked, hook/result]
`
	settings := `{"hooks":{"PreToolUse":[{"matcher":"write","hooks":[{"type":"command","command":"echo the project says no >&2; exit 2"}]}]}}`
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(conf, []byte(yml), 0o644))
	must(os.MkdirAll(filepath.Join(project, ".claude"), 0o755))
	must(os.WriteFile(filepath.Join(project, ".claude", "settings.json"), []byte(settings), 0o644))
	must(os.WriteFile(filepath.Join(project, "hooks.json"), []byte(settings), 0o644))
	rs := runTools(t, []string{"run", "--config", conf, "--cwd", project},
		scripted.Call{ID: "c1", Name: "read", Arguments: argsJSON("file_path", conf)},
		scripted.Call{ID: "c2", Name: "read", Arguments: argsJSON("file_path", filepath.Join(project, "hooks.json"))},
		scripted.Call{ID: "c3", Name: "write", Arguments: argsJSON("file_path", filepath.Join(project, "x.txt"), "content", "x")},
	)
	if rs[0].IsError || !strings.Contains(rs[0].Content.Text(), "builtin:hooks-claude") {
		t.Errorf("reading the project's dsh.yml: %s", rs[0].Content.Text())
	}
	if rs[1].IsError || !strings.Contains(rs[1].Content.Text(), "PreToolUse") {
		t.Errorf("reading the project's hooks.json: %s", rs[1].Content.Text())
	}
	if !rs[2].IsError || !strings.Contains(rs[2].Content.Text(), "the project says no") {
		t.Errorf("the project's hook did not run: %s", rs[2].Content.Text())
	}
	if _, err := os.Stat(filepath.Join(project, "x.txt")); err == nil {
		t.Error("the denied write happened")
	}
}
