package netguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync/atomic"
	"testing"
	"time"
)

// TestCheckRedirectAlone calls the client's redirect policy directly, with
// no transport behind it, so that it is proved on its own: a redirect to a
// host or scheme outside the allowlist is refused here, before the
// transport's own re-check would see it.
func TestCheckRedirectAlone(t *testing.T) {
	f, err := New(Options{AllowedHosts: []string{"allowed.test", "*.ok.test"}, MaxRedirects: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	check := f.client.CheckRedirect
	if check == nil {
		t.Fatal("the client has no redirect policy")
	}
	req := func(raw string) *http.Request {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return &http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}}
	}
	via := func(n int) []*http.Request {
		v := make([]*http.Request, n)
		for i := range v {
			v[i] = req("https://allowed.test/")
		}
		return v
	}
	for _, tc := range []struct {
		to   string
		hops int
		want error
	}{
		{"https://allowed.test/next", 1, nil},
		{"https://a.ok.test/next", 3, nil},
		{"https://evil.test/", 1, ErrHostNotAllowed},
		{"http://169.254.169.254/latest/meta-data/", 1, ErrHostNotAllowed},
		{"http://127.0.0.1:8080/", 1, ErrHostNotAllowed},
		{"file:///etc/passwd", 1, ErrSchemeNotAllowed},
		{"https://allowed.test/again", 4, ErrTooManyRedirects},
	} {
		err := check(req(tc.to), via(tc.hops))
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("redirect to %s after %d hops: %v, want allowed", tc.to, tc.hops, err)
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("redirect to %s after %d hops: %v, want %v", tc.to, tc.hops, err, tc.want)
		}
	}

	noFollow, err := New(Options{AllowedHosts: []string{"allowed.test"}, MaxRedirects: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer noFollow.Close()
	if err := noFollow.client.CheckRedirect(req("https://allowed.test/next"), via(1)); !errors.Is(err, http.ErrUseLastResponse) {
		t.Errorf("MaxRedirects -1: %v, want http.ErrUseLastResponse", err)
	}
}

// TestNoProxyFromEnvironment: the environment's proxy settings must never
// route a plugin's request (a proxy sees and may redirect everything, and
// the dialer's address checks would apply to the proxy, not the target).
// The transport has no proxy function, and a request made with HTTP_PROXY
// and HTTPS_PROXY pointing at a recording proxy goes straight to its host.
func TestNoProxyFromEnvironment(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "direct")
	}))
	defer target.Close()
	var proxied atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		io.WriteString(w, "proxied")
	}))
	defer proxy.Close()
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"} {
		t.Setenv(k, proxy.URL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")

	_, port, _ := net.SplitHostPort(target.Listener.Addr().String())
	f, err := New(Options{AllowedHosts: []string{"svc.test"}, AllowPrivateAddresses: true, Timeout: 5 * time.Second,
		Resolver: mapResolver{"svc.test": {netip.MustParseAddr("127.0.0.1")}}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.ownTrans.Proxy != nil {
		t.Error("the transport has a proxy function")
	}
	// A host name, not a loopback literal: Go's environment proxy skips
	// localhost and loopback addresses, which would hide a proxy here.
	resp, err := f.Fetch(context.Background(), Request{URL: fmt.Sprintf("http://svc.test:%s/", port)})
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if resp.Body != "direct" || proxied.Load() != 0 {
		t.Errorf("body %q, %d requests through the environment's proxy; want %q and none", resp.Body, proxied.Load(), "direct")
	}
}
