package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// dialer resolves host names itself and dials only addresses it has checked.
type dialer struct {
	resolver     Resolver
	allowPrivate bool
	net          net.Dialer
}

func newTransport(d *dialer) *http.Transport {
	d.net = net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                  nil, // never the environment's proxy
		DialContext:            d.DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  30 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxIdleConns:           16,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 1 << 20,
	}
}

func (d *dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("netguard: dial %q: %w", address, err)
	}
	if addr, ok := parseIP(host); ok {
		// An IP literal passed the allowlist only if that address was
		// granted explicitly (wildcards never match addresses).
		return d.net.DialContext(ctx, network, net.JoinHostPort(addr.String(), port))
	}
	addrs, err := d.resolver.LookupNetIP(ctx, ipNetwork(network), host)
	if err != nil {
		return nil, fmt.Errorf("netguard: resolve %s: %w", host, err)
	}
	var candidates []netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		if d.allowPrivate || isPublic(a) {
			candidates = append(candidates, a)
		}
	}
	if len(candidates) == 0 {
		if len(addrs) == 0 {
			return nil, fmt.Errorf("netguard: resolve %s: no addresses", host)
		}
		return nil, fmt.Errorf("%w: %s resolves to %v", ErrPrivateAddress, host, addrs)
	}
	var errs []error
	for _, a := range candidates {
		conn, err := d.net.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("netguard: dial %s: %w", host, errors.Join(errs...))
}

func ipNetwork(network string) string {
	switch network {
	case "tcp4":
		return "ip4"
	case "tcp6":
		return "ip6"
	}
	return "ip"
}

// nonPublic4 lists the IPv4 ranges that are not globally routable beyond
// what netip's predicates cover.
var nonPublic4 = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // TEST-NET-1
	netip.MustParsePrefix("192.88.99.0/24"),  // 6to4 relay anycast (deprecated)
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // TEST-NET-2
	netip.MustParsePrefix("203.0.113.0/24"),  // TEST-NET-3
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, broadcast
}

var (
	// globalUnicast6 is the only IPv6 block IANA allocates for global
	// unicast. Everything outside it is refused whole, which covers
	// IPv4-compatible (::a.b.c.d), IPv4-translated (::ffff:0:a.b.c.d),
	// the discard prefix 100::/64, local-use NAT64 (64:ff9b:1::/48),
	// unique-local, link-local, multicast and SRv6 SIDs (5f00::/16).
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
	// nat64 is the well-known NAT64 prefix (RFC 6052): its last 32 bits
	// are an IPv4 address, and the address is classified as that one, so
	// public sites stay reachable on IPv6-only networks with DNS64.
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
	// nonPublic6 lists the parts of 2000::/3 that are not globally
	// routable or that embed an IPv4 address a relay would reach.
	nonPublic6 = []netip.Prefix{
		netip.MustParsePrefix("2001::/23"),     // IETF protocol assignments, Teredo 2001::/32 among them
		netip.MustParsePrefix("2001:db8::/32"), // documentation
		netip.MustParsePrefix("2002::/16"),     // 6to4: embeds an IPv4 address
		netip.MustParsePrefix("3fff::/20"),     // documentation (RFC 9637)
	}
)

// isPublic reports whether a is a globally routable unicast address. IPv6
// forms that carry an IPv4 address are classified by that address
// (IPv4-mapped, well-known NAT64) or refused whole (IPv4-compatible,
// IPv4-translated, 6to4, Teredo, local-use NAT64).
func isPublic(a netip.Addr) bool {
	a = a.Unmap()
	switch {
	case !a.IsValid():
		return false
	case a.Is4():
		return isPublic4(a)
	case nat64.Contains(a):
		b := a.As16()
		return isPublic4(netip.AddrFrom4([4]byte(b[12:])))
	case !globalUnicast6.Contains(a):
		return false
	}
	for _, p := range nonPublic6 {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

func isPublic4(a netip.Addr) bool {
	if a.IsLoopback() || a.IsPrivate() || a.IsUnspecified() || a.IsLinkLocalUnicast() ||
		a.IsLinkLocalMulticast() || a.IsMulticast() {
		return false
	}
	for _, p := range nonPublic4 {
		if p.Contains(a) {
			return false
		}
	}
	return true
}
