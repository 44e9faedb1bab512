package lazy

import (
	"errors"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
)

// mem is guest memory for the recorder and the replayer.
type mem []byte

func (m mem) Read(off, n uint32) ([]byte, bool) {
	if uint64(off)+uint64(n) > uint64(len(m)) {
		return nil, false
	}
	return m[off : off+n], true
}

// TestRecorderKeepsOnlyWhatReplays: a call of a function a record may
// not hold, a bad pointer, or a request outside memory ends the record
// with the reason; what it kept is a copy of the request and answer.
func TestRecorderKeepsOnlyWhatReplays(t *testing.T) {
	m := mem(`{"level":"info","message":"x"}`)
	r := &Recorder{}
	r.Note(m, hostfns.FnLog, 0, uint32(len(m)), hostfns.StatusOK, nil)
	m[2] = 'X'
	if len(r.Calls) != 1 || r.Why != "" || string(r.Calls[0].Req) != `{"level":"info","message":"x"}` {
		t.Fatalf("a replayable call: %+v, why %q", r.Calls, r.Why)
	}
	for _, c := range []struct {
		fn     string
		off, n uint32
		st     hostfns.Status
		whyHas string
	}{
		{hostfns.FnStateSet, 0, 2, hostfns.StatusOK, "it called state_set"},
		{hostfns.FnLog, 0, 2, hostfns.ErrBadPointer, "bad pointer"},
		{hostfns.FnLog, 0, 1 << 20, hostfns.StatusOK, "outside guest memory"},
	} {
		r := &Recorder{}
		r.Note(m, c.fn, c.off, c.n, c.st, nil)
		r.Note(m, hostfns.FnLog, 0, 2, hostfns.StatusOK, nil)
		if !strings.Contains(r.Why, c.whyHas) || len(r.Calls) != 0 {
			t.Errorf("%s %v: why %q, %d calls; want %q and none", c.fn, c.st, r.Why, len(r.Calls), c.whyHas)
		}
	}
}

// TestReplayerAnswersOnlyTheRecord: a re-run is answered from the record
// while it asks the same; another request, a call past the record or
// fewer calls than recorded make Done report ErrDiverged; a live
// replayer serves the calls past the record.
func TestReplayerAnswersOnlyTheRecord(t *testing.T) {
	m := mem(`abcdef`)
	calls := []Call{{Fn: hostfns.FnLog, Req: []byte("abc"), Status: hostfns.StatusOK, Resp: []byte("r1")}}
	r := NewReplayer(calls, false)
	if st, resp, ok := r.Answer(m, hostfns.FnLog, 0, 3); !ok || st != hostfns.StatusOK || string(resp) != "r1" {
		t.Fatalf("the recorded call: %v %q %v", st, resp, ok)
	}
	if err := r.Done(hostfns.OutOK, nil, nil, hostfns.OutOK, nil); err != nil {
		t.Fatalf("a whole re-run: %v", err)
	}
	r = NewReplayer(calls, false)
	if st, _, ok := r.Answer(m, hostfns.FnLog, 1, 3); !ok || st != hostfns.ErrCanceled {
		t.Errorf("another request: %v %v; want it refused", st, ok)
	}
	if err := r.Done(hostfns.OutOK, nil, nil, hostfns.OutOK, nil); !errors.Is(err, ErrDiverged) {
		t.Errorf("after another request: %v", err)
	}
	r = NewReplayer(calls, false)
	if err := r.Done(hostfns.OutOK, nil, nil, hostfns.OutOK, nil); !errors.Is(err, ErrDiverged) {
		t.Errorf("no call made: %v", err)
	}
	r = NewReplayer(calls, false)
	r.Answer(m, hostfns.FnLog, 0, 3)
	if err := r.Done(hostfns.OutError, nil, nil, hostfns.OutOK, nil); !errors.Is(err, ErrDiverged) {
		t.Errorf("another outcome: %v", err)
	}
	r = NewReplayer(calls, true)
	r.Answer(m, hostfns.FnLog, 0, 3)
	if _, _, ok := r.Answer(m, hostfns.FnStateSet, 0, 3); ok {
		t.Errorf("a live replayer answered a call past the record")
	}
}

// TestExtendedStopsAtTheBounds: a manifest grows by a history's events
// until MaxEvents.
func TestExtendedStopsAtTheBounds(t *testing.T) {
	m := Manifest{Version: Version, Key: "k"}
	h := &History{}
	for i := 0; i < MaxEvents; i++ {
		h = h.With(Event{Event: "e"}, 10)
	}
	next := m.Extended(h)
	if next == nil || len(next.Events) != MaxEvents || len(m.Events) != 0 || next.Bytes != next.Size() {
		t.Fatalf("within the bounds: %+v", next)
	}
	if m.Extended(h.With(Event{Event: "e"}, 10)) != nil {
		t.Errorf("past MaxEvents, the manifest still grew")
	}
}
