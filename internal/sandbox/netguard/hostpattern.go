package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// HostPattern is one parsed allowed_hosts entry. The syntax is
//
//	example.com          that host exactly, any port
//	example.com:8443     that host, only port 8443
//	*.example.com        any host with one or more labels before
//	                     ".example.com" (a.example.com, a.b.example.com),
//	                     but NOT example.com itself
//	*                    any host name (never an IP literal)
//	192.0.2.7, [2001:db8::1]:443
//	                     that IP address exactly
//
// Names compare case-insensitively and without a trailing dot. A "*" is only
// valid as the whole leftmost label; partial-label globs such as "api-*.x.com"
// are refused so that a pattern's meaning is obvious from reading it.
// Wildcards never match IP literals: an address must be listed itself.
// Non-ASCII names must be written in their punycode (xn--) form.
type HostPattern struct {
	// exactly one of these describes the host part
	anyHost bool
	suffix  string     // for "*.suffix": the suffix without the leading dot
	name    string     // an exact, lower-case host name
	addr    netip.Addr // an exact IP address

	port string // "" = any port
}

// ErrInvalidPattern reports an allowed_hosts entry that does not parse.
var ErrInvalidPattern = errors.New("netguard: invalid host pattern")

// ParseHostPattern parses one allowed_hosts entry.
func ParseHostPattern(s string) (HostPattern, error) {
	fail := func(why string) (HostPattern, error) {
		return HostPattern{}, fmt.Errorf("%w %q: %s", ErrInvalidPattern, s, why)
	}
	if s == "" {
		return fail("empty")
	}
	if strings.ContainsAny(s, "/?#@ \t") || strings.Contains(s, "://") {
		return fail("want a host name with an optional :port, not a URL")
	}
	host, port, err := splitHostPort(s)
	if err != nil {
		return fail(err.Error())
	}
	var p HostPattern
	p.port = port
	if addr, ok := parseIP(host); ok {
		p.addr = addr
		return p, nil
	}
	if strings.HasPrefix(host, "[") {
		return fail("malformed IPv6 literal")
	}
	if strings.HasSuffix(host, "*.") {
		return fail(`"*" must be followed by a domain, as in "*.example.com"`)
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	switch {
	case host == "*":
		p.anyHost = true
		return p, nil
	case strings.HasPrefix(host, "*."):
		p.suffix = host[2:]
		if err := checkHostName(p.suffix); err != nil {
			return fail(err.Error())
		}
		return p, nil
	}
	if strings.Contains(host, "*") {
		return fail(`"*" is only allowed as the whole leftmost label, as in "*.example.com"`)
	}
	if err := checkHostName(host); err != nil {
		return fail(err.Error())
	}
	p.name = host
	return p, nil
}

// String renders the pattern in its canonical form.
func (p HostPattern) String() string {
	var host string
	switch {
	case p.anyHost:
		host = "*"
	case p.suffix != "":
		host = "*." + p.suffix
	case p.addr.IsValid():
		host = p.addr.String()
		if p.addr.Is6() {
			host = "[" + host + "]"
		}
	default:
		host = p.name
	}
	if p.port != "" {
		return host + ":" + p.port
	}
	return host
}

// Match reports whether a request to host:port is allowed by p. host must be
// normalized by NormalizeHost; port must be the effective port (never "").
func (p HostPattern) Match(host string, port string) bool {
	if p.port != "" && p.port != port {
		return false
	}
	if addr, ok := parseIP(host); ok {
		return p.addr.IsValid() && p.addr == addr
	}
	switch {
	case p.anyHost:
		return true
	case p.suffix != "":
		return strings.HasSuffix(host, "."+p.suffix)
	default:
		return p.name != "" && p.name == host
	}
}

// covers reports whether every host:port that d allows is also allowed by p.
func (p HostPattern) covers(d HostPattern) bool {
	if p.port != "" && p.port != d.port {
		return false
	}
	switch {
	case d.addr.IsValid():
		return p.addr.IsValid() && p.addr == d.addr
	case p.addr.IsValid():
		return false
	case p.anyHost:
		return true
	case d.anyHost:
		return false
	case p.suffix != "":
		if d.suffix != "" {
			return d.suffix == p.suffix || strings.HasSuffix(d.suffix, "."+p.suffix)
		}
		return strings.HasSuffix(d.name, "."+p.suffix)
	default:
		return d.name != "" && d.name == p.name
	}
}

// Allowlist is a parsed allowed_hosts list. The zero value allows nothing.
type Allowlist []HostPattern

// ParseAllowlist parses every entry, reporting all malformed ones.
func ParseAllowlist(patterns []string) (Allowlist, error) {
	list := make(Allowlist, 0, len(patterns))
	var errs []error
	for _, s := range patterns {
		p, err := ParseHostPattern(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		list = append(list, p)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return list, nil
}

// Allows reports whether a request to host:port is allowed. host is
// normalized here; port must be the effective port.
func (a Allowlist) Allows(host, port string) bool {
	host, err := NormalizeHost(host)
	if err != nil {
		return false
	}
	for _, p := range a {
		if p.Match(host, port) {
			return true
		}
	}
	return false
}

// Covers reports whether the hosts a plugin declares it needs (a pattern in
// the same syntax) are all allowed by the list. A declared pattern without a
// port means "any port" and is therefore only covered by a granted pattern
// without a port.
func (a Allowlist) Covers(declared string) (bool, error) {
	d, err := ParseHostPattern(declared)
	if err != nil {
		return false, err
	}
	for _, p := range a {
		if p.covers(d) {
			return true, nil
		}
	}
	return false, nil
}

// NormalizeHost lower-cases a request host name and strips a trailing dot.
// It refuses what a pattern could never name unambiguously: empty hosts,
// non-ASCII names, IPv6 zones and all-numeric top-level labels (which some
// resolvers read as an IPv4 address in a legacy notation, such as
// "2130706433" or "0x7f.1").
func NormalizeHost(host string) (string, error) {
	if addr, ok := parseIP(host); ok {
		return addr.String(), nil
	}
	if strings.HasPrefix(host, "[") || strings.Contains(host, "%") {
		return "", fmt.Errorf("%w: malformed or zoned IP literal %q", ErrHostNotAllowed, host)
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if err := checkHostName(host); err != nil {
		return "", fmt.Errorf("%w: host %q: %s", ErrHostNotAllowed, host, err.Error())
	}
	return host, nil
}

// parseIP accepts a bare or bracketed IP literal without a zone and returns
// it unmapped (::ffff:1.2.3.4 is 1.2.3.4).
func parseIP(s string) (netip.Addr, bool) {
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	addr, err := netip.ParseAddr(s)
	if err != nil || addr.Zone() != "" {
		return netip.Addr{}, false
	}
	return addr.Unmap(), true
}

func splitHostPort(s string) (host, port string, err error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", errors.New("missing ] in IPv6 literal")
		}
		host, rest := s[:end+1], s[end+1:]
		if rest == "" {
			return host, "", nil
		}
		if !strings.HasPrefix(rest, ":") {
			return "", "", errors.New("unexpected text after IPv6 literal")
		}
		port, err := checkPort(rest[1:])
		return host, port, err
	}
	switch strings.Count(s, ":") {
	case 0:
		return s, "", nil
	case 1:
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			return "", "", err
		}
		port, err = checkPort(port)
		return host, port, err
	default:
		// A bare IPv6 address; ports require brackets.
		return s, "", nil
	}
}

func checkPort(s string) (string, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 || strconv.FormatUint(n, 10) != s {
		return "", fmt.Errorf("bad port %q", s)
	}
	return s, nil
}

// checkHostName accepts lower-case DNS names: labels of 1-63 characters from
// [a-z0-9_-], not starting or ending with '-', 253 characters at most, and a
// last label that is not all digits (or a 0x hex number).
func checkHostName(h string) error {
	if h == "" {
		return errors.New("empty host name")
	}
	if len(h) > 253 {
		return errors.New("host name longer than 253 characters")
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return errors.New("empty or over-long label")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return errors.New("label starts or ends with '-'")
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				if c >= 0x80 {
					return errors.New("non-ASCII host name; write it in punycode (xn--...)")
				}
				return fmt.Errorf("invalid character %q", c)
			}
		}
	}
	last := labels[len(labels)-1]
	if isNumericLabel(last) {
		return errors.New("numeric top-level label (not a DNS name and not a canonical IP address)")
	}
	return nil
}

func isNumericLabel(l string) bool {
	if strings.HasPrefix(l, "0x") {
		l = l[2:]
		if l == "" {
			return true
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return true
}
