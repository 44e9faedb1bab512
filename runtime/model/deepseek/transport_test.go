package deepseek

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentSessionsReuseConnections runs waves of concurrent
// requests, as concurrent sessions' turns are, through providers built
// without an HTTP client, and counts the connections the server saw. With
// http.DefaultTransport (two idle connections per host) each wave after the
// first dials again; the shared transport keeps one connection per
// concurrent stream.
func TestConcurrentSessionsReuseConnections(t *testing.T) {
	const sessions, waves = 24, 3
	var conns atomic.Int32
	s := &server{Server: httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		startSSE(w)
		writeSSE(w, contentDelta("ok"), chunkJSON(`{}`, "stop"), "[DONE]")
	}))}
	// Set before the server starts: its goroutines read it.
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	p := newProvider(t, s, nil, func(c *Options) { c.HTTPClient = nil })
	if p.client.Transport != sharedTransport() {
		t.Fatal("a provider without an HTTP client does not use the shared transport")
	}
	// A second provider (another deployment, another agent) shares the pool.
	q := newProvider(t, s, nil, func(c *Options) { c.HTTPClient = nil })
	for w := 0; w < waves; w++ {
		var wg sync.WaitGroup
		for i := 0; i < sessions; i++ {
			prov := p
			if i%2 == 1 {
				prov = q
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, _, err := collect(t, context.Background(), prov, simpleRequest()); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	// Each wave may dial a few extra connections before the previous
	// wave's are back in the pool; the default transport opens about
	// sessions*waves - 2*(waves-1) (66 here).
	if n := int(conns.Load()); n > sessions+sessions/2 {
		t.Fatalf("%d sessions x %d requests opened %d connections, want at most %d", sessions, waves, n, sessions+sessions/2)
	}
}
