package deepseek

import (
	"net/http"
	"sync"
	"time"
)

// Every agent of a process talks to the same few provider hosts, each
// turn holding one streaming response open for seconds. http.DefaultTransport
// keeps only two idle connections per host, so with many concurrent
// sessions most finished streams close their connection and the next
// request dials again (TCP and TLS). The shared transport below keeps one
// idle connection per concurrently streaming session instead, and asks for
// HTTP/2 where the provider offers it, which multiplexes them on one.
const (
	maxIdleConnsPerHost = 256
	maxIdleConns        = 1024
	idleConnTimeout     = 90 * time.Second
)

var sharedTransport = sync.OnceValue(func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = maxIdleConns
	t.MaxIdleConnsPerHost = maxIdleConnsPerHost
	t.IdleConnTimeout = idleConnTimeout
	t.ForceAttemptHTTP2 = true
	return t
})

// defaultClient is the client of Providers whose Options name none. It
// shares one connection pool across all of them.
func defaultClient() *http.Client { return &http.Client{Transport: sharedTransport()} }
