package pgstore

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/pgtest"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/session/filestore"
	"github.com/dsh-wasm/dsh-wasm/runtime/session/storetest"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func open(t *testing.T, dsn string, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The PostgreSQL store meets the storage contract.
func TestStorageContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) session.Storage {
		return open(t, pgtest.DB(t), Options{Now: now})
	})
}

// The same session written to both stores exports the same bytes.
func TestExportMatchesJSONL(t *testing.T) {
	pg := open(t, pgtest.DB(t), Options{Now: storetest.NewClock(1_700_000_000_000).Now})
	fs := filestore.New(t.TempDir(), filestore.Options{Now: storetest.NewClock(1_700_000_000_000).Now})
	for _, st := range []session.Storage{pg, fs} {
		s, err := st.Create(session.Header{ID: "same", Cwd: "/w/ü \"q\""})
		if err != nil {
			t.Fatal(err)
		}
		emit := storetest.Emit(t, s)
		storetest.Turn(1, true, emit)
		s.Flush()
		storetest.Turn(2, false, emit)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	var a, b bytes.Buffer
	if err := pg.Export("same", &a); err != nil {
		t.Fatal(err)
	}
	if err := fs.Export("same", &b); err != nil {
		t.Fatal(err)
	}
	if a.Len() == 0 || !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatalf("PostgreSQL export:\n%s\nJSONL file:\n%s", a.Bytes(), b.Bytes())
	}
}

// A worker that dies keeps its lease until the TTL passes; then another
// worker opens the session and closes the dead worker's turn.
func TestDeadWorkerLeaseExpires(t *testing.T) {
	dsn := pgtest.DB(t)
	a := open(t, dsn, Options{LeaseTTL: 1500 * time.Millisecond})
	b := open(t, dsn, Options{LeaseTTL: 1500 * time.Millisecond})
	s, err := a.Create(session.Header{ID: "w"})
	if err != nil {
		t.Fatal(err)
	}
	emit := storetest.Emit(t, s)
	storetest.Turn(1, false, emit)
	emit(session.NewEvent(session.TurnStart{Turn: 2, Trigger: &session.Trigger{Kind: session.TriggerMessage, Source: &session.Source{Kind: session.SourceUser}}}))
	emit(session.NewEvent(session.UserMessage{Content: session.TextContent("go"), Source: session.Source{Kind: session.SourceUser}}))
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	// While a's heartbeat runs, its lease holds past the TTL.
	time.Sleep(2500 * time.Millisecond)
	if _, err := b.Open("w"); !errors.Is(err, session.ErrLocked) {
		t.Fatalf("Open while a live worker holds the lease: %v, want ErrLocked", err)
	}
	// a dies: its heartbeat stops and nothing is released.
	close(a.stop)
	<-a.done
	deadline := time.Now().Add(20 * time.Second)
	var s2 *session.Session
	for {
		s2, err = b.Open("w")
		if err == nil {
			break
		}
		if !errors.Is(err, session.ErrLocked) || time.Now().After(deadline) {
			t.Fatalf("Open after the dead worker's lease expired: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer s2.Close()
	evs := s2.Events()
	end, err := session.As[session.TurnEnd](evs[len(evs)-1])
	if err != nil || end.Turn != 2 || end.Reason.Kind != session.EndInterrupted {
		t.Fatalf("last event %s, want turn 2 closed interrupted", evs[len(evs)-1].Type)
	}
	// The dead worker, if it were only paused, can no longer write.
	storetest.Emit(t, s)(session.NewEvent(session.StepStart{Turn: 2, Step: 1}))
	if err := s.Flush(); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("flush after losing the lease: %v, want ErrLeaseLost", err)
	}
	a.once.Do(func() { a.pool.Close() })
}

// A cancel sent by one worker reaches a listener of another.
func TestCancelNotify(t *testing.T) {
	dsn := pgtest.DB(t)
	a := open(t, dsn, Options{})
	b := open(t, dsn, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan [2]string, 1)
	ready := make(chan struct{})
	go a.Listen(ctx, ready, func(id, reason string) { got <- [2]string{id, reason} })
	<-ready
	if err := b.SendCancel(ctx, "sess-1", "stop now"); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-got:
		if g != [2]string{"sess-1", "stop now"} {
			t.Fatalf("got %v", g)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancel did not arrive")
	}
}

// Workers starting together on an empty database apply each migration
// once, and all of them start.
func TestMigrationsOnceUnderConcurrentStarts(t *testing.T) {
	dsn := pgtest.DB(t)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			s, err := Open(context.Background(), dsn, Options{})
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, dsn, Options{})
	var applied int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM dsh_migrations`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	names, _ := migrations.ReadDir("migrations")
	if applied != len(names) {
		t.Fatalf("%d migrations recorded, want %d", applied, len(names))
	}
	// The events column keeps text as given: json, not jsonb.
	var typ string
	if err := s.pool.QueryRow(context.Background(), `SELECT data_type FROM information_schema.columns WHERE table_name = 'dsh_events' AND column_name = 'event'`).Scan(&typ); err != nil || typ != "json" {
		t.Fatalf("dsh_events.event is %q (%v), want json", typ, err)
	}
}

// The database itself holds one row per (session, seq): a row written
// directly with a seq the session already has is refused (a unique
// violation), whoever writes it, and the session's export is unchanged.
func TestOneRowPerSessionAndSeq(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgtest.DB(t), Options{Now: storetest.NewClock(1_700_000_000_000).Now})
	sess, err := s.Create(session.Header{ID: "one", Cwd: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	storetest.Turn(1, true, storetest.Emit(t, sess))
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}
	var before bytes.Buffer
	if err := s.Export("one", &before); err != nil {
		t.Fatal(err)
	}
	var seq int64
	var event string
	if err := s.pool.QueryRow(ctx, `SELECT seq, event::text FROM dsh_events WHERE session_id = 'one' ORDER BY seq DESC LIMIT 1`).Scan(&seq, &event); err != nil {
		t.Fatal(err)
	}
	for _, dup := range []int64{0, seq} {
		_, err := s.pool.Exec(ctx, `INSERT INTO dsh_events (session_id, seq, event) VALUES ('one', $1, $2::json)`, dup, event)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
			t.Fatalf("a second row for (one, %d): %v; want a unique violation (23505)", dup, err)
		}
	}
	var rows, seqs int
	if err := s.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT seq) FROM dsh_events WHERE session_id = 'one'`).Scan(&rows, &seqs); err != nil {
		t.Fatal(err)
	}
	if rows != seqs || int64(rows) != seq+1 {
		t.Fatalf("%d rows for %d seqs (last %d)", rows, seqs, seq)
	}
	var after bytes.Buffer
	if err := s.Export("one", &after); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before.Bytes(), after.Bytes()) {
		t.Fatalf("the export changed:\n%s\nnow\n%s", before.Bytes(), after.Bytes())
	}
}
