package mcpserver

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPOptions configure the streamable HTTP transport.
type HTTPOptions struct {
	// Addr is the address the server listens on (host:port); its host and
	// port are what a request's Host header must name.
	Addr string
	// Tokens are the bearer tokens accepted; empty accepts requests
	// without one, which CheckListen allows only on loopback. A session
	// is tied to the token that opened it: a request with another token
	// is refused on it.
	Tokens []string
	// AllowedHosts are further host names (without port) the Host header
	// may carry, for a server reached under a DNS name.
	AllowedHosts []string
	// AllowedOrigins are further origins (scheme://host[:port]) a
	// browser-sent Origin header may carry; by default only the server's
	// own origin is accepted.
	AllowedOrigins []string
	// SessionTimeout closes a session idle this long, releasing its plugin
	// instances; 0 means 30 minutes.
	SessionTimeout time.Duration
}

// maxBody bounds one HTTP request body: a tool call's arguments, such as
// a file's whole new content.
const maxBody = 32 << 20

// isLoopback reports whether host (a name or an IP, no port) is a
// loopback host.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// CheckListen refuses to serve a non-loopback address without a token:
// anyone reaching the port could run the deployment's tools.
func CheckListen(addr string, tokens []string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: listen address %q: %v", ErrInvalidOptions, addr, err)
	}
	if isLoopback(host) || len(tokens) > 0 {
		return nil
	}
	if host == "" {
		host = "every interface"
	}
	return fmt.Errorf("%w: listening on %s (%s) needs a bearer token; set one in the environment", ErrInvalidOptions, host, addr)
}

// HTTPHandler returns the streamable HTTP handler: Host and Origin
// checked first (DNS rebinding), then the bearer token, then the SDK's
// handler, which ties each session to its token. opts.Addr must be the
// address actually bound (a resolved port, not :0).
func (s *Server) HTTPHandler(opts HTTPOptions) (http.Handler, error) {
	host, port, err := net.SplitHostPort(opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("%w: address %q: %v", ErrInvalidOptions, opts.Addr, err)
	}
	if err := CheckListen(opts.Addr, opts.Tokens); err != nil {
		return nil, err
	}
	timeout := opts.SessionTimeout
	if timeout == 0 {
		timeout = 30 * time.Minute
	}
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv },
		&mcp.StreamableHTTPOptions{SessionTimeout: timeout, Logger: s.log, MaxRequestBodyBytes: maxBody})
	if len(opts.Tokens) > 0 {
		h = auth.RequireBearerToken(verifier(opts.Tokens), &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	}
	hosts := slices.Clone(opts.AllowedHosts)
	if isLoopback(host) {
		hosts = append(hosts, "localhost", "127.0.0.1", "::1")
	} else if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		hosts = append(hosts, host)
	}
	g := &guard{next: h, port: port, hosts: hosts, origins: opts.AllowedOrigins,
		anyHost: host == "" || net.ParseIP(host).IsUnspecified()}
	return g, nil
}

// verifier accepts the configured tokens, each its own user: the SDK
// refuses a session's requests that come with another user's token.
func verifier(tokens []string) auth.TokenVerifier {
	type entry struct {
		sum [32]byte
		id  string
	}
	var es []entry
	for _, t := range tokens {
		sum := sha256.Sum256([]byte(t))
		es = append(es, entry{sum, "token-" + hex.EncodeToString(sum[:6])})
	}
	return func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		sum := sha256.Sum256([]byte(token))
		for _, e := range es {
			if subtle.ConstantTimeCompare(sum[:], e.sum[:]) == 1 {
				return &auth.TokenInfo{UserID: e.id}, nil
			}
		}
		return nil, auth.ErrInvalidToken
	}
}

// guard refuses requests whose Host the server does not answer to, or
// whose Origin is another site's: a page in a browser reaching a local
// port through DNS rebinding, or posting to it cross-site.
type guard struct {
	next    http.Handler
	port    string
	hosts   []string
	anyHost bool // bound to every interface: any name, the token guards
	origins []string
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if msg := g.checkHost(r.Host); msg != "" {
		http.Error(w, "Forbidden: "+msg, http.StatusForbidden)
		return
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		if msg := g.checkOrigin(origin, r.Host); msg != "" {
			http.Error(w, "Forbidden: "+msg, http.StatusForbidden)
			return
		}
	}
	g.next.ServeHTTP(w, r)
}

func (g *guard) checkHost(hostport string) string {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Sprintf("Host header %q is not host:port", hostport)
	}
	if port != g.port {
		return fmt.Sprintf("Host header %q names another port than this server's (%s)", hostport, g.port)
	}
	if g.anyHost || slices.ContainsFunc(g.hosts, func(h string) bool { return strings.EqualFold(h, strings.Trim(host, "[]")) }) {
		return ""
	}
	return fmt.Sprintf("Host header %q is not a name of this server", hostport)
}

func (g *guard) checkOrigin(origin, hostport string) string {
	if slices.Contains(g.origins, origin) {
		return ""
	}
	u, err := url.Parse(origin)
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") && strings.EqualFold(u.Host, hostport) && u.Path == "" {
		return "" // the server's own origin
	}
	return fmt.Sprintf("Origin %q is not this server's", origin)
}
