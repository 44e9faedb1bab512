package session

import (
	"errors"
	"testing"
	"time"
)

// memBackend keeps records in memory; fail, while set, is what Append
// returns instead of storing.
type memBackend struct {
	recs   []Record
	fail   error
	closed bool
}

func (b *memBackend) Append(recs []Record) error {
	if b.fail != nil {
		return b.fail
	}
	b.recs = append(b.recs, recs...)
	return nil
}

func (b *memBackend) Close() error { b.closed = true; return nil }

func restoreMem(t *testing.T, b *memBackend) *Session {
	t.Helper()
	p, err := Prepare(Header{ID: "m"}, func() time.Time { return time.UnixMilli(1) })
	if err != nil {
		t.Fatal(err)
	}
	s, err := Restore("mem:m", p.Header, p.Records, b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A backend that stored nothing (ErrNotStored) keeps the session whole:
// the records stay queued and the next Flush stores them, in order.
func TestBackendNotStoredRetries(t *testing.T) {
	b := &memBackend{}
	s := restoreMem(t, b)
	mustAppend(t, s, NewEvent(TurnStart{Turn: 1}))
	b.fail = errors.Join(ErrNotStored, errors.New("disk full"))
	if err := s.Flush(); !errors.Is(err, ErrNotStored) || errors.Is(err, ErrBroken) {
		t.Fatalf("Flush: %v", err)
	}
	mustAppend(t, s, NewEvent(TurnEnd{Turn: 1, Reason: EndReason{Kind: EndCompleted}}))
	b.fail = nil
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(b.recs) != 2 || b.recs[0].Seq != 0 || b.recs[1].Seq != 1 {
		t.Fatalf("stored %+v", b.recs)
	}
	if err := s.Close(); err != nil || !b.closed {
		t.Fatalf("Close: %v, backend closed %v", err, b.closed)
	}
}

// Any other backend error breaks the session.
func TestBackendErrorBreaks(t *testing.T) {
	b := &memBackend{}
	s := restoreMem(t, b)
	mustAppend(t, s, NewEvent(TurnStart{Turn: 1}))
	b.fail = errors.New("connection lost")
	if err := s.Flush(); !errors.Is(err, ErrBroken) {
		t.Fatalf("Flush: %v", err)
	}
	if _, err := s.Append(NewEvent(TurnStart{Turn: 2})); !errors.Is(err, ErrBroken) {
		t.Fatalf("Append after a broken flush: %v", err)
	}
}

// OnStored hears of events once, in order, when the backend holds them:
// not when appended, not when a flush failed, and all of them when the
// retried flush stores them.
func TestOnStoredSeesOnlyStoredEvents(t *testing.T) {
	b := &memBackend{}
	s := restoreMem(t, b)
	var heard []int64
	s.OnStored(func(evs []Event) {
		for _, e := range evs {
			if e.Seq >= int64(len(b.recs)) {
				t.Errorf("OnStored heard of seq %d, but the backend holds %d records", e.Seq, len(b.recs))
			}
			heard = append(heard, e.Seq)
		}
	})
	mustAppend(t, s, NewEvent(TurnStart{Turn: 1}))
	if len(heard) != 0 {
		t.Fatalf("OnStored heard of an event only appended: %v", heard)
	}
	b.fail = ErrNotStored
	if err := s.Flush(); !errors.Is(err, ErrNotStored) {
		t.Fatalf("Flush: %v", err)
	}
	if len(heard) != 0 {
		t.Fatalf("OnStored heard of events a failed flush did not store: %v", heard)
	}
	mustAppend(t, s, NewEvent(TurnEnd{Turn: 1, Reason: EndReason{Kind: EndCompleted}}))
	b.fail = nil
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(heard) != 2 || heard[0] != 0 || heard[1] != 1 {
		t.Fatalf("OnStored heard %v, want [0 1]", heard)
	}
}
