package pgstore

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/pgtest"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/session/storetest"
)

// A flush while the database restarts is tried again until it is back,
// within the retry bound: the session stays usable, nothing is lost and
// nothing is stored twice.
func TestAppendRetriedAcrossARestart(t *testing.T) {
	pg := pgtest.Own(t)
	st := open(t, pg.DSN, Options{LeaseTTL: 5 * time.Second, RetryFor: 30 * time.Second})
	s, err := st.Create(session.Header{Cwd: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	emit := storetest.Emit(t, s)
	storetest.Turn(1, true, emit)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	storetest.Turn(2, true, emit)
	pg.Stop(t)
	back := make(chan struct{})
	go func() {
		defer close(back)
		time.Sleep(time.Second)
		pg.Resume(t)
	}()
	if err := s.Flush(); err != nil {
		t.Fatalf("flush across a restart: %v", err)
	}
	<-back
	want := s.Events()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := st.Export(s.Header().ID, &got); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(got.Bytes(), []byte("\n")) - 1; n != len(want) {
		t.Fatalf("stored %d events, want %d:\n%s", n, len(want), got.Bytes())
	}
}

// An append offered again after its commit's answer was lost stores
// nothing twice, and an offer that differs from what is stored at its
// seqs is refused.
func TestAppendOfferedAgainIsStoredOnce(t *testing.T) {
	st := open(t, pgtest.DB(t), Options{})
	s, err := st.Create(session.Header{Cwd: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.Turn(1, true, storetest.Emit(t, s))
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	id := s.Header().ID
	ctx, cancel := st.ctx()
	defer cancel()
	recs, err := st.records(ctx, id)
	if err != nil || len(recs) < 3 {
		t.Fatalf("records: %d, %v", len(recs), err)
	}
	b := &backend{s: st, id: id}
	if err := b.appendOnce(ctx, recs[1:]); err != nil {
		t.Fatalf("the same records offered again: %v", err)
	}
	again, err := st.records(ctx, id)
	if err != nil || len(again) != len(recs) {
		t.Fatalf("after the second offer: %d records (want %d), %v", len(again), len(recs), err)
	}
	other := append([]session.Record(nil), recs[1:]...)
	other[0].JSON = append(bytes.TrimSuffix(other[0].JSON, []byte("}")), []byte(`,"x":1}`)...)
	if err := b.appendOnce(ctx, other); !errors.Is(err, errConflict) {
		t.Fatalf("different records at stored seqs: %v, want errConflict", err)
	}
}

// A session closed while the database restarts gives its lease back once
// the database answers again, within the retry bound: another worker
// opens it at once, not a lease TTL later.
func TestReleaseRetriedAcrossARestart(t *testing.T) {
	pg := pgtest.Own(t)
	opts := Options{LeaseTTL: time.Minute, RetryFor: 30 * time.Second}
	st := open(t, pg.DSN, opts)
	other := open(t, pg.DSN, opts)
	s, err := st.Create(session.Header{Cwd: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	id := s.Header().ID
	pg.Stop(t)
	back := make(chan struct{})
	go func() {
		defer close(back)
		time.Sleep(time.Second)
		pg.Resume(t)
	}()
	s.Close()
	<-back
	s2, err := other.Open(id)
	if err != nil {
		t.Fatalf("open on another store after the close: %v (the lease was not given back)", err)
	}
	s2.Close()
}
