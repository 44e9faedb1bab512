package filestore

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/crashtest"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

const (
	crashDirEnv = "DSH_SESSION_CRASH_DIR"
	crashID     = "crash"
	crashTurns  = 3
)

// crashRun is what the crashing process writes: complete turns, each
// flushed at its end, then a turn that reaches a tool call, flushed (so
// the open turn is on disk), and then one more event that is never
// flushed. emit appends; flush flushes.
func crashRun(emit func(session.Event) session.Event, flush func()) (call session.Event) {
	for turn := 1; turn <= crashTurns; turn++ {
		script(turn, turn%2 == 0, emit)
		flush()
	}
	emit(session.NewEvent(session.TurnStart{Turn: crashTurns + 1, Trigger: &session.Trigger{Kind: session.TriggerMessage, Source: &session.Source{Kind: session.SourceUser}}}))
	emit(session.NewEvent(session.UserMessage{Content: session.TextContent("long task"), Source: session.Source{Kind: session.SourceUser}}))
	call = scriptToolCall(crashTurns+1, 1, emit)
	flush()
	emit(session.NewEvent(session.UserMessage{Content: session.TextContent("never flushed"), Source: session.Source{Kind: session.SourcePlugin, Plugin: "x"}}))
	return call
}

// TestCrashHelper is the crashing process of TestCrashRecovery; it does
// nothing in a normal run.
func TestCrashHelper(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("helper process for TestCrashRecovery")
	}
	store := New(dir, Options{Now: newClock(1_700_000_000_000).now})
	s, err := store.Create(session.Header{ID: crashID, Cwd: "/crash"})
	if err != nil {
		t.Fatal(err)
	}
	crashRun(func(e session.Event) session.Event { return mustAppend(t, s, e) }, func() {
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	})
	crashtest.Ready()
	time.Sleep(time.Minute) // killed before this ends
	t.Fatal("not killed")
}

// A process killed in the middle of a turn leaves every completed turn
// intact, and Open closes the open turn as interrupted, failing its
// unanswered tool call.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	dir := t.TempDir()
	crashtest.KillWhenReady(t, "TestCrashHelper", crashDirEnv+"="+dir)

	// What the helper wrote, rebuilt in memory the same way.
	m := newMemLog(t, session.Header{ID: crashID, Cwd: "/crash"})
	var flushed int
	call := crashRun(m.emit, func() { flushed = len(m.st.events) })

	store := New(dir, Options{Now: newClock(1_800_000_000_000).now})
	s, err := store.Open(crashID)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	events := s.Events()
	if len(events) != flushed+3 {
		t.Fatalf("%d events after recovery, want %d flushed + 3 closing", len(events), flushed)
	}
	for i := range flushed {
		got, want := events[i], m.st.events[i]
		if got.Seq != want.Seq || got.Type != want.Type || string(got.Data) != string(want.Data) ||
			!slices.Equal(got.SourceEventSeqs, want.SourceEventSeqs) {
			t.Fatalf("event %d:\n%+v\nwant\n%+v", i, got, want)
		}
	}
	// Every completed turn ended completed; the open one interrupted.
	var ends []string
	for _, e := range events {
		if e.Type == session.TypeTurnEnd {
			te, _ := session.As[session.TurnEnd](e)
			ends = append(ends, te.Reason.Kind)
		}
	}
	want := append(slices.Repeat([]string{session.EndCompleted}, crashTurns), session.EndInterrupted)
	if !slices.Equal(ends, want) {
		t.Errorf("turn ends %v, want %v", ends, want)
	}
	rec := s.Recovery()
	if got := eventTypes(rec.Closed); !slices.Equal(got, []string{session.TypeToolResult, session.TypeStepEnd, session.TypeTurnEnd}) {
		t.Fatalf("closing events %v", got)
	}
	res, _ := session.As[session.ToolResult](rec.Closed[0])
	if res.CallID != callID(crashTurns+1, 1) || !res.IsError || rec.Closed[0].SourceEventSeqs[0] != call.Seq {
		t.Errorf("closing tool result %+v", res)
	}
	for _, msg := range s.Messages() {
		if strings.Contains(msg.Content[0].Text, "never flushed") {
			t.Error("an unflushed event survived the crash")
		}
	}
	// The repairs are on disk: reading the file again finds nothing to do.
	log, err := session.ReadFile(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if log.Recovery.Repaired() || len(log.Events) != len(events) {
		t.Errorf("file after Open: %d events, recovery %s", len(log.Events), log.Recovery)
	}
}
