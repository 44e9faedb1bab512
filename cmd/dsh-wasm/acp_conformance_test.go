package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/prereq"
	"github.com/dsh-wasm/dsh-wasm/internal/testcorpus"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// acpItem is one thing an ACP client saw: a session/update, or the
// response to one of its requests.
type acpItem struct {
	update   map[string]any // a session/update's update
	response bool
	result   map[string]any
	errCode  int // the JSON-RPC error code of an error response
}

// acpTurn is what the conformance README checks of one response: the
// tool calls before it (kind and final status, in order), the
// concatenated agent_message_chunk text, and the stop reason or error.
type acpTurn struct {
	Tools []string
	Text  string
	Stop  string
	Error int
}

func (t acpTurn) String() string {
	return fmt.Sprintf("tools=%v text=%q stop=%q error=%d", t.Tools, t.Text, t.Stop, t.Error)
}

// summarize folds a client's view into one acpTurn per response.
func summarize(items []acpItem) []acpTurn {
	var out []acpTurn
	var cur acpTurn
	var order []string
	status := map[string]string{}
	kind := map[string]string{}
	for _, it := range items {
		if !it.response {
			u := it.update
			id, _ := u["toolCallId"].(string)
			switch u["sessionUpdate"] {
			case "agent_message_chunk":
				if c, ok := u["content"].(map[string]any); ok {
					s, _ := c["text"].(string)
					cur.Text += s
				}
			case "tool_call":
				order = append(order, id)
				kind[id], _ = u["kind"].(string)
				status[id], _ = u["status"].(string)
			case "tool_call_update":
				if s, ok := u["status"].(string); ok {
					status[id] = s
				}
			}
			continue
		}
		for _, id := range order {
			cur.Tools = append(cur.Tools, kind[id]+":"+status[id])
		}
		cur.Stop, _ = it.result["stopReason"].(string)
		cur.Error = it.errCode
		out = append(out, cur)
		cur, order = acpTurn{}, nil
		status, kind = map[string]string{}, map[string]string{}
	}
	return out
}

// goldenItems reads a scenario's stdout.golden.jsonl.
func goldenItems(t *testing.T, path string) []acpItem {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var items []acpItem
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m struct {
			ID     *int           `json:"id"`
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
			Result map[string]any `json:"result"`
			Error  *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch {
		case m.Method == "session/update":
			u, _ := m.Params["update"].(map[string]any)
			items = append(items, acpItem{update: u})
		case m.ID != nil && m.Method == "":
			it := acpItem{response: true, result: m.Result}
			if m.Error != nil {
				it.errCode = m.Error.Code
			}
			items = append(items, it)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return items
}

// TestACPConformance runs every conformance scenario through
// `dsh-wasm acp --replay`, driven by the official ACP client
// library from npm, and checks what the client saw as the corpus README
// says: the same tool calls in order with the same kind and final status,
// the same message text per prompt, and the same stop reason or error.
func TestACPConformance(t *testing.T) {
	sessions := testcorpus.Sessions(t)
	node := needTool(t, "node", "the ACP conformance driver")
	driver, err := filepath.Abs(filepath.Join("..", "..", "internal", "acpdriver"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(driver, "node_modules", "@agentclientprotocol", "sdk")); err != nil {
		prereq.Missing(t, "the ACP client library is not installed; run npm ci --prefix %s: %v", driver, err)
	}
	bin := binary(t)
	config, err := filepath.Abs(exampleConfig("acp-agent"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(sessions)
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() {
			continue
		}
		ran++
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(sessions, name)
			cwd := t.TempDir()
			if err := os.CopyFS(cwd, os.DirFS(filepath.Join(dir, "workspace"))); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			cmd := exec.Command(node, filepath.Join(driver, "driver.mjs"), filepath.Join(dir, "input.json"), cwd, "--",
				bin, "acp", "--config", config, "--replay", filepath.Join(dir, "session.jsonl"))
			data := t.TempDir()
			cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+data)
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
			if !strings.Contains(stderr.String(), "the model is a replay of") {
				t.Errorf("stderr does not say the model is a replay:\n%s", stderr.String())
			}
			var got []acpItem
			for _, it := range run.Transcript {
				if it.Type == "update" {
					got = append(got, acpItem{update: it.Update})
					continue
				}
				item := acpItem{response: true, result: it.Result}
				if it.Error != nil {
					item.errCode = it.Error.Code
				}
				got = append(got, item)
			}
			// The tools acted for real in the workspace.
			for file, content := range map[string]map[string]string{
				"fs-write": {"notes.txt": "hello world"},
				"fs-edit":  {"config.txt": "mode=RELEASE\nlevel=info\n"},
			}[name] {
				b, err := os.ReadFile(filepath.Join(cwd, file))
				if err != nil || strings.TrimSuffix(string(b), "\n") != strings.TrimSuffix(content, "\n") {
					t.Errorf("%s after the run = %q (%v), want %q", file, b, err, content)
				}
			}
			checkChildSessions(t, dir, filepath.Join(data, "dsh-wasm", "sessions"))
			want := summarize(goldenItems(t, filepath.Join(dir, "stdout.golden.jsonl")))
			have := summarize(got)
			if len(have) != len(want) {
				t.Fatalf("%d responses, want %d:\ngot  %v\nwant %v", len(have), len(want), have, want)
			}
			for i := range want {
				if have[i].String() != want[i].String() {
					t.Errorf("response %d:\ngot  %v\nwant %v", i+1, have[i], want[i])
				}
			}
		})
	}
	if ran == 0 {
		t.Fatal("no scenarios found")
	}
}

// checkChildSessions compares the sessions a run left under root with the
// scenario's recording: one child per recorded session.N.jsonl, each
// naming its parent, and a fork's seeded with as many events as the
// recorded fork's.
func checkChildSessions(t *testing.T, scenario, root string) {
	t.Helper()
	recorded, err := filepath.Glob(filepath.Join(scenario, "session.*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".jsonl") {
			files = append(files, path)
		}
		return err
	})
	if err != nil && !(len(recorded) == 0 && errors.Is(err, fs.ErrNotExist)) {
		t.Fatal(err)
	}
	var parents, kids []*session.Log
	for _, f := range files {
		l, err := session.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if l.Header.ParentSession == "" {
			parents = append(parents, l)
		} else {
			kids = append(kids, l)
		}
	}
	if len(kids) != len(recorded) {
		t.Fatalf("the run left %d child sessions, the recording has %d", len(kids), len(recorded))
	}
	for i, rec := range recorded {
		want, err := session.ReadFile(rec)
		if err != nil {
			t.Fatal(err)
		}
		k := kids[i]
		if len(parents) != 1 || k.Header.ParentSession != parents[0].Header.ID {
			t.Errorf("child %s names parent %q; the run's top sessions: %d", k.Header.ID, k.Header.ParentSession, len(parents))
		}
		// The seed copies the parent's events, which here include the
		// plugin/state events of the hook bridges (each session records
		// whether it has a hook file); the reference has no such events.
		if got := k.Header.SeedLength - pluginStates(k, k.Header.SeedLength); got != want.Header.SeedLength {
			t.Errorf("child seedLength %d (%d without plugin/state events), recorded %d", k.Header.SeedLength, got, want.Header.SeedLength)
		}
		if got, exp := lastEnd(k), lastEnd(want); got != exp || got != session.EndCompleted {
			t.Errorf("child turn ended %q, recorded %q", got, exp)
		}
	}
}

func lastEnd(l *session.Log) string {
	for i := len(l.Events) - 1; i >= 0; i-- {
		if l.Events[i].Type == session.TypeTurnEnd {
			te, err := session.As[session.TurnEnd](l.Events[i])
			if err == nil {
				return te.Reason.Kind
			}
		}
	}
	return ""
}

// pluginStates counts the plugin/state events among l's first n events.
func pluginStates(l *session.Log, n int) int {
	c := 0
	for i := 0; i < n && i < len(l.Events); i++ {
		if l.Events[i].Type == session.TypePluginState {
			c++
		}
	}
	return c
}
