package netguard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeNet maps test host names to one httptest server and records which
// names were dialed and which Host headers the server saw.
type fakeNet struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	dialed []string
	hosts  []string
}

func newFakeNet(t *testing.T, h http.Handler) *fakeNet {
	t.Helper()
	fn := &fakeNet{t: t}
	fn.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fn.mu.Lock()
		fn.hosts = append(fn.hosts, r.Host)
		fn.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(fn.srv.Close)
	return fn
}

func (fn *fakeNet) transport() *http.Transport {
	target := fn.srv.Listener.Addr().String()
	var d net.Dialer
	return &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			fn.mu.Lock()
			fn.dialed = append(fn.dialed, host)
			fn.mu.Unlock()
			return d.DialContext(ctx, network, target)
		},
	}
}

func (fn *fakeNet) dialedNames() []string {
	fn.mu.Lock()
	defer fn.mu.Unlock()
	return append([]string(nil), fn.dialed...)
}

func (fn *fakeNet) requestHosts() []string {
	fn.mu.Lock()
	defer fn.mu.Unlock()
	return append([]string(nil), fn.hosts...)
}

func (fn *fakeNet) fetcher(t *testing.T, opts Options) *Fetcher {
	t.Helper()
	opts.Transport = fn.transport()
	f, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestFetchAllowedHost(t *testing.T) {
	fn := newFakeNet(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo-Method", r.Method)
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "%s %s %s %s", r.Host, r.URL.Path, r.Header.Get("X-Token"), body)
	}))
	f := fn.fetcher(t, Options{AllowedHosts: []string{"allowed.test"}})
	resp, err := f.Fetch(context.Background(), Request{
		Method:  "POST",
		URL:     "http://Allowed.Test/path",
		Headers: map[string]string{"x-token": "t1"},
		Body:    "hello",
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusCreated {
		t.Errorf("status = %d", resp.Status)
	}
	if want := "allowed.test /path t1 hello"; !strings.EqualFold(resp.Body, want) {
		t.Errorf("body = %q, want %q", resp.Body, want)
	}
	if resp.Truncated || resp.BodyBase64 != "" {
		t.Errorf("unexpected truncated=%v body_base64=%q", resp.Truncated, resp.BodyBase64)
	}
	if got := resp.Headers["Set-Cookie"]; len(got) != 2 {
		t.Errorf("Set-Cookie = %v, want two values", got)
	}
	if got := resp.Headers["X-Echo-Method"]; len(got) != 1 || got[0] != "POST" {
		t.Errorf("X-Echo-Method = %v", got)
	}
}

func TestFetchBinaryBodies(t *testing.T) {
	payload := []byte{0xff, 0x00, 0xfe, 'x'}
	fn := newFakeNet(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Write(body)
	}))
	f := fn.fetcher(t, Options{AllowedHosts: []string{"allowed.test"}})
	resp, err := f.Fetch(context.Background(), Request{Method: "PUT", URL: "http://allowed.test/", BodyBase64: "/wD+eA=="})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Body != "" || resp.BodyBase64 != "/wD+eA==" {
		t.Errorf("response = body %q, base64 %q", resp.Body, resp.BodyBase64)
	}
	got, err := resp.BodyBytes()
	if err != nil || !bytes.Equal(got, payload) {
		t.Errorf("BodyBytes = %v, %v", got, err)
	}
}

func TestFetchUnlistedHostMakesNoConnection(t *testing.T) {
	fn := newFakeNet(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	f := fn.fetcher(t, Options{AllowedHosts: []string{"allowed.test", "*.allowed.test"}})
	for _, u := range []string{
		"http://evil.test/",
		"https://evil.test/",
		"http://allowed.test.evil.test/",
		"http://evil.test#@allowed.test/",
		"http://allowed.test@evil.test/",
		"http://127.0.0.1/",
		"http://2130706433/",
	} {
		_, err := f.Fetch(context.Background(), Request{URL: u})
		if !errors.Is(err, ErrHostNotAllowed) {
			t.Errorf("Fetch(%s) error = %v, want ErrHostNotAllowed", u, err)
		}
	}
	if d := fn.dialedNames(); len(d) != 0 {
		t.Errorf("connections were made: %v", d)
	}
}

func TestFetchPortPattern(t *testing.T) {
	fn := newFakeNet(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	f := fn.fetcher(t, Options{AllowedHosts: []string{"allowed.test:8080"}})
	if _, err := f.Fetch(context.Background(), Request{URL: "http://allowed.test:8080/"}); err != nil {
		t.Errorf("granted port refused: %v", err)
	}
	for _, u := range []string{"http://allowed.test/", "https://allowed.test/", "http://allowed.test:8081/"} {
		if _, err := f.Fetch(context.Background(), Request{URL: u}); !errors.Is(err, ErrHostNotAllowed) {
			t.Errorf("Fetch(%s) error = %v, want ErrHostNotAllowed", u, err)
		}
	}
}

func TestFetchRefusesOtherSchemes(t *testing.T) {
	fn := newFakeNet(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	f := fn.fetcher(t, Options{AllowedHosts: []string{"*"}})
	for _, u := range []string{"file:///etc/passwd", "ftp://allowed.test/", "gopher://allowed.test/", "allowed.test/x", "mailto:a@allowed.test"} {
		_, err := f.Fetch(context.Background(), Request{URL: u})
		if !errors.Is(err, ErrSchemeNotAllowed) {
			t.Errorf("Fetch(%s) error = %v, want ErrSchemeNotAllowed", u, err)
		}
	}
	if d := fn.dialedNames(); len(d) != 0 {
		t.Errorf("connections were made: %v", d)
	}
}

func TestFetchRedirects(t *testing.T) {
	fn := newFakeNet(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-evil":
			http.Redirect(w, r, "http://evil.test/steal", http.StatusFound)
		case "/to-file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		case "/to-other":
			http.Redirect(w, r, "http://other.allowed.test/final", http.StatusMovedPermanently)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		default:
			fmt.Fprintf(w, "at %s%s", r.Host, r.URL.Path)
		}
	}))
	f := fn.fetcher(t, Options{AllowedHosts: []string{"allowed.test", "*.allowed.test"}})
	ctx := context.Background()

	t.Run("to another allowed host", func(t *testing.T) {
		resp, err := f.Fetch(ctx, Request{URL: "http://allowed.test/to-other"})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Body != "at other.allowed.test/final" || resp.URL != "http://other.allowed.test/final" {
			t.Errorf("got body %q url %q", resp.Body, resp.URL)
		}
	})
	t.Run("to an unlisted host", func(t *testing.T) {
		_, err := f.Fetch(ctx, Request{URL: "http://allowed.test/to-evil"})
		if !errors.Is(err, ErrHostNotAllowed) {
			t.Fatalf("error = %v, want ErrHostNotAllowed", err)
		}
		if contains(fn.dialedNames(), "evil.test") || contains(fn.requestHosts(), "evil.test") {
			t.Errorf("evil.test was contacted: dialed %v, hosts %v", fn.dialedNames(), fn.requestHosts())
		}
	})
	t.Run("to another scheme", func(t *testing.T) {
		_, err := f.Fetch(ctx, Request{URL: "http://allowed.test/to-file"})
		if !errors.Is(err, ErrSchemeNotAllowed) {
			t.Fatalf("error = %v, want ErrSchemeNotAllowed", err)
		}
	})
	t.Run("loop", func(t *testing.T) {
		_, err := f.Fetch(ctx, Request{URL: "http://allowed.test/loop"})
		if !errors.Is(err, ErrTooManyRedirects) {
			t.Fatalf("error = %v, want ErrTooManyRedirects", err)
		}
	})
	t.Run("not followed", func(t *testing.T) {
		nf := fn.fetcher(t, Options{AllowedHosts: []string{"allowed.test"}, MaxRedirects: -1})
		resp, err := nf.Fetch(ctx, Request{URL: "http://allowed.test/to-evil"})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != http.StatusFound || resp.Headers["Location"][0] != "http://evil.test/steal" {
			t.Errorf("got %d %v", resp.Status, resp.Headers["Location"])
		}
	})
}

func TestFetchRedirectLimitCounts(t *testing.T) {
	var hits int
	var mu sync.Mutex
	fn := newFakeNet(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		http.Redirect(w, r, "/again", http.StatusFound)
	}))
	f := fn.fetcher(t, Options{AllowedHosts: []string{"allowed.test"}, MaxRedirects: 3})
	_, err := f.Fetch(context.Background(), Request{URL: "http://allowed.test/"})
	if !errors.Is(err, ErrTooManyRedirects) {
		t.Fatalf("error = %v, want ErrTooManyRedirects", err)
	}
	if hits != 4 {
		t.Errorf("server saw %d requests, want 4 (initial + 3 redirects)", hits)
	}
}

func TestFetchOversizeResponseIsTruncated(t *testing.T) {
	big := strings.Repeat("0123456789", 1000)
	fn := newFakeNet(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, big)
	}))
	f := fn.fetcher(t, Options{AllowedHosts: []string{"allowed.test"}, MaxResponseBytes: 25})
	resp, err := f.Fetch(context.Background(), Request{URL: "http://allowed.test/"})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Truncated || resp.Body != big[:25] {
		t.Errorf("truncated=%v body=%q", resp.Truncated, resp.Body)
	}
	exact := fn.fetcher(t, Options{AllowedHosts: []string{"allowed.test"}, MaxResponseBytes: int64(len(big))})
	resp, err = exact.Fetch(context.Background(), Request{URL: "http://allowed.test/"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Truncated || resp.Body != big {
		t.Errorf("body exactly at the cap: truncated=%v len=%d", resp.Truncated, len(resp.Body))
	}
}

func TestFetchRequestLimitsAndHeaders(t *testing.T) {
	fn := newFakeNet(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	f := fn.fetcher(t, Options{AllowedHosts: []string{"allowed.test"}, MaxRequestBytes: 4})
	ctx := context.Background()
	cases := []struct {
		req  Request
		want error
	}{
		{Request{URL: "http://allowed.test/", Body: "12345"}, ErrRequestTooLarge},
		{Request{URL: "http://allowed.test/", Headers: map[string]string{"Host": "evil.test"}}, ErrInvalidRequest},
		{Request{URL: "http://allowed.test/", Headers: map[string]string{"transfer-encoding": "chunked"}}, ErrInvalidRequest},
		{Request{URL: "http://allowed.test/", Headers: map[string]string{"X-A": "v\r\nHost: evil.test"}}, ErrInvalidRequest},
		{Request{URL: "http://allowed.test/", Headers: map[string]string{"bad name": "v"}}, ErrInvalidRequest},
		{Request{URL: "http://allowed.test/", Method: "GET /x"}, ErrInvalidRequest},
		{Request{URL: "http://allowed.test/", Body: "a", BodyBase64: "YQ=="}, ErrInvalidRequest},
		{Request{URL: "http://allowed.test/", BodyBase64: "!!"}, ErrInvalidRequest},
		{Request{URL: "http://[::1"}, ErrInvalidRequest},
	}
	for _, c := range cases {
		if _, err := f.Fetch(ctx, c.req); !errors.Is(err, c.want) {
			t.Errorf("Fetch(%+v) error = %v, want %v", c.req, err, c.want)
		}
	}
	if d := fn.dialedNames(); len(d) != 0 {
		t.Errorf("connections were made: %v", d)
	}
}

func TestFetchContextCancel(t *testing.T) {
	started := make(chan struct{})
	fn := newFakeNet(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
	}))
	f := fn.fetcher(t, Options{AllowedHosts: []string{"allowed.test"}})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	begin := time.Now()
	_, err := f.Fetch(ctx, Request{URL: "http://allowed.test/"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("cancel took %v", d)
	}
}

func TestFetchTimeout(t *testing.T) {
	fn := newFakeNet(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	f := fn.fetcher(t, Options{AllowedHosts: []string{"allowed.test"}, Timeout: 50 * time.Millisecond})
	_, err := f.Fetch(context.Background(), Request{URL: "http://allowed.test/"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error = %v, want a deadline error", err)
	}
}

type mapResolver map[string][]netip.Addr

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := m[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func TestDefaultTransportRefusesPrivateAddresses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "internal")
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	resolver := mapResolver{
		"rebind.test": {netip.MustParseAddr("127.0.0.1")},
		"meta.test":   {netip.MustParseAddr("169.254.169.254")},
		"mapped.test": {netip.MustParseAddr("::ffff:10.0.0.1")},
	}
	ctx := context.Background()

	strict, err := New(Options{AllowedHosts: []string{"*", "127.0.0.1"}, Resolver: resolver, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer strict.Close()
	for _, host := range []string{"rebind.test", "meta.test", "mapped.test"} {
		_, err := strict.Fetch(ctx, Request{URL: "http://" + host + ":" + port + "/"})
		if !errors.Is(err, ErrPrivateAddress) {
			t.Errorf("%s: error = %v, want ErrPrivateAddress", host, err)
		}
	}
	// An explicitly granted IP literal is dialed as is.
	resp, err := strict.Fetch(ctx, Request{URL: "http://127.0.0.1:" + port + "/"})
	if err != nil || resp.Body != "internal" {
		t.Errorf("granted literal: %+v, %v", resp, err)
	}

	open, err := New(Options{AllowedHosts: []string{"rebind.test"}, Resolver: resolver, AllowPrivateAddresses: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	resp, err = open.Fetch(ctx, Request{URL: "http://rebind.test:" + port + "/"})
	if err != nil || resp.Body != "internal" {
		t.Errorf("AllowPrivateAddresses: %+v, %v", resp, err)
	}
}

func TestIsPublic(t *testing.T) {
	tests := map[string]bool{
		"8.8.8.8": true, "2606:4700::1111": true, "1.1.1.1": true,
		"127.0.0.1": false, "10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false,
		"169.254.169.254": false, "100.64.0.1": false, "0.0.0.0": false, "255.255.255.255": false,
		"224.0.0.1": false, "::1": false, "::": false, "fe80::1": false, "fd00::1": false,
		"64:ff9b::a00:1": false, "2001:db8::1": false, "198.18.0.1": false,
	}
	for s, want := range tests {
		if got := isPublic(netip.MustParseAddr(s)); got != want {
			t.Errorf("isPublic(%s) = %v, want %v", s, got, want)
		}
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	if _, err := New(Options{AllowedHosts: []string{"ok.test", "bad host"}}); !errors.Is(err, ErrInvalidPattern) {
		t.Errorf("bad pattern: %v", err)
	}
	if _, err := New(Options{MaxResponseBytes: -1}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("negative cap: %v", err)
	}
}

func TestDoesNotTouchDefaultClient(t *testing.T) {
	before := *http.DefaultClient
	beforeTransport := http.DefaultTransport
	f, err := New(Options{AllowedHosts: []string{"allowed.test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.client == http.DefaultClient || f.client.Transport == http.DefaultTransport {
		t.Error("Fetcher shares the default client or transport")
	}
	if g, ok := f.client.Transport.(guardTransport); !ok || g.base == http.DefaultTransport {
		t.Error("Fetcher's base transport is the default transport")
	}
	after := *http.DefaultClient
	if after.Transport != before.Transport || after.CheckRedirect != nil || after.Timeout != before.Timeout || http.DefaultTransport != beforeTransport {
		t.Error("http.DefaultClient or DefaultTransport was modified")
	}
}

func TestRequestResponseJSON(t *testing.T) {
	in := `{"method":"POST","url":"https://api.example.com/x","headers":{"Accept":"application/json"},"body_base64":"AAE="}`
	var req Request
	if err := json.Unmarshal([]byte(in), &req); err != nil {
		t.Fatal(err)
	}
	if req.Method != "POST" || req.URL != "https://api.example.com/x" || req.Headers["Accept"] != "application/json" || req.BodyBase64 != "AAE=" {
		t.Errorf("decoded %+v", req)
	}
	out, err := json.Marshal(Response{Status: 200, URL: "https://x.test/", Body: "ok", Truncated: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"status":200,"url":"https://x.test/","body":"ok","truncated":true}`; string(out) != want {
		t.Errorf("json = %s, want %s", out, want)
	}
}

func TestAllowed(t *testing.T) {
	f, err := New(Options{AllowedHosts: []string{"*.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Allowed("https://api.example.com/x"); err != nil {
		t.Errorf("Allowed: %v", err)
	}
	if err := f.Allowed("https://example.com/"); !errors.Is(err, ErrHostNotAllowed) {
		t.Errorf("Allowed(apex) = %v", err)
	}
}

// The Transport re-checks every request on its own, so a redirect policy
// mistake could not reach an unlisted host.
func TestGuardTransportChecksEveryRequest(t *testing.T) {
	fn := newFakeNet(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	f := fn.fetcher(t, Options{AllowedHosts: []string{"allowed.test"}})
	for _, u := range []string{"http://evil.test/", "ftp://allowed.test/"} {
		req, _ := http.NewRequest("GET", u, nil)
		if _, err := f.client.Transport.RoundTrip(req); err == nil {
			t.Errorf("RoundTrip(%s) succeeded", u)
		}
	}
	if d := fn.dialedNames(); len(d) != 0 {
		t.Errorf("connections were made: %v", d)
	}
	req, _ := http.NewRequest("GET", "http://allowed.test/", nil)
	resp, err := f.client.Transport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}
