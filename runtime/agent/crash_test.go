package agent

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/crashtest"
	"github.com/dsh-wasm/dsh-wasm/runtime/events"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/replay"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

const (
	crashDirEnv = "DSH_AGENT_CRASH_DIR"
	crashID     = "crash"
)

// TestCrashHelper is the process TestCrashMidTurn kills: it runs two
// turns, then a third whose model stream hangs after its first text, and
// calls crashtest.Ready once that text is recorded. It does nothing in a normal
// run.
func TestCrashHelper(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("helper process for TestCrashMidTurn")
	}
	store := session.NewStore(dir)
	sess, err := store.Create(session.Header{ID: crashID, Cwd: "/crash"})
	if err != nil {
		t.Fatal(err)
	}
	prov, err := replay.New(&replay.Script{Name: "crash"}, replay.WithOverride([]replay.Entry{
		{Kind: replay.KindChunks, Chunks: callAnswer(call{"c1", "echo", `{"text":"x"}`})},
		{Kind: replay.KindChunks, Chunks: textAnswer("turn one")},
		{Kind: replay.KindChunks, Chunks: textAnswer("turn two")},
		{Kind: replay.KindHang},
	}))
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(context.Background(), Options{Session: sess, Provider: prov, Model: testModel, Registry: newRegistry(t, testPersona, "echo"),
		Bus: events.New(discard), Tools: echoTools(), Logger: discard,
		OnEvent: func(e session.Event) {
			if e.Type == session.TypeAssistantChunk && strings.Contains(string(e.Data), `"partial"`) {
				crashtest.Ready()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"one", "two", "three"} {
		if _, err := a.Prompt(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("the third turn returned: not killed")
}

// A process killed with SIGKILL in the middle of a turn leaves a session
// that loads with every completed turn intact, and an agent on it goes on
// with the next turn.
func TestCrashMidTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	dir := t.TempDir()
	crashtest.KillWhenReady(t, "TestCrashHelper", crashDirEnv+"="+dir)

	store := session.NewStore(dir)
	sess, err := store.Open(crashID)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	var ends []string
	for _, e := range ofType[session.TurnEnd](t, sess.Events()) {
		ends = append(ends, e.Reason.Kind)
	}
	if strings.Join(ends, ",") != "completed,completed" {
		t.Fatalf("turn ends after the crash = %v (recovery: %v)", ends, sess.Recovery())
	}
	if n := len(ofType[session.ToolResult](t, sess.Events())); n != 1 {
		t.Fatalf("%d tool results, want 1", n)
	}

	f := newFixture(t, Options{Session: sess, Provider: scripted(t, step(3, 1, textAnswer("after the crash")))})
	res := f.prompt(t, "three again")
	if res.Turn != 3 || res.Text != "after the crash" {
		t.Fatalf("turn after the crash = %+v", res)
	}
	if msgs := f.prov.requests()[0].Messages; len(msgs) != 7 {
		t.Fatalf("the turn after the crash sees %d messages, want 7", len(msgs))
	}
}
