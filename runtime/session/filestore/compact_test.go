package filestore

import (
	"testing"

	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// A compaction that failed records compact/start and compact/end with the
// error, and leaves the surface as it was (compact/compact-basic
// compactRegion's catch).
func TestCompactRecordsFailure(t *testing.T) {
	store, _ := newTestStore(t)
	s, err := store.Create(session.Header{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var evs []session.Event
	if _, err := s.Append(session.NewEvent(session.UserMessage{Content: session.TextContent("a"), Source: session.Source{Kind: session.SourceUser}})); err != nil {
		t.Fatal(err)
	}
	before := s.Messages()
	evs, err = s.Compact(session.Compaction{ID: "c1", Turn: 1, Start: 0, End: 0, Error: "summary refused"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || string(evs[0].Data) != `{"compactionId":"c1","turn":1}` ||
		string(evs[1].Data) != `{"compactionId":"c1","turn":1,"error":"summary refused"}` {
		t.Fatalf("records = %v", evs)
	}
	if after := s.Messages(); len(after) != len(before) || after[0].Content[0].Text != "a" {
		t.Fatalf("the surface changed: %+v", after)
	}
	evs, err = s.Compact(session.Compaction{ID: "c2", Turn: 1, Start: 0, End: 0, Summary: "S", ShadowedTokens: 7})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(evs[1].Data); got != `{"compactionId":"c2","summary":[{"type":"text","text":"S"}],"shadowedRange":{"start":0,"end":0},"shadowedSeqs":[0],"shadowedTokenCount":7}` {
		t.Fatalf("compact/summary = %s", got)
	}
}
