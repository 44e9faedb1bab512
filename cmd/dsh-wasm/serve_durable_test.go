package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/pgtest"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// assertStreamedStored checks that every event a prompt's stream carried
// (the session header and an error event aside) is in the session's
// JSONL at its seq, with the same type and data.
func assertStreamedStored(t *testing.T, streamed []map[string]any, jsonl []byte) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(jsonl), "\n"), "\n")[1:]
	n := 0
	for _, e := range streamed {
		seq, ok := e["seq"].(float64)
		if !ok || e["type"] == "session" {
			continue
		}
		n++
		if int(seq) >= len(lines) {
			t.Errorf("streamed %v at seq %d, which storage does not hold (%d events)", e["type"], int(seq), len(lines))
			continue
		}
		var stored map[string]any
		if err := json.Unmarshal([]byte(lines[int(seq)]), &stored); err != nil {
			t.Fatal(err)
		}
		if stored["type"] != e["type"] || !reflect.DeepEqual(stored["data"], e["data"]) {
			t.Errorf("seq %d: streamed %v %v, stored %v %v", int(seq), e["type"], e["data"], stored["type"], stored["data"])
		}
	}
	if n == 0 {
		t.Fatal("the stream carried no event to check")
	}
}

// finishWithin reads a stream to its end, failing the test after d.
func finishWithin(t *testing.T, ts *turnStream, d time.Duration) []map[string]any {
	t.Helper()
	var evs []map[string]any
	timeout := time.After(d)
	for {
		select {
		case e, ok := <-ts.events:
			if !ok {
				return evs
			}
			evs = append(evs, e)
		case <-timeout:
			t.Fatalf("the stream did not end within %s; last events: %v", d, evs[max(0, len(evs)-2):])
		}
	}
}

// promptUntil prompts w until a turn is taken (200), failing the test if
// none is by deadline; it returns the turn's events.
func promptUntil(t *testing.T, w *worker, id, text string, deadline time.Time) []map[string]any {
	t.Helper()
	for {
		ts := promptTurn(t, context.Background(), w, tokenAlpha, id, text)
		late := time.Now().After(deadline)
		if ts.code == http.StatusOK && !late {
			return finishWithin(t, ts, time.Minute)
		}
		if late {
			t.Fatalf("prompt %q: %d %s at the deadline", text, ts.code, ts.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// PostgreSQL is stopped mid-turn for longer than the worker retries its
// writes: the turn's stream ends with an error event; once the database
// is back, the session takes the next prompt within one lease TTL on
// either worker (the failed turn's lease is not renewed by the
// heartbeat), and every event streamed is stored.
func TestServeDatabaseBlip(t *testing.T) {
	pg := pgtest.Own(t)
	model := &scriptedModel{hung: make(chan string, 4)}
	ms := httptest.NewServer(model)
	defer ms.Close()
	const ttl = 3 * time.Second
	cfgPath, env := serveSetupStore(t, ms.URL, pg.DSN+"&pool_max_conns=8", ttl, "")
	a := startWorker(t, cfgPath, env)
	b := startWorker(t, cfgPath, env)
	id := createSession(t, a, tokenAlpha, "blip").ID

	ts := promptTurn(t, context.Background(), a, tokenAlpha, id, "slow blip")
	if ts.code != http.StatusOK {
		t.Fatalf("prompt: %d %s", ts.code, ts.body)
	}
	select {
	case <-model.hung:
	case <-time.After(time.Minute):
		t.Fatal("the turn never reached the model")
	}
	time.Sleep(300 * time.Millisecond) // a few chunks stored and streamed
	pg.Stop(t)
	stopped := time.Now()
	// The worker gives up the turn after one retry bound (the TTL).
	evs := finishWithin(t, ts, time.Minute)
	t.Logf("the stream ended %s after the database stopped", time.Since(stopped).Round(time.Millisecond))
	if len(evs) == 0 || evs[len(evs)-1]["error"] == nil {
		t.Fatalf("the stream of a turn that could not be saved ends with %v, not an error event", evs[max(0, len(evs)-1):])
	}
	// The database stays away until the worker has also given up its
	// flush at close and the lease release (a retry bound each).
	time.Sleep(time.Until(stopped.Add(4 * ttl)))
	pg.Resume(t)
	resumed := time.Now()
	// Let A's heartbeat run once against the live database: it must not
	// renew the failed session's lease.
	time.Sleep(ttl/3 + 500*time.Millisecond)
	next := promptUntil(t, b, id, "quick after", resumed.Add(ttl))
	t.Logf("B took the session %s after the database was back", time.Since(resumed).Round(time.Millisecond))
	if k := endKind(t, next); k != session.EndCompleted {
		t.Fatalf("the turn after the blip, on B, ended %s", k)
	}
	if k := endKind(t, promptUntil(t, a, id, "quick on A", time.Now().Add(ttl))); k != session.EndCompleted {
		t.Fatalf("the turn after the blip, on A, ended %s", k)
	}

	jsonl := exported(t, cfgPath, env, id)
	tl := readTurns(t, jsonl)
	if want := []string{session.EndInterrupted, session.EndCompleted, session.EndCompleted}; !slices.Equal(tl.ends, want) {
		t.Fatalf("turn ends %v, want %v\n%s", tl.ends, want, jsonl)
	}
	assertStreamedStored(t, evs, jsonl)
}

// Two workers on one PostgreSQL with max_tenant_turns 1: a second turn
// of the tenant is refused on either worker while the first runs (429
// with Retry-After), another tenant is not counted with it, and once the
// worker holding the slot is killed, a new turn is admitted within one
// lease TTL. (A busy session's 409 with Retry-After across workers is
// TestServeTwoWorkers'.)
func TestServeTenantLimitAcrossWorkers(t *testing.T) {
	model := &scriptedModel{hung: make(chan string, 4)}
	ms := httptest.NewServer(model)
	defer ms.Close()
	const ttl = 3 * time.Second
	cfgPath, env := serveSetupStore(t, ms.URL, pgtest.DB(t)+"&pool_max_conns=8", ttl, "  max_tenant_turns: 1\n")
	a := startWorker(t, cfgPath, env)
	b := startWorker(t, cfgPath, env)
	s1 := createSession(t, a, tokenAlpha, "one").ID
	s2 := createSession(t, a, tokenAlpha, "two").ID
	s3 := createSession(t, b, tokenBeta, "three").ID

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slow := promptTurn(t, ctx, a, tokenAlpha, s1, "slow one")
	if slow.code != http.StatusOK {
		t.Fatalf("the first turn: %d %s", slow.code, slow.body)
	}
	select {
	case <-model.hung:
	case <-time.After(time.Minute):
		t.Fatal("the first turn never reached the model")
	}
	for _, w := range []*worker{a, b} {
		if ts := promptTurn(t, ctx, w, tokenAlpha, s2, "quick two"); ts.code != http.StatusTooManyRequests {
			t.Fatalf("a second turn of the tenant on %s: %d %s, want 429", w.url, ts.code, ts.body)
		}
	}
	// Another tenant is not counted with alpha.
	if ts := promptTurn(t, ctx, b, tokenBeta, s3, "quick three"); ts.code != http.StatusOK || endKind(t, finishWithin(t, ts, time.Minute)) != session.EndCompleted {
		t.Fatalf("beta's turn: %d %s", ts.code, ts.body)
	}
	// The busy session, through the other worker: the tenant's limit
	// answers first (429), and says when to try again.
	if ts := promptTurn(t, ctx, b, tokenAlpha, s1, "quick one again"); ts.code != http.StatusTooManyRequests || ts.header.Get("Retry-After") == "" {
		t.Fatalf("a prompt of the busy session: %d, Retry-After %q", ts.code, ts.header.Get("Retry-After"))
	}

	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.cmd.Wait()
	killed := time.Now()
	// The slot's lease ends at most one TTL after the kill; the prompt
	// that sees it free comes up to one poll (and its request) later.
	next := promptUntil(t, b, s2, "quick after", killed.Add(ttl+time.Second))
	if k := endKind(t, next); k != session.EndCompleted {
		t.Fatalf("the turn after the kill ended %s", k)
	}
}
