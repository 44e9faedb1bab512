package session

import (
	"testing"
)

// Turn ends are written in the reference harness's shapes
// (core/session/src/types.ts TurnEndReasonMap): each kind with its own
// fields, in the reference's key order, and none it does not write.
func TestEndReasonShapes(t *testing.T) {
	for _, tc := range []struct {
		r    EndReason
		want string
	}{
		{EndReason{Kind: EndCompleted, Reason: "x", Message: "y", Step: 3}, `{"kind":"completed"}`},
		{EndReason{Kind: EndAborted, Reason: "session/cancel", Message: "y"}, `{"kind":"aborted","reason":"session/cancel"}`},
		{EndReason{Kind: EndAborted}, `{"kind":"aborted"}`},
		{EndReason{Kind: EndError, Step: 2, Message: "boom", Code: "AUTH", Reason: "x"}, `{"kind":"error","step":2,"message":"boom","code":"AUTH"}`},
		{EndReason{Kind: EndError, Step: 0, Message: "render <failed>"}, `{"kind":"error","step":0,"message":"render <failed>"}`},
		{EndReason{Kind: EndDisposed, Message: "y"}, `{"kind":"disposed"}`},
		{EndReason{Kind: EndMaxTokens, Message: "y"}, `{"kind":"max-tokens"}`},
		{EndReason{Kind: EndRejected, Reason: "blocked by policy hook"}, `{"kind":"rejected","reason":"blocked by policy hook"}`},
		{EndReason{Kind: EndInterrupted}, `{"kind":"interrupted"}`},
		{EndReason{Kind: "refusal", Reason: "r", Code: "C"}, `{"kind":"refusal","reason":"r","code":"C"}`},
	} {
		b, err := tc.r.MarshalJSON()
		if err != nil || string(b) != tc.want {
			t.Errorf("%+v encodes as %s (%v), want %s", tc.r, b, err, tc.want)
		}
	}
}

// A compaction that failed records compact/start and compact/end with the
// error, and leaves the surface as it was (compact/compact-basic
// compactRegion's catch).
func TestCompactRecordsFailure(t *testing.T) {
	store, _ := newTestStore(t)
	s, err := store.Create(Header{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var evs []Event
	if _, err := s.Append(NewEvent(UserMessage{Content: TextContent("a"), Source: Source{Kind: SourceUser}})); err != nil {
		t.Fatal(err)
	}
	before := s.Messages()
	evs, err = s.Compact(Compaction{ID: "c1", Turn: 1, Start: 0, End: 0, Error: "summary refused"})
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
	evs, err = s.Compact(Compaction{ID: "c2", Turn: 1, Start: 0, End: 0, Summary: "S", ShadowedTokens: 7})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(evs[1].Data); got != `{"compactionId":"c2","summary":[{"type":"text","text":"S"}],"shadowedRange":{"start":0,"end":0},"shadowedSeqs":[0],"shadowedTokenCount":7}` {
		t.Fatalf("compact/summary = %s", got)
	}
}
