package filestore

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

func TestTornLastLine(t *testing.T) {
	m, _ := crashedLog(t)
	good := m.String()
	for _, tail := range []string{
		`{"type":"assistant/chunk","seq":`,           // cut mid-line
		`{"type":"step/end","seq":9,"time":1` + "\n", // invalid even with a newline
		"\x00\x00\x00\x00",                           // zero-filled blocks
	} {
		t.Run(fmt.Sprintf("%q", tail), func(t *testing.T) {
			log, err := session.ReadFile(writeFile(t, good+tail))
			if err != nil {
				t.Fatal(err)
			}
			wantLine := strings.Count(good, "\n") + 1
			if log.Recovery.TornLine != wantLine || log.Recovery.TornBytes != int64(len(tail)) {
				t.Errorf("recovery %+v, want torn line %d of %d bytes", log.Recovery, wantLine, len(tail))
			}
			if len(log.Recovery.Closed) != 3 {
				t.Errorf("closing events %v", eventTypes(log.Recovery.Closed))
			}

			// Open cuts the line off the file and writes the repairs.
			store, root := newTestStore(t)
			path := filepath.Join(root, dirName(testHeader.Cwd), testHeader.ID+".jsonl")
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(good+tail), 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := store.Open(testHeader.ID)
			if err != nil {
				t.Fatal(err)
			}
			if s.Recovery().TornLine != wantLine {
				t.Errorf("Open recovery %+v", s.Recovery())
			}
			mustAppend(t, s, session.NewEvent(session.TurnStart{Turn: 4}))
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(data), good) || strings.HasPrefix(string(data[len(good):]), tail) {
				t.Fatalf("file after repair:\n%s", data)
			}
			log, err = session.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if log.Recovery.TornLine != 0 {
				t.Errorf("torn line left on disk: %+v", log.Recovery)
			}
			rest := eventTypes(log.Events[len(m.st.events):])
			want := []string{session.TypeToolResult, session.TypeStepEnd, session.TypeTurnEnd, session.TypeTurnStart, session.TypeTurnEnd}
			if !slices.Equal(rest, want) {
				t.Errorf("events after the crash point %v, want %v", rest, want)
			}
		})
	}
}

func TestMissingFinalNewline(t *testing.T) {
	m := newMemLog(t, testHeader)
	script(1, false, m.emit)
	text := strings.TrimSuffix(m.String(), "\n")
	log, err := session.ReadFile(writeFile(t, text))
	if err != nil {
		t.Fatal(err)
	}
	if !log.Recovery.AddedNewline || log.Recovery.TornLine != 0 || len(log.Events) != len(m.st.events) {
		t.Fatalf("recovery %+v, %d events", log.Recovery, len(log.Events))
	}

	store, root := newTestStore(t)
	path := filepath.Join(root, dirName(testHeader.Cwd), testHeader.ID+".jsonl")
	os.MkdirAll(filepath.Dir(path), 0o700)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(testHeader.ID)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, session.NewEvent(session.TurnStart{Turn: 2}))
	mustAppend(t, s, session.NewEvent(session.TurnEnd{Turn: 2, Reason: session.EndReason{Kind: session.EndCompleted}}))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	log, err = session.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if log.Recovery.Repaired() || len(log.Events) != len(m.st.events)+2 {
		t.Fatalf("after reopen: recovery %+v, %d events", log.Recovery, len(log.Events))
	}
}

// Unknown event types, unknown keys (of events and the header) and a
// header with placeholders, an empty cwd and a zero seedLength survive
// reading and writing unchanged.
func TestUnknownContentPreserved(t *testing.T) {
	content := `{"type":"session","version":0,"id":"{{sessionId}}","createdAt":0,"cwd":"","seedLength":0,"delegationDepth":1}` + "\n" +
		`{"type":"todo/write","seq":0,"time":3,"data":{"todos":[{"content":"a <b>","status":"pending"}]},"ignorable":true}` + "\n" +
		`{"seq":1,"type":"user/message","time":4,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"id":"m1"},"surfaceOp":"append","x":[1, 2]}` + "\n" +
		`{"type":"compact/summary","seq":2,"time":5,"data":{"shadowedSeqs":[]}}` + "\n"
	path := writeFile(t, content)
	log, err := session.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	b, _ := log.Header.MarshalJSON()
	out.Write(append(b, '\n'))
	for _, e := range log.Events {
		b, err := e.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		out.Write(append(b, '\n'))
	}
	if out.String() != content {
		t.Fatalf("re-encoded\n%s\nwant\n%s", out.String(), content)
	}
	if log.Header.Cwd != "" || log.Header.ID != "{{sessionId}}" {
		t.Errorf("header %+v", log.Header)
	}
	if msgs, _ := session.Messages(log.Events); len(msgs) != 1 || msgs[0].Content[0].Text != "hi" {
		t.Errorf("messages %+v", msgs)
	}

	// Through a store too: the file lands in _no-cwd, unchanged.
	store, root := newTestStore(t)
	h := log.Header
	h.CreatedAt = 7 // Create would stamp a zero CreatedAt
	s, err := store.Create(h, log.Events...)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, log.Events[0]) // re-append a todo/write: new seq and time, same data and keys
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "_no-cwd", "{{sessionId}}.jsonl"); s.Path() != want {
		t.Errorf("path %s, want %s", s.Path(), want)
	}
	data, _ := os.ReadFile(s.Path())
	wantLast := `{"type":"todo/write","seq":3,"time":1700000000001,"data":{"todos":[{"content":"a <b>","status":"pending"}]},"ignorable":true}` + "\n"
	want := strings.Replace(content, `"createdAt":0`, `"createdAt":7`, 1) + wantLast
	if string(data) != want {
		t.Fatalf("store wrote\n%s\nwant\n%s", data, want)
	}
}
