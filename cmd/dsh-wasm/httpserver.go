package main

import (
	"container/list"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

// fdReserve is how many descriptors below the process's limit the
// connection cap stops: session files, the store's connections, the
// plugins' files, the listener.
const fdReserve = 64

// newHTTPServer is the one place serve and mcp --listen build their
// server: the request read bounded (ReadTimeout, headers and body), a
// deadline on every write renewed at each (deadlineHandler), idle
// connections closed (IdleTimeout), and the open connections capped
// below the descriptor limit, the longest-idle closed first for a new one
// (capListener). It returns the server and the listener to Serve on.
func newHTTPServer(ln net.Listener, h http.Handler, lim config.HTTP) (*http.Server, net.Listener) {
	lim = lim.WithDefaults()
	cl := &capListener{Listener: ln, max: connCap(lim.MaxConnections), conns: map[*trackedConn]*list.Element{}}
	hs := &http.Server{
		Handler:     deadlineHandler(h, lim.WriteTimeout),
		ReadTimeout: lim.ReadTimeout, // and the headers' timeout, ReadHeaderTimeout being 0
		IdleTimeout: lim.IdleTimeout,
		ConnState:   cl.setState,
	}
	return hs, cl
}

// connCap is the connection cap: the configured one (0: none), never
// more than the descriptor limit less fdReserve, and at least 1.
func connCap(configured int) int {
	limit := configured
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err == nil && r.Cur < uint64(config.MaxHTTPConnections)+fdReserve {
		if byFD := int(r.Cur) - fdReserve; limit == 0 || byFD < limit {
			limit = byFD
		}
	}
	if limit <= 0 {
		limit = 1
	}
	return limit
}

// deadlineHandler renews the connection's write deadline before every
// write and flush of a response, and once more when the handler returns
// (for the server's last flush; the server clears the deadline after
// it), so that a response is cut only when one write stalls for d: a
// client that reads nothing. (The server lifts the read deadline itself
// once the body is read, when it starts watching for the client to hang
// up, so ReadTimeout bounds the request only.)
func deadlineHandler(next http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dw := &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d}
		defer dw.renew()
		next.ServeHTTP(dw, r)
	})
}

type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) renew() { w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

func (w *deadlineWriter) WriteHeader(code int) {
	w.renew()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.renew()
	return w.ResponseWriter.Write(b)
}

func (w *deadlineWriter) Flush() { _ = w.FlushError() }

func (w *deadlineWriter) FlushError() error {
	w.renew()
	return w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// capListener caps the connections it has accepted and not yet seen
// closed. At the cap, accepting one more closes the connection idle the
// longest: one that has sent nothing or only part of its headers (the
// server reports a connection active only once its headers are
// complete), or a kept-alive one between requests; when every one has a
// request running, the new one is closed. Silent connections thus never
// hold every descriptor: a new client is answered, and a request running
// (an SSE turn) is never cut.
type capListener struct {
	net.Listener
	max int

	mu sync.Mutex
	// conns are the open connections; each idle one has its element in
	// idle, the longest idle first; one with a request running has nil.
	conns map[*trackedConn]*list.Element
	idle  list.List
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, l: l}
		var victim *trackedConn
		l.mu.Lock()
		if len(l.conns) >= l.max && l.idle.Len() > 0 {
			victim = l.idle.Front().Value.(*trackedConn)
			l.forgetLocked(victim)
		}
		full := len(l.conns) >= l.max
		if !full {
			l.conns[tc] = l.idle.PushBack(tc)
		}
		l.mu.Unlock()
		if victim != nil {
			victim.Conn.Close()
		}
		if full {
			c.Close()
			continue
		}
		return tc, nil
	}
}

// forgetLocked drops c from the count; l.mu is held.
func (l *capListener) forgetLocked(c *trackedConn) {
	if e := l.conns[c]; e != nil {
		l.idle.Remove(e)
	}
	delete(l.conns, c)
}

// setState is the server's ConnState hook: a connection leaves when
// closed or hijacked, is busy while a request runs, and is idle again,
// last in line, when it ends.
func (l *capListener) setState(c net.Conn, s http.ConnState) {
	tc, ok := c.(*trackedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e, open := l.conns[tc]
	if !open {
		return
	}
	switch s {
	case http.StateClosed, http.StateHijacked:
		l.forgetLocked(tc)
	case http.StateActive:
		if e != nil {
			l.idle.Remove(e)
			l.conns[tc] = nil
		}
	case http.StateIdle:
		if e != nil {
			l.idle.Remove(e)
		}
		l.conns[tc] = l.idle.PushBack(tc)
	}
}

// trackedConn is an accepted connection; it leaves the count when
// closed.
type trackedConn struct {
	net.Conn
	l *capListener
}

func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	c.l.forgetLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}
