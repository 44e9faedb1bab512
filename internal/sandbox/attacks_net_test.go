package sandbox

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
)

// servers are an allowed HTTP server and a canary server that must never
// be reached.
type servers struct {
	allowed, canary *httptest.Server
	canaryHits      atomic.Int64
}

func (e *env) servers() *servers {
	s := &servers{}
	s.canary = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.canaryHits.Add(1)
		w.Write([]byte(e.canary))
	}))
	e.t.Cleanup(s.canary.Close)
	s.allowed = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, s.canary.URL+"/stolen", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/big":
			w.Write([]byte(strings.Repeat("b", 1<<20)))
		default:
			w.Write([]byte("hello from the allowed host"))
		}
	}))
	e.t.Cleanup(s.allowed.Close)
	return s
}

func hostPort(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }

func netGrant(hosts string, extra string) string {
	return fmt.Sprintf("net: {allowed_hosts: [%q]%s}", hosts, extra)
}

func (e *env) fetch(url string, headers map[string]string) step {
	e.t.Helper()
	return e.attack(e.main, attackArgs{Attack: "http", HTTP: &hostfns.HTTPRequest{URL: url, Headers: headers}}).Steps[0]
}

func (e *env) wantFetchRefused(s step, st hostfns.Status, msg string) {
	e.t.Helper()
	if s.Code != uint32(st) || !strings.Contains(s.Msg, msg) {
		e.t.Errorf("http_request: %s (%d) %q, want %s (%d) containing %q", s.Status, s.Code, s.Msg, st, st, msg)
	}
}

func (s *servers) wantNoCanaryHit(e *env) {
	if n := s.canaryHits.Load(); n != 0 {
		e.t.Errorf("the canary server was reached %d times", n)
	}
}

// wantAllowedWorks proves the grant itself works.
func (e *env) wantAllowedWorks(s *servers) {
	e.t.Helper()
	got := e.fetch(s.allowed.URL+"/", nil)
	var resp hostfns.HTTPResponse
	if got.Status != "ok" || json.Unmarshal([]byte(got.Data), &resp) != nil || resp.Body != "hello from the allowed host" {
		e.t.Errorf("the granted host: %+v", got)
	}
}

func netAttacks() []hostileAttack {
	return []hostileAttack{
		{name: "net-without-grant", run: func(e *env) string {
			s := e.servers()
			e.attacker(nil)
			e.wantFetchRefused(e.fetch(s.canary.URL, nil), hostfns.ErrDenied, `plugin "attacker" is not granted network access (grants.net.allowed_hosts)`)
			s.wantNoCanaryHit(e)
			return "refused (denied: no net grant)"
		}},
		{name: "net-unlisted-host", run: func(e *env) string {
			s := e.servers()
			e.attacker(nil, netGrant(hostPort(s.allowed), ""))
			e.wantAllowedWorks(s)
			e.wantFetchRefused(e.fetch(s.canary.URL+"/stolen", nil), hostfns.ErrDenied, "netguard: host not allowed")
			s.wantNoCanaryHit(e)
			return "refused (denied: host not allowed)"
		}},
		{name: "net-redirect-to-unlisted-host", run: func(e *env) string {
			s := e.servers()
			e.attacker(nil, netGrant(hostPort(s.allowed), ""))
			e.wantFetchRefused(e.fetch(s.allowed.URL+"/redirect", nil), hostfns.ErrDenied, "netguard: host not allowed")
			s.wantNoCanaryHit(e)
			return "refused at the redirect hop (denied)"
		}},
		{name: "net-redirect-loop", run: func(e *env) string {
			s := e.servers()
			e.attacker(nil, netGrant(hostPort(s.allowed), ""))
			e.wantFetchRefused(e.fetch(s.allowed.URL+"/loop", nil), hostfns.ErrLimit, "netguard: too many redirects")
			return "stopped after the redirect limit"
		}},
		{name: "net-oversize-response", run: func(e *env) string {
			s := e.servers()
			e.attacker(nil, netGrant(hostPort(s.allowed), ", response_bytes: 1KiB"))
			got := e.fetch(s.allowed.URL+"/big", nil)
			var resp hostfns.HTTPResponse
			if got.Status != "ok" || json.Unmarshal([]byte(got.Data), &resp) != nil {
				e.t.Fatalf("oversize response: %+v", got)
			}
			if !resp.Truncated || len(resp.Body) != 1024 || resp.Status != 200 {
				e.t.Errorf("oversize response: status %d, truncated %v, %d body bytes; want 200, true, 1024", resp.Status, resp.Truncated, len(resp.Body))
			}
			return fmt.Sprintf("truncated to %d of %d bytes, flagged", len(resp.Body), 1<<20)
		}},
		{name: "net-name-to-private-address", run: func(e *env) string {
			// A granted host name that resolves to a loopback address
			// (DNS pointing at the local machine or a metadata service).
			s := e.servers()
			port := s.canary.URL[strings.LastIndexByte(s.canary.URL, ':')+1:]
			e.attacker(nil, netGrant("localhost:"+port, ""))
			e.wantFetchRefused(e.fetch("http://localhost:"+port+"/stolen", nil), hostfns.ErrDenied, "netguard: address is not publicly routable")
			s.wantNoCanaryHit(e)
			return "refused (the name resolves to a non-public address)"
		}},
		{name: "net-host-header-override", run: func(e *env) string {
			s := e.servers()
			e.attacker(nil, netGrant(hostPort(s.allowed), ""))
			e.wantFetchRefused(e.fetch(s.allowed.URL+"/", map[string]string{"Host": "internal.example"}), hostfns.ErrBadJSON, "netguard: invalid request")
			return "refused (the Host header cannot be set)"
		}},
		{name: "net-non-http-scheme", run: func(e *env) string {
			s := e.servers()
			e.attacker(nil, netGrant(hostPort(s.allowed), ""))
			e.wantFetchRefused(e.fetch("file://"+e.outside+"/secret.txt", nil), hostfns.ErrDenied, "netguard: scheme not allowed")
			return "refused (only http and https)"
		}},
	}
}
