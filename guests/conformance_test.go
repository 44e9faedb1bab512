package guests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/agent"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/internal/replay"
	"github.com/dsh-wasm/dsh-wasm/internal/testcorpus"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/session/filestore"
)

// recordedPath matches the reference's workspace in its tool results'
// absolute paths; ours name the run's own workspace.
var recordedPath = regexp.MustCompile(`/tmp/acp-snap-cwd-[A-Za-z0-9]+/`)

// TestConformanceToolScenarios replays the recorded scenarios that use the
// built-in tools through the agent loop, with the recording as the model
// and the real tool-bash and tool-fs guests as the tools, in a copy of the
// scenario's workspace. The loop must make the same tool calls, and each
// result must carry the recorded facts: the recorded text (paths made
// made the run's) starts ours, both are errors or neither, with the same
// failure identity, and a recorded meta (an edit's diffs) is ours.
func TestConformanceToolScenarios(t *testing.T) {
	dir := testcorpus.Sessions(t)
	for _, name := range []string{"tool-call-turn", "fs-read", "fs-write", "fs-edit", "fs-policy-reject", "fs-terminal-card"} {
		t.Run(name, func(t *testing.T) { replayToolScenario(t, filepath.Join(dir, name)) })
	}
}

func replayToolScenario(t *testing.T, scenario string) {
	path := filepath.Join(scenario, "session.jsonl")
	rec, err := session.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(ws, os.DirFS(filepath.Join(scenario, "workspace"))); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}

	reg := prompt.NewRegistry(nil)
	if _, err := agent.RegisterBuiltinVariables(reg); err != nil {
		t.Fatal(err)
	}
	if _, _, err := prompt.RegisterHarnessSections(reg, "You are a coding agent."); err != nil {
		t.Fatal(err)
	}
	h, err := plugin.New(plugin.Options{Registry: reg, Builtins: All(), Cache: testCache, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(bg) })
	for _, name := range []string{"tool-bash", "tool-fs"} {
		g := workspaceRW()
		g.Exec.Allowed = name == "tool-bash"
		spec, err := plugin.SpecFromEntry("", config.Entry{Source: "builtin:" + name, Grants: g})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Load(bg, spec); err != nil {
			t.Fatal(err)
		}
	}
	prov, err := replay.Open(path, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := filestore.New(t.TempDir(), filestore.Options{}).Create(session.Header{Cwd: ws})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	a, err := agent.New(context.Background(), agent.Options{Session: sess, Provider: prov, Registry: reg, Tools: h, Model: "deepseek-v4-flash", Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())

	var turns [][]session.UserMessage
	for _, e := range rec.Events {
		switch e.Type {
		case session.TypeTurnStart:
			turns = append(turns, nil)
		case session.TypeUserMessage:
			m, err := session.As[session.UserMessage](e)
			if err != nil {
				t.Fatal(err)
			}
			turns[len(turns)-1] = append(turns[len(turns)-1], m)
		}
	}
	for i, msgs := range turns {
		for _, m := range msgs {
			if err := a.Enqueue(m); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := a.RunTurn(context.Background()); err != nil {
			t.Fatalf("turn %d: %v", i+1, err)
		}
	}

	wantCalls, wantResults := toolEvents(t, rec.Events)
	gotCalls, gotResults := toolEvents(t, sess.Events())
	if len(gotCalls) != len(wantCalls) || len(gotResults) != len(wantResults) {
		t.Fatalf("%d calls and %d results; recorded %d and %d", len(gotCalls), len(gotResults), len(wantCalls), len(wantResults))
	}
	for i, w := range wantCalls {
		g := gotCalls[i]
		if g.Name != w.Name || g.Arguments != w.Arguments || g.CallID != w.CallID {
			t.Errorf("call %d: %s %s (%s), recorded %s %s (%s)", i, g.Name, g.Arguments, g.CallID, w.Name, w.Arguments, w.CallID)
		}
	}
	for i, w := range wantResults {
		g := gotResults[i]
		want := recordedPath.ReplaceAllLiteralString(w.Content.Text(), ws+"/")
		if g.IsError != w.IsError || !strings.HasPrefix(g.Content.Text(), want) {
			t.Errorf("result %d (%s): error=%v %q\nrecorded error=%v %q", i, wantCalls[i].Name, g.IsError, g.Content.Text(), w.IsError, want)
		}
		if fmt.Sprint(g.Error) != fmt.Sprint(w.Error) {
			t.Errorf("result %d (%s): error identity %+v, recorded %+v", i, wantCalls[i].Name, g.Error, w.Error)
		}
		if len(w.Meta) > 0 && !jsonEqual(g.Meta, w.Meta) {
			t.Errorf("result %d (%s): meta %s, recorded %s", i, wantCalls[i].Name, g.Meta, w.Meta)
		}
	}
	// The effects on disk are the recorded ones.
	switch filepath.Base(scenario) {
	case "fs-write":
		if b, err := os.ReadFile(filepath.Join(ws, "notes.txt")); err != nil || string(b) != "hello world" {
			t.Errorf("notes.txt: %q, %v", b, err)
		}
	case "fs-edit":
		if b, err := os.ReadFile(filepath.Join(ws, "config.txt")); err != nil || !strings.HasPrefix(string(b), "mode=RELEASE\nlevel=info") {
			t.Errorf("config.txt: %q, %v", b, err)
		}
	case "fs-policy-reject":
		want, _ := os.ReadFile(filepath.Join(scenario, "workspace", "settings.txt"))
		if b, err := os.ReadFile(filepath.Join(ws, "settings.txt")); err != nil || string(b) != string(want) {
			t.Errorf("settings.txt changed by a refused edit: %q, %v", b, err)
		}
	}
}

func toolEvents(t *testing.T, events []session.Event) ([]session.ToolCall, []session.ToolResult) {
	t.Helper()
	var calls []session.ToolCall
	var results []session.ToolResult
	for _, e := range events {
		switch e.Type {
		case session.TypeToolCall:
			c, err := session.As[session.ToolCall](e)
			if err != nil {
				t.Fatal(err)
			}
			calls = append(calls, c)
		case session.TypeToolResult:
			r, err := session.As[session.ToolResult](e)
			if err != nil {
				t.Fatal(err)
			}
			results = append(results, r)
		}
	}
	return calls, results
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
