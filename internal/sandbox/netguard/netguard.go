// Package netguard is the HTTP fetcher behind a plugin's net grant.
//
// A Fetcher performs one HTTP(S) request per Fetch call on behalf of an
// untrusted plugin, with its own http.Client and Transport (it never touches
// http.DefaultClient, http.DefaultTransport or any client of the embedding
// host).
//
// Guaranteed:
//   - Only http and https URLs are fetched; every other scheme is refused
//     before any connection is made (ErrSchemeNotAllowed).
//   - The initial URL and every redirect target are checked against the
//     allowed_hosts patterns (see HostPattern for the syntax) before a
//     connection to that host is made (ErrHostNotAllowed). The check runs
//     both in the redirect policy and again inside the Transport, so no code
//     path reaches the network with an unchecked URL.
//   - At most MaxRedirects redirects are followed (ErrTooManyRedirects);
//     a redirect loop ends there.
//   - The response body is read up to MaxResponseBytes; the rest is
//     discarded, the connection is closed, and Response.Truncated tells the
//     plugin that it got a prefix. Oversize responses are not an error, so
//     the plugin still sees the status and headers.
//   - With the default Transport, host names are resolved by netguard and
//     connections go to the resolved address that was checked (no second
//     lookup, so DNS rebinding cannot swap it). Addresses that are not
//     globally routable (loopback, RFC 1918, link-local including cloud
//     metadata endpoints, CGNAT, ULA, multicast, unspecified, reserved) are
//     refused for host names unless AllowPrivateAddresses is set
//     (ErrPrivateAddress). An IP literal URL is dialed as is: it can only
//     pass the allowlist if that exact address was granted.
//   - Requests cannot override the Host header or hop-by-hop headers, so a
//     granted front end cannot be asked to serve a different virtual host.
//   - No cookies are kept between fetches; environment proxy settings are
//     ignored.
//
// Not guaranteed:
//   - Nothing about what an allowed host does with the data: an allowed
//     host can exfiltrate whatever the plugin sends it.
//   - A custom Transport (Options.Transport) bypasses the private-address
//     check and the resolution pinning; only the host allowlist still
//     applies. It exists for tests and for hosts that supply their own
//     egress policy.
//   - TLS trust is the system's; certificate pinning is not offered.
package netguard

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"github.com/dsh-wasm/dsh-wasm/internal/defaults"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// Errors returned by Fetch; test with errors.Is.
var (
	ErrHostNotAllowed   = errors.New("netguard: host not allowed")
	ErrSchemeNotAllowed = errors.New("netguard: scheme not allowed")
	ErrTooManyRedirects = errors.New("netguard: too many redirects")
	ErrPrivateAddress   = errors.New("netguard: address is not publicly routable")
	ErrInvalidRequest   = errors.New("netguard: invalid request")
	ErrRequestTooLarge  = errors.New("netguard: request body too large")
	ErrInvalidOptions   = errors.New("netguard: invalid options")
)

// Defaults applied by New for zero Options fields.
const (
	DefaultMaxResponseBytes = defaults.NetResponseBytes
	DefaultMaxRequestBytes  = 5 << 20 // 5 MiB
	DefaultMaxRedirects     = 10
	DefaultTimeout          = defaults.NetTimeout
)

// Resolver looks up the addresses of a host name; *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configures a Fetcher.
type Options struct {
	// AllowedHosts are the granted patterns; empty allows nothing.
	AllowedHosts []string
	// MaxResponseBytes caps the body returned to the plugin
	// (DefaultMaxResponseBytes when 0).
	MaxResponseBytes int64
	// MaxRequestBytes caps the request body the plugin may send
	// (DefaultMaxRequestBytes when 0).
	MaxRequestBytes int64
	// MaxRedirects is the number of redirects followed (DefaultMaxRedirects
	// when 0; negative means none are followed and the 3xx response is
	// returned to the plugin as is).
	MaxRedirects int
	// Timeout bounds a whole Fetch including redirects and reading the body
	// (DefaultTimeout when 0).
	Timeout time.Duration
	// AllowPrivateAddresses lets host names resolve to non-public
	// addresses (intranet services). Default Transport only.
	AllowPrivateAddresses bool
	// Resolver replaces net.DefaultResolver for the default Transport.
	Resolver Resolver
	// Transport replaces the default Transport. See the package doc for
	// what that gives up.
	Transport http.RoundTripper
}

// Request is what a plugin asks to fetch. It round-trips through JSON.
type Request struct {
	// Method defaults to GET.
	Method string `json:"method,omitempty"`
	URL    string `json:"url"`
	// Headers to send. Host, Content-Length, Transfer-Encoding, Connection
	// and other hop-by-hop headers are refused.
	Headers map[string]string `json:"headers,omitempty"`
	// Body is sent as is; BodyBase64 is decoded first. At most one is set.
	Body       string `json:"body,omitempty"`
	BodyBase64 string `json:"body_base64,omitempty"`
}

// Response is what the plugin gets back. Body holds the payload when it is
// valid UTF-8, BodyBase64 otherwise; never both.
type Response struct {
	Status int `json:"status"`
	// URL is the final URL after redirects.
	URL        string              `json:"url"`
	Headers    map[string][]string `json:"headers,omitempty"`
	Body       string              `json:"body,omitempty"`
	BodyBase64 string              `json:"body_base64,omitempty"`
	// Truncated is true when the body exceeded the cap and only the first
	// MaxResponseBytes bytes are returned.
	Truncated bool `json:"truncated,omitempty"`
}

// BodyBytes returns the body whichever way it was encoded.
func (r Response) BodyBytes() ([]byte, error) {
	if r.BodyBase64 != "" {
		b, err := base64.StdEncoding.DecodeString(r.BodyBase64)
		if err != nil {
			return nil, fmt.Errorf("netguard: decode body_base64: %w", err)
		}
		return b, nil
	}
	return []byte(r.Body), nil
}

// Fetcher performs guarded HTTP requests. It is safe for concurrent use.
type Fetcher struct {
	allow       Allowlist
	maxResponse int64
	maxRequest  int64
	client      *http.Client
	ownTrans    *http.Transport // nil when the caller supplied one
}

// New builds a Fetcher; malformed patterns are reported with ErrInvalidPattern.
func New(opts Options) (*Fetcher, error) {
	allow, err := ParseAllowlist(opts.AllowedHosts)
	if err != nil {
		return nil, err
	}
	if opts.MaxResponseBytes < 0 || opts.MaxRequestBytes < 0 || opts.Timeout < 0 {
		return nil, fmt.Errorf("%w: negative limit", ErrInvalidOptions)
	}
	f := &Fetcher{
		allow:       allow,
		maxResponse: orDefault(opts.MaxResponseBytes, DefaultMaxResponseBytes),
		maxRequest:  orDefault(opts.MaxRequestBytes, DefaultMaxRequestBytes),
	}
	maxRedirects := opts.MaxRedirects
	if maxRedirects == 0 {
		maxRedirects = DefaultMaxRedirects
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	base := opts.Transport
	if base == nil {
		resolver := opts.Resolver
		if resolver == nil {
			resolver = net.DefaultResolver
		}
		f.ownTrans = newTransport(&dialer{resolver: resolver, allowPrivate: opts.AllowPrivateAddresses})
		base = f.ownTrans
	}
	f.client = &http.Client{
		Transport: guardTransport{allow: allow, base: base},
		Timeout:   timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if maxRedirects < 0 {
				return http.ErrUseLastResponse
			}
			if len(via) > maxRedirects {
				return fmt.Errorf("%w: more than %d", ErrTooManyRedirects, maxRedirects)
			}
			return checkURL(allow, req.URL)
		},
	}
	return f, nil
}

func orDefault(v, def int64) int64 {
	if v == 0 {
		return def
	}
	return v
}

// Close releases idle connections of the Fetcher's own Transport.
func (f *Fetcher) Close() {
	if f.ownTrans != nil {
		f.ownTrans.CloseIdleConnections()
	}
}

// Allowed reports whether rawURL passes the scheme and host checks, without
// fetching anything.
func (f *Fetcher) Allowed(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("%w: url: %w", ErrInvalidRequest, err)
	}
	return checkURL(f.allow, u)
}

// Fetch performs req. A non-2xx status is not an error; errors mean the
// request was refused or failed (test with errors.Is against the package's
// sentinels, context.Canceled or context.DeadlineExceeded).
func (f *Fetcher) Fetch(ctx context.Context, req Request) (Response, error) {
	hreq, err := f.build(ctx, req)
	if err != nil {
		return Response{}, err
	}
	resp, err := f.client.Do(hreq)
	if err != nil {
		return Response{}, fmt.Errorf("netguard: fetch %s: %w", redact(hreq.URL), unwrapURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.maxResponse+1))
	if err != nil {
		return Response{}, fmt.Errorf("netguard: read body of %s: %w", redact(resp.Request.URL), err)
	}
	out := Response{
		Status:  resp.StatusCode,
		URL:     resp.Request.URL.String(),
		Headers: map[string][]string(resp.Header.Clone()),
	}
	if int64(len(body)) > f.maxResponse {
		body = body[:f.maxResponse]
		out.Truncated = true
	}
	if utf8.Valid(body) {
		out.Body = string(body)
	} else {
		out.BodyBase64 = base64.StdEncoding.EncodeToString(body)
	}
	return out, nil
}

// unwrapURLError drops the *url.Error layer, whose message repeats the URL.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// redact drops userinfo and the query, which may carry credentials.
func redact(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery = ""
	c.Fragment = ""
	return c.String()
}

var refusedHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true,
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Proxy-Authorization": true, "Proxy-Authenticate": true, "Te": true,
	"Trailer": true, "Upgrade": true,
}

func (f *Fetcher) build(ctx context.Context, req Request) (*http.Request, error) {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if !isToken(method) {
		return nil, fmt.Errorf("%w: method %q", ErrInvalidRequest, method)
	}
	u, err := url.Parse(req.URL)
	if err != nil {
		return nil, fmt.Errorf("%w: url: %w", ErrInvalidRequest, err)
	}
	if err := checkURL(f.allow, u); err != nil {
		return nil, err
	}
	if req.Body != "" && req.BodyBase64 != "" {
		return nil, fmt.Errorf("%w: both body and body_base64 set", ErrInvalidRequest)
	}
	body := []byte(req.Body)
	if req.BodyBase64 != "" {
		if body, err = base64.StdEncoding.DecodeString(req.BodyBase64); err != nil {
			return nil, fmt.Errorf("%w: body_base64: %w", ErrInvalidRequest, err)
		}
	}
	if int64(len(body)) > f.maxRequest {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrRequestTooLarge, len(body), f.maxRequest)
	}
	var rdr io.Reader
	if len(body) > 0 {
		rdr = bytes.NewReader(body)
	}
	hreq, err := http.NewRequestWithContext(ctx, method, u.String(), rdr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	for name, value := range req.Headers {
		if !isToken(name) {
			return nil, fmt.Errorf("%w: header name %q", ErrInvalidRequest, name)
		}
		canon := http.CanonicalHeaderKey(name)
		if refusedHeaders[canon] {
			return nil, fmt.Errorf("%w: header %q may not be set", ErrInvalidRequest, canon)
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return nil, fmt.Errorf("%w: header %q has a control character", ErrInvalidRequest, canon)
		}
		hreq.Header.Set(canon, value)
	}
	return hreq, nil
}

// checkURL applies the scheme and host rules to one hop.
func checkURL(allow Allowlist, u *url.URL) error {
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return fmt.Errorf("%w: %q (only http and https)", ErrSchemeNotAllowed, u.Scheme)
	}
	if u.Opaque != "" {
		return fmt.Errorf("%w: opaque URL", ErrInvalidRequest)
	}
	host, err := NormalizeHost(u.Hostname())
	if err != nil {
		return err
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if strings.EqualFold(u.Scheme, "https") {
			port = "443"
		}
	}
	for _, p := range allow {
		if p.Match(host, port) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s (port %s) is not in allowed_hosts", ErrHostNotAllowed, host, port)
}

// guardTransport re-checks every request the client sends, so that nothing
// reaches the base transport unchecked, whatever the redirect policy did.
type guardTransport struct {
	allow Allowlist
	base  http.RoundTripper
}

func (g guardTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := checkURL(g.allow, req.URL); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return g.base.RoundTrip(req)
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?={}`, c) >= 0 {
			return false
		}
	}
	return true
}
