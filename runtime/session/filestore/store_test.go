package filestore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

func TestCreateAppendFlushReopen(t *testing.T) {
	store, root := newTestStore(t)
	s, err := store.Create(session.Header{Cwd: "/home/u/project"})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Header()
	if h.ID == "" || h.CreatedAt != 1_700_000_000_001 || h.Version != 0 {
		t.Fatalf("header %+v", h)
	}
	sum := sha256.Sum256([]byte("/home/u/project"))
	wantPath := filepath.Join(root, "cwd-"+hex.EncodeToString(sum[:])[:12], h.ID+".jsonl")
	if s.Path() != wantPath {
		t.Fatalf("path %s, want %s", s.Path(), wantPath)
	}
	headerLine := fmt.Sprintf(`{"type":"session","version":0,"id":%q,"createdAt":1700000000001,"cwd":"/home/u/project"}`+"\n", h.ID)
	if data, _ := os.ReadFile(s.Path()); string(data) != headerLine {
		t.Fatalf("file after Create:\n%s", data)
	}

	emit := func(e session.Event) session.Event { return mustAppend(t, s, e) }
	script(1, true, emit)
	// Appends stay in memory until Flush.
	if data, _ := os.ReadFile(s.Path()); string(data) != headerLine {
		t.Fatalf("file before Flush:\n%s", data)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	events := s.Events()
	for i, e := range events {
		if e.Seq != int64(i) || e.Time != 1_700_000_000_002+int64(i) {
			t.Fatalf("event %d: seq %d time %d", i, e.Seq, e.Time)
		}
	}
	data, _ := os.ReadFile(s.Path())
	if got := strings.Count(string(data), "\n"); got != len(events)+1 {
		t.Fatalf("%d lines on disk after Flush, want %d", got, len(events)+1)
	}
	msgs := s.Messages()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Append(session.NewEvent(session.TurnStart{Turn: 2})); !errors.Is(err, session.ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}

	s, err = store.Open(h.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Recovery().Repaired() {
		t.Errorf("repairs: %s", s.Recovery())
	}
	if got := s.Header(); got.ID != h.ID || got.Cwd != h.Cwd || got.CreatedAt != h.CreatedAt {
		t.Errorf("reopened header %+v", got)
	}
	reopened := s.Events()
	if len(reopened) != len(events) {
		t.Fatalf("%d events after reopen, want %d", len(reopened), len(events))
	}
	for i := range events {
		a, _ := reopened[i].MarshalJSON()
		b, _ := events[i].MarshalJSON()
		if string(a) != string(b) {
			t.Fatalf("event %d after reopen:\n%s\nwant\n%s", i, a, b)
		}
	}
	if got := s.Messages(); !equalMessages(got, msgs) {
		t.Errorf("messages after reopen differ:\n%+v\n%+v", got, msgs)
	}
	roles := ""
	for _, m := range msgs {
		roles += m.Role + " "
	}
	if roles != "user assistant tool assistant " {
		t.Errorf("roles %q", roles)
	}
	// Seqs continue from the loaded log.
	if e := mustAppend(t, s, session.NewEvent(session.TurnStart{Turn: 2})); e.Seq != int64(len(events)) {
		t.Errorf("next seq %d, want %d", e.Seq, len(events))
	}
}

func equalMessages(a, b []model.Message) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func TestStoreErrors(t *testing.T) {
	store, root := newTestStore(t)
	s, err := store.Create(session.Header{ID: "abc"})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "_no-cwd", "abc.jsonl"); s.Path() != want {
		t.Errorf("path %s, want %s", s.Path(), want)
	}
	if _, err := store.Create(session.Header{ID: "abc"}); !errors.Is(err, session.ErrExists) {
		t.Errorf("Create of an open id: %v", err)
	}
	if _, err := store.Open("abc"); !errors.Is(err, session.ErrLocked) {
		t.Errorf("Open of an open session: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Create(session.Header{ID: "abc"}); !errors.Is(err, session.ErrExists) {
		t.Errorf("Create of an existing id: %v", err)
	}
	if _, err := store.Open("nope"); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("Open of a missing id: %v", err)
	}
	if _, err := New(filepath.Join(root, "missing"), Options{}).Open("abc"); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("Open under a missing root: %v", err)
	}
	for _, id := range []string{"../x", "a/b", `a\b`, "..", "."} {
		if _, err := store.Create(session.Header{ID: id}); !errors.Is(err, session.ErrInvalidID) {
			t.Errorf("Create(%q): %v", id, err)
		}
		if _, err := store.Open(id); !errors.Is(err, session.ErrInvalidID) {
			t.Errorf("Open(%q): %v", id, err)
		}
	}
	if _, err := store.Create(session.Header{Version: 1}); !errors.Is(err, session.ErrUnsupportedVersion) {
		t.Errorf("Create version 1: %v", err)
	}
	// A file under the wrong name is refused, not silently adopted.
	s2, err := store.Create(session.Header{ID: "real"})
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
	if err := os.Rename(s2.Path(), filepath.Join(filepath.Dir(s2.Path()), "alias.jsonl")); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Open("alias"); !errors.Is(err, session.ErrCorrupt) {
		t.Errorf("Open of a misnamed file: %v", err)
	}
}

func TestLockAcrossStores(t *testing.T) {
	store, root := newTestStore(t)
	s, err := store.Create(session.Header{ID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := New(root, Options{}).Open("x")
	if err == nil {
		other.Close()
		t.Skip("no file locking on this platform")
	}
	if !errors.Is(err, session.ErrLocked) {
		t.Fatalf("second writer: %v", err)
	}
}

func TestList(t *testing.T) {
	store, root := newTestStore(t)
	for _, h := range []session.Header{{ID: "b", Cwd: "/p", CreatedAt: 20}, {ID: "a", CreatedAt: 10}, {ID: "c", Cwd: "/q", CreatedAt: 20, ParentSession: "a"}} {
		s, err := store.Create(h)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	bad := filepath.Join(root, dirName("/p"), "bad.jsonl")
	if err := os.WriteFile(bad, []byte("not json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "notes.txt"), []byte("x"), 0o600)
	os.MkdirAll(filepath.Join(root, "other"), 0o700)
	os.WriteFile(filepath.Join(root, "other", "z.jsonl"), []byte("x"), 0o600)

	headers, err := store.List()
	if !errors.Is(err, session.ErrCorrupt) || !strings.Contains(err.Error(), "bad.jsonl") {
		t.Errorf("List error %v, want one naming bad.jsonl", err)
	}
	var ids []string
	for _, h := range headers {
		ids = append(ids, h.ID)
	}
	if !slices.Equal(ids, []string{"a", "b", "c"}) {
		t.Fatalf("ids %v", ids)
	}
	if headers[2].ParentSession != "a" || headers[1].Cwd != "/p" {
		t.Errorf("headers %+v", headers)
	}
	if hs, err := New(filepath.Join(root, "none"), Options{}).List(); err != nil || len(hs) != 0 {
		t.Errorf("List of a missing root: %v, %v", hs, err)
	}
}

func TestAppendRejectsInvalidEvents(t *testing.T) {
	store, _ := newTestStore(t)
	s, err := store.Create(session.Header{ID: "v"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	user := mustAppend(t, s, session.NewEvent(session.UserMessage{Content: session.TextContent("hi"), Source: session.Source{Kind: session.SourceUser}}))

	offSurface := session.NewEvent(session.UserMessage{Content: session.TextContent("x")})
	offSurface.SurfaceOp = &session.SurfaceOp{Op: session.SurfaceReplace, Range: &session.SurfaceRange{Start: 99, End: 99}}
	backwards := session.NewEvent(session.UserMessage{Content: session.TextContent("x")})
	backwards.SurfaceOp = &session.SurfaceOp{Op: session.SurfaceReplace, Range: &session.SurfaceRange{Start: user.Seq, End: user.Seq}}
	backwards.SourceEventSeqs = []int64{5}
	boundary := session.NewEvent(session.StepStart{Turn: 1, Step: 1})
	boundary.SurfaceOp = &session.SurfaceOp{Op: session.SurfaceAppend}

	for name, e := range map[string]session.Event{
		"no type":             {Data: []byte(`{}`)},
		"no data":             {Type: "x"},
		"invalid data":        {Type: "x", Data: []byte(`{"a":`)},
		"header type":         {Type: "session", Data: []byte(`{}`)},
		"wrong data shape":    {Type: session.TypeToolCall, Data: []byte(`{"callId":5}`)},
		"data not an object":  {Type: session.TypeTurnStart, Data: []byte(`null`)},
		"tool call no id":     session.NewEvent(session.ToolCall{Name: "bash"}),
		"tool result no id":   session.NewEvent(session.ToolResult{}),
		"turn end no kind":    session.NewEvent(session.TurnEnd{Turn: 1}),
		"unencodable meta":    session.NewEvent(session.ToolResult{CallID: "c", Meta: json.RawMessage(`{bad`)}),
		"unknown chunk":       session.NewEvent(session.AssistantChunk{Chunk: model.Chunk{Type: "sparkle"}}),
		"bad chunk data":      {Type: session.TypeAssistantChunk, Data: []byte(`{"chunk":{"type":"sparkle"}}`)},
		"bad compact data":    {Type: session.TypeCompactSummary, Data: []byte(`{"shadowedSeqs":"x"}`)},
		"replace off surface": offSurface,
		"future source":       backwards,
		"boundary on surface": boundary,
	} {
		if _, err := s.Append(e); !errors.Is(err, session.ErrInvalidEvent) {
			t.Errorf("%s: err = %v, want ErrInvalidEvent", name, err)
		}
	}
	// Nothing of the refused events was logged.
	if n := len(s.Events()); n != 1 {
		t.Errorf("%d events after refusals, want 1", n)
	}
	if e := mustAppend(t, s, session.NewEvent(session.TurnStart{Turn: 1})); e.Seq != 1 {
		t.Errorf("seq %d after refusals, want 1", e.Seq)
	}
	// Pretty-printed data is compacted onto one line.
	e := mustAppend(t, s, session.Event{Type: "todo/write", Data: []byte("{\n  \"todos\": []\n}")})
	if string(e.Data) != `{"todos":[]}` {
		t.Errorf("data %s", e.Data)
	}
}

func TestCompact(t *testing.T) {
	store, _ := newTestStore(t)
	s, err := store.Create(session.Header{ID: "c"})
	if err != nil {
		t.Fatal(err)
	}
	emit := func(e session.Event) session.Event { return mustAppend(t, s, e) }
	script(1, true, emit)
	script(2, false, emit)
	surface := s.Surface()
	if len(surface) != 6 { // user, assistant, tool, assistant; user, assistant
		t.Fatalf("surface %v", eventTypes(surface))
	}
	// Keep the last turn: replace the first four.
	start, end := surface[0].Seq, surface[3].Seq
	if _, err := s.Compact(session.Compaction{Turn: 3, Summary: "did things", Start: end, End: start}); !errors.Is(err, session.ErrInvalidEvent) {
		t.Fatalf("backwards range: %v", err)
	}
	n := len(s.Events())
	evs, err := s.Compact(session.Compaction{ID: "k1", Turn: 3, Summary: "did things", Start: start, End: end})
	if err != nil {
		t.Fatal(err)
	}
	if got := eventTypes(evs); !slices.Equal(got, []string{session.TypeCompactStart, session.TypeCompactSummary, session.TypeUserMessage, session.TypeCompactEnd}) {
		t.Fatalf("compaction events %v", got)
	}
	if evs[0].Seq != int64(n) {
		t.Errorf("compaction starts at seq %d, want %d", evs[0].Seq, n)
	}
	sum, err := session.As[session.CompactSummary](evs[1])
	if err != nil {
		t.Fatal(err)
	}
	wantShadowed := []int64{surface[0].Seq, surface[1].Seq, surface[2].Seq, surface[3].Seq}
	if sum.ID != "k1" || sum.Summary.Text() != "did things" || !slices.Equal(sum.ShadowedSeqs, wantShadowed) {
		t.Errorf("summary %+v", sum)
	}
	repl := evs[2]
	if repl.SurfaceOp == nil || repl.SurfaceOp.Op != session.SurfaceReplace || *repl.SurfaceOp.Range != (session.SurfaceRange{Start: start, End: end}) {
		t.Errorf("surface op %+v", repl.SurfaceOp)
	}
	if want := append([]int64{evs[0].Seq, evs[1].Seq}, wantShadowed...); !slices.Equal(repl.SourceEventSeqs, want) {
		t.Errorf("sources %v, want %v", repl.SourceEventSeqs, want)
	}
	if end, _ := session.As[session.CompactEnd](evs[3]); end.ID != "k1" || end.Turn != 3 {
		t.Errorf("compact end %+v", end)
	}

	check := func(msgs []model.Message) {
		t.Helper()
		if len(msgs) != 3 || msgs[0].Role != model.RoleUser ||
			msgs[0].Content[0].Text != "<compacted-summary>\ndid things\n</compacted-summary>" ||
			msgs[1].Content[0].Text != "prompt <c>" || msgs[2].Role != model.RoleAssistant {
			t.Fatalf("messages after compaction: %+v", msgs)
		}
	}
	check(s.Messages())
	if got := eventTypes(s.Surface()); !slices.Equal(got, []string{session.TypeUserMessage, session.TypeUserMessage, session.TypeAssistantMessage}) {
		t.Errorf("surface after compaction %v", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = store.Open("c")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s.Messages())
	msgs, err := session.Messages(s.Events())
	if err != nil {
		t.Fatal(err)
	}
	check(msgs)
}

func TestForkSeed(t *testing.T) {
	store, _ := newTestStore(t)
	parent, err := store.Create(session.Header{ID: "p", Cwd: "/srv/w"})
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	emit := func(e session.Event) session.Event { return mustAppend(t, parent, e) }
	script(1, false, emit)
	// The fork happens during turn 2, from a tool call.
	emit(session.NewEvent(session.TurnStart{Turn: 2}))
	emit(session.NewEvent(session.UserMessage{Content: session.TextContent("fork it"), Source: session.Source{Kind: session.SourceUser}}))
	scriptToolCall(2, 1, emit)

	all := parent.Events()
	if _, err := store.Create(session.Header{ID: "bad", ParentSession: "p", SeedLength: len(all)}, all...); !errors.Is(err, session.ErrInvalidEvent) {
		t.Fatalf("seed ending inside a turn: %v", err)
	}
	if _, err := store.Create(session.Header{ID: "bad", SeedLength: 3}, all[:2]...); !errors.Is(err, session.ErrInvalidEvent) {
		t.Fatalf("seedLength beyond the events: %v", err)
	}
	seed := session.ClosedPrefix(all)
	if n := len(seed); n == 0 || seed[n-1].Type != session.TypeTurnEnd {
		t.Fatalf("closed prefix ends with %v", eventTypes(seed[len(seed)-1:]))
	}
	child, err := store.Create(session.Header{ID: "child", Cwd: "/srv/w", ParentSession: "p", SeedLength: len(seed)}, seed...)
	if err != nil {
		t.Fatal(err)
	}
	cemit := func(e session.Event) session.Event { return mustAppend(t, child, e) }
	first := cemit(session.NewEvent(session.TurnStart{Turn: 2}))
	if first.Seq != int64(len(seed)) {
		t.Errorf("child's first own seq %d, want %d", first.Seq, len(seed))
	}
	cemit(session.NewEvent(session.UserMessage{Content: session.TextContent("child task"), Source: session.Source{Kind: session.SourceUser}}))
	if err := child.Close(); err != nil {
		t.Fatal(err)
	}
	log, err := session.ReadFile(child.Path())
	if err != nil {
		t.Fatal(err)
	}
	if log.Header.SeedLength != len(seed) || log.Header.ParentSession != "p" {
		t.Errorf("child header %+v", log.Header)
	}
	msgs, err := session.Messages(log.Events)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range msgs {
		texts = append(texts, m.Content[0].Text)
	}
	if want := []string{"prompt <b>", "DONE", "child task"}; !slices.Equal(texts, want) {
		t.Errorf("child conversation %q, want %q", texts, want)
	}
}

func TestConcurrentUse(t *testing.T) {
	store, _ := newTestStore(t)
	s, err := store.Create(session.Header{ID: "conc"})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				text := fmt.Sprintf("w%d-%d", w, i)
				if _, err := s.Append(session.NewEvent(session.UserMessage{Content: session.TextContent(text), Source: session.Source{Kind: session.SourceUser}})); err != nil {
					t.Error(err)
					return
				}
				if i%10 == 0 {
					if err := s.Flush(); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			msgs := s.Messages()
			evs := s.Events()
			if len(msgs) > len(evs)+writers {
				t.Errorf("%d messages for %d events", len(msgs), len(evs))
			}
			_ = s.Surface()
			_ = s.Header()
		}
	})
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	log, err := session.ReadFile(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if len(log.Events) != writers*each || log.Recovery.Repaired() {
		t.Fatalf("%d events, recovery %s", len(log.Events), log.Recovery)
	}
	seen := map[string]bool{}
	for i, e := range log.Events {
		if e.Seq != int64(i) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
		m, err := session.As[session.UserMessage](e)
		if err != nil {
			t.Fatal(err)
		}
		seen[m.Content.Text()] = true
	}
	if len(seen) != writers*each {
		t.Errorf("%d distinct messages, want %d", len(seen), writers*each)
	}
}

// A failed fsync leaves the file in an unknown state: the session stops
// writing and says so.
func TestFlushFailureBreaksSession(t *testing.T) {
	store, _ := newTestStore(t)
	s, err := store.Create(session.Header{ID: "f"})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, session.NewEvent(session.TurnStart{Turn: 1}))
	store.mu.Lock()
	store.open[s.Path()].f.Close() // the disk goes away under the session
	store.mu.Unlock()
	if err := s.Flush(); !errors.Is(err, session.ErrBroken) {
		t.Fatalf("Flush: %v", err)
	}
	if _, err := s.Append(session.NewEvent(session.TurnStart{Turn: 2})); !errors.Is(err, session.ErrBroken) {
		t.Fatalf("Append after a broken flush: %v", err)
	}
	if err := s.Close(); err == nil {
		t.Fatal("Close reported no loss")
	}
	// The store released the session: it can be reopened from the file.
	r, err := store.Open("f")
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
}
