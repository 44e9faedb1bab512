package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/replay"
	"github.com/dsh-wasm/dsh-wasm/internal/testcorpus"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

// TestConformanceSessionsLoad reads every session file of the corpus,
// children included.
func TestConformanceSessionsLoad(t *testing.T) {
	dir := testcorpus.Dir(t)
	files, err := filepath.Glob(filepath.Join(dir, "sessions", "*", "session*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no session files in the corpus")
	}
	for _, path := range files {
		log, err := session.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if log.Recovery.Repaired() {
			t.Errorf("%s needed repairs: %v", path, log.Recovery)
		}
		if _, err := session.Messages(log.Events); err != nil {
			t.Errorf("%s: messages: %v", path, err)
		}
	}
}

// TestConformanceReplays replays each recorded parent session through the
// loop, with the recording as the model and the recorded tool results as
// the tools, and checks that the loop writes the same session, event for
// event. Subagent scenarios replay their parent only: the subagent tool's
// result is the recorded one.
func TestConformanceReplays(t *testing.T) {
	dir := testcorpus.Dir(t)
	entries, err := os.ReadDir(filepath.Join(dir, "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		scenario := filepath.Join(dir, "sessions", e.Name())
		t.Run(e.Name(), func(t *testing.T) { replayScenario(t, scenario) })
	}
}

// recordedTools answers tool calls with the recorded results, in the
// recorded order, checking that each call is the recorded one.
type recordedTools struct {
	t       testing.TB
	mu      sync.Mutex
	calls   []session.ToolCall
	results map[string]session.ToolResult
	next    int
}

func (r *recordedTools) CallTool(_ context.Context, _ *prompt.AgentFacts, name string, args []byte) (tool.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next >= len(r.calls) {
		return tool.Result{}, fmt.Errorf("unexpected tool call %s %s: the recording has %d", name, args, len(r.calls))
	}
	c := r.calls[r.next]
	r.next++
	// The tool gets the canonical form of what the model sent.
	want, err := CanonicalArguments(c.Arguments)
	if c.Name != name || err != nil || string(want) != string(args) {
		r.t.Errorf("tool call %d = %s %s, recorded %s %s (canonical %s, %v)", r.next, name, args, c.Name, c.Arguments, want, err)
	}
	res, ok := r.results[c.CallID]
	if !ok {
		return tool.Result{}, fmt.Errorf("no recorded result for call %s", c.CallID)
	}
	return tool.Result{Text: res.Content.Text(), IsError: res.IsError}, nil
}

func (r *recordedTools) EndAgent(context.Context, string) {}

// recordedTurn is a turn's input: its user messages, and how a cancelled
// turn was cancelled.
type recordedTurn struct {
	msgs   []session.UserMessage
	cancel *session.EndReason
}

func replayScenario(t *testing.T, dir string) {
	path := filepath.Join(dir, "session.jsonl")
	rec, err := session.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tools := &recordedTools{t: t, results: map[string]session.ToolResult{}}
	var toolNames []string
	var turns []*recordedTurn
	var cur *recordedTurn
	for _, e := range rec.Events {
		switch e.Type {
		case session.TypeTurnStart:
			cur = &recordedTurn{}
			turns = append(turns, cur)
		case session.TypeUserMessage:
			m, err := session.As[session.UserMessage](e)
			if err != nil {
				t.Fatal(err)
			}
			cur.msgs = append(cur.msgs, m)
		case session.TypeToolCall:
			c, err := session.As[session.ToolCall](e)
			if err != nil {
				t.Fatal(err)
			}
			tools.calls = append(tools.calls, c)
			if !slices.Contains(toolNames, c.Name) {
				toolNames = append(toolNames, c.Name)
			}
		case session.TypeToolResult:
			r, err := session.As[session.ToolResult](e)
			if err != nil {
				t.Fatal(err)
			}
			tools.results[r.CallID] = r
		case session.TypeTurnEnd:
			end, err := session.As[session.TurnEnd](e)
			if err != nil {
				t.Fatal(err)
			}
			if end.Reason.Kind == session.EndAborted {
				cur.cancel = &end.Reason
			}
		}
	}

	prov, err := replay.Open(path, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sess := newSession(t, newStore(t), session.Header{ID: rec.Header.ID, Cwd: rec.Header.Cwd})
	var a *Agent
	var cancelWith *session.EndReason
	f := newFixture(t, Options{
		Session:  sess,
		Registry: newRegistry(t, testPersona, toolNames...),
		Tools:    tools,
		Provider: prov,
		// As the ACP client does: cancel once the first text arrives.
		OnEvent: func(e session.Event) {
			if cancelWith != nil && e.Type == session.TypeAssistantChunk && bytes.Contains(e.Data, []byte(`"text-delta"`)) {
				a.Cancel(cancelWith.Reason)
				cancelWith = nil
			}
		},
	})
	a = f.Agent
	for i, turn := range turns {
		for _, m := range turn.msgs {
			if err := f.Enqueue(m); err != nil {
				t.Fatal(err)
			}
		}
		cancelWith = turn.cancel
		res, err := f.RunTurn(context.Background())
		if err != nil {
			t.Fatalf("turn %d: %v", i+1, err)
		}
		if res.Turn != i+1 {
			t.Fatalf("turn %d ran as turn %d", i+1, res.Turn)
		}
	}
	if tools.next != len(tools.calls) {
		t.Errorf("%d of %d recorded tool calls were made", tools.next, len(tools.calls))
	}
	compareSessions(t, sess.Events(), rec.Events)
}

// compareSessions checks got against the recording event for event:
// type, seq, surface op, sources and data. Tool results are compared on
// what the loop controls (turn, step, call, content, isError); the
// reference tools' error and meta fields are theirs.
func compareSessions(t *testing.T, got, want []session.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d events, recorded %d", len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		where := fmt.Sprintf("event %d (%s)", i, w.Type)
		if g.Type != w.Type || g.Seq != w.Seq {
			t.Fatalf("%s: got %s seq %d", where, g.Type, g.Seq)
		}
		if !reflect.DeepEqual(g.SurfaceOp, w.SurfaceOp) {
			t.Errorf("%s: surface op %v, recorded %v", where, g.SurfaceOp, w.SurfaceOp)
		}
		if !slices.Equal(g.SourceEventSeqs, w.SourceEventSeqs) {
			t.Errorf("%s: sources %v, recorded %v", where, g.SourceEventSeqs, w.SourceEventSeqs)
		}
		gd, wd := decodeData(t, g.Data), decodeData(t, w.Data)
		if g.Type == session.TypeToolResult {
			delete(wd, "error")
			delete(wd, "meta")
		}
		if !reflect.DeepEqual(gd, wd) {
			t.Errorf("%s: data\n got %s\nwant %s", where, g.Data, w.Data)
		}
	}
}

func decodeData(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("event data %s: %v", raw, err)
	}
	return m
}
