package agent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/crashtest"
	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/internal/replay"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/session/filestore"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

const (
	crashDirEnv  = "DSH_AGENT_CRASH_DIR"
	crashTurnEnv = "DSH_AGENT_CRASH_TURN"
	// crashAtEnv, set to crashInStream, kills the helper while the model
	// streams the first step of its last turn, before any tool.
	crashAtEnv    = "DSH_AGENT_CRASH_AT"
	crashInStream = "stream"
	crashID       = "crash"
)

// crashPrompts are the prompts of the helper's turns.
var crashPrompts = []string{"one", "two", "three"}

// TestCrashHelper is the process TestCrashMidTurn and TestCrashMidStream
// kill. It runs turns until turn DSH_AGENT_CRASH_TURN, whose model calls
// the tool "touch"; the tool creates its file (its effect on the world),
// then calls crashtest.Ready and never returns. With
// DSH_AGENT_CRASH_AT=stream, that turn's model instead streams part of
// an answer, then calls crashtest.Ready and never finishes. Earlier turns
// complete, the first with a tool call of its own. It does nothing in a
// normal run.
func TestCrashHelper(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("helper process for TestCrashMidTurn")
	}
	killTurn, err := strconv.Atoi(os.Getenv(crashTurnEnv))
	if err != nil || killTurn < 1 || killTurn > len(crashPrompts) {
		t.Fatalf("%s=%q", crashTurnEnv, os.Getenv(crashTurnEnv))
	}
	store := filestore.New(dir, filestore.Options{})
	sess, err := store.Create(session.Header{ID: crashID, Cwd: "/crash"})
	if err != nil {
		t.Fatal(err)
	}
	var entries []replay.Entry
	for turn := 1; turn < killTurn; turn++ {
		if turn == 1 {
			entries = append(entries, replay.Entry{Kind: replay.KindChunks, Chunks: callAnswer(call{"c1", "echo", `{"text":"x"}`})})
		}
		entries = append(entries, replay.Entry{Kind: replay.KindChunks, Chunks: textAnswer("turn " + strconv.Itoa(turn))})
	}
	inStream := os.Getenv(crashAtEnv) == crashInStream
	earlier := len(entries)
	if !inStream {
		entries = append(entries, replay.Entry{Kind: replay.KindChunks,
			Chunks: callAnswer(call{"k" + strconv.Itoa(killTurn), "touch", `{"file":"ran"}`})})
	}
	replayed, err := replay.New(&replay.Script{Name: "crash"}, replay.Options{Override: entries})
	if err != nil {
		t.Fatal(err)
	}
	var prov model.Provider = replayed
	if inStream {
		calls := 0
		prov = model.ProviderFunc(func(ctx context.Context, req *model.Request, emit func(model.Chunk) error) error {
			if calls++; calls <= earlier {
				return replayed.Generate(ctx, req, emit)
			}
			for _, c := range textAnswer("half an answer")[:5] { // the text block started, not ended
				if err := emit(c); err != nil {
					return err
				}
			}
			crashtest.Ready()
			select {} // killed here, mid-stream, before the answer is whole
		})
	}
	tools := &fakeTools{fn: func(_ context.Context, name string, args []byte) (tool.Result, error) {
		if name != "touch" {
			return tool.Result{Text: name + ": " + string(args)}, nil
		}
		if err := os.WriteFile(filepath.Join(dir, "ran"), nil, 0o600); err != nil {
			return tool.Result{}, err
		}
		crashtest.Ready()
		select {} // killed here, after the tool's effect, before its result
	}}
	a, err := New(context.Background(), Options{Session: sess, Provider: prov, Model: testModel,
		Registry: newRegistry(t, testPersona, "echo", "touch"), Bus: events.New(discard), Tools: tools, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range crashPrompts[:killTurn] {
		if _, err := a.Prompt(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("the last turn returned: not killed")
}

// A process killed with SIGKILL while a tool call of turn N runs, after
// the tool did its work, loses nothing the loop had recorded before the
// call: on resume the session holds the turn's user message and its
// assistant message, the call is answered with the reference's repair
// result, the turn is closed interrupted, the next turn is N+1, and the
// model's next request carries the lost turn's context.
func TestCrashMidTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	for _, killTurn := range []int{3, 1} {
		t.Run("turn "+strconv.Itoa(killTurn), func(t *testing.T) {
			dir := t.TempDir()
			crashtest.KillWhenReady(t, "TestCrashHelper", crashDirEnv+"="+dir, crashTurnEnv+"="+strconv.Itoa(killTurn))
			if _, err := os.Stat(filepath.Join(dir, "ran")); err != nil {
				t.Fatalf("the tool did not run before the kill: %v", err)
			}
			store := filestore.New(dir, filestore.Options{})
			sess, err := store.Open(crashID)
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			evs := sess.Events()

			var ends []string
			for _, e := range ofType[session.TurnEnd](t, evs) {
				ends = append(ends, e.Reason.Kind)
			}
			want := slices.Repeat([]string{session.EndCompleted}, killTurn-1)
			want = append(want, session.EndInterrupted)
			if !slices.Equal(ends, want) {
				t.Fatalf("turn ends after the crash = %v, want %v (recovery: %v)", ends, want, sess.Recovery())
			}
			var prompts []string
			for _, m := range ofType[session.UserMessage](t, evs) {
				prompts = append(prompts, m.Content.Text())
			}
			if !slices.Equal(prompts, crashPrompts[:killTurn]) {
				t.Fatalf("user messages = %q, want %q", prompts, crashPrompts[:killTurn])
			}
			killed := "k" + strconv.Itoa(killTurn)
			msgs := ofType[session.AssistantMessage](t, evs)
			last := msgs[len(msgs)-1]
			if last.Turn != killTurn || len(last.Content) != 1 || last.Content[0].ID != killed {
				t.Fatalf("the killed turn's assistant message = %+v", last)
			}
			rs := ofType[session.ToolResult](t, evs)
			repair := rs[len(rs)-1]
			if repair.CallID != killed || !repair.IsError || repair.Error == nil || repair.Error.Code != "interrupted" ||
				repair.Content.Text() != "Tool call interrupted by a crash; no result was recorded." {
				t.Fatalf("the killed call's result = %+v", repair)
			}
			if got := types(evs[len(evs)-3:]); !slices.Equal(got, []string{"tool/result", "step/end", "turn/end"}) {
				t.Fatalf("the repair wrote %v", got)
			}

			next := killTurn + 1
			f := newFixture(t, Options{Session: sess, Registry: newRegistry(t, testPersona, "echo", "touch"),
				Provider: scripted(t, step(next, 1, textAnswer("after the crash")))})
			res := f.prompt(t, "again")
			if res.Turn != next || res.Text != "after the crash" {
				t.Fatalf("turn after the crash = %+v", res)
			}
			// The lost turn's context, as the repair defines it: the
			// prompt, the call, its interrupted result, then the new prompt.
			reqMsgs := f.prov.requests()[0].Messages
			tail := reqMsgs[len(reqMsgs)-4:]
			if tail[0].Role != model.RoleUser || session.Parts(tail[0].Content).Text() != crashPrompts[killTurn-1] ||
				tail[1].Role != model.RoleAssistant || tail[1].Content[0].ID != killed ||
				tail[2].Role != model.RoleTool || tail[2].ToolCallID != killed || !tail[2].IsError ||
				!strings.Contains(session.Parts(tail[2].Content).Text(), "interrupted by a crash") ||
				session.Parts(tail[3].Content).Text() != "again" {
				t.Fatalf("the next request ends with %+v", tail)
			}
		})
	}
}

// A process killed with SIGKILL while the model streams the first step
// of turn N, before any tool call, loses nothing the user said: the
// user message is durable before the first model stream runs. On resume
// the session holds every prompt, the killed turn is closed interrupted
// with no assistant message, and the next turn's request carries the
// lost prompt.
func TestCrashMidStream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	for _, killTurn := range []int{1, 3} {
		t.Run("turn "+strconv.Itoa(killTurn), func(t *testing.T) {
			dir := t.TempDir()
			crashtest.KillWhenReady(t, "TestCrashHelper", crashDirEnv+"="+dir, crashTurnEnv+"="+strconv.Itoa(killTurn),
				crashAtEnv+"="+crashInStream)
			store := filestore.New(dir, filestore.Options{})
			sess, err := store.Open(crashID)
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			evs := sess.Events()
			var prompts []string
			for _, m := range ofType[session.UserMessage](t, evs) {
				prompts = append(prompts, m.Content.Text())
			}
			if !slices.Equal(prompts, crashPrompts[:killTurn]) {
				t.Fatalf("user messages after a crash mid-stream = %q, want %q (recovery: %v)", prompts, crashPrompts[:killTurn], sess.Recovery())
			}
			var ends []string
			for _, e := range ofType[session.TurnEnd](t, evs) {
				ends = append(ends, e.Reason.Kind)
			}
			want := append(slices.Repeat([]string{session.EndCompleted}, killTurn-1), session.EndInterrupted)
			if !slices.Equal(ends, want) {
				t.Fatalf("turn ends after the crash = %v, want %v", ends, want)
			}
			for _, m := range ofType[session.AssistantMessage](t, evs) {
				if m.Turn == killTurn {
					t.Fatalf("the killed turn holds an assistant message: %+v", m)
				}
			}

			next := killTurn + 1
			f := newFixture(t, Options{Session: sess, Registry: newRegistry(t, testPersona, "echo", "touch"),
				Provider: scripted(t, step(next, 1, textAnswer("after the crash")))})
			if res := f.prompt(t, "again"); res.Turn != next || res.Text != "after the crash" {
				t.Fatalf("turn after the crash = %+v", res)
			}
			var seen []string
			for _, m := range f.prov.requests()[0].Messages {
				if m.Role == model.RoleUser {
					seen = append(seen, session.Parts(m.Content).Text())
				}
			}
			if !slices.Equal(seen, append(slices.Clone(crashPrompts[:killTurn]), "again")) {
				t.Fatalf("the next request's user messages = %q", seen)
			}
		})
	}
}
