package netguard

import (
	"net/netip"
	"testing"
)

// TestIsPublicIPv6Forms: every IPv6 form that carries an IPv4 address is
// classified by that address or refused whole, and only 2000::/3, less its
// special blocks, is public.
func TestIsPublicIPv6Forms(t *testing.T) {
	tests := []struct {
		addr string
		want bool
		why  string
	}{
		// IPv4-compatible (deprecated): refused whatever it embeds.
		{"::7f00:1", false, "IPv4-compatible 127.0.0.1"},
		{"::a9fe:a9fe", false, "IPv4-compatible 169.254.169.254"},
		{"::a00:1", false, "IPv4-compatible 10.0.0.1"},
		{"::808:808", false, "IPv4-compatible 8.8.8.8 (the prefix is refused)"},
		// IPv4-mapped: classified by the IPv4 address.
		{"::ffff:127.0.0.1", false, "IPv4-mapped loopback"},
		{"::ffff:169.254.169.254", false, "IPv4-mapped metadata"},
		{"::ffff:8.8.8.8", true, "IPv4-mapped public"},
		// IPv4-translated (SIIT): refused.
		{"::ffff:0:7f00:1", false, "IPv4-translated 127.0.0.1"},
		{"::ffff:0:808:808", false, "IPv4-translated 8.8.8.8 (the prefix is refused)"},
		// Well-known NAT64: classified by the embedded IPv4 address.
		{"64:ff9b::7f00:1", false, "NAT64 127.0.0.1"},
		{"64:ff9b::a9fe:a9fe", false, "NAT64 169.254.169.254"},
		{"64:ff9b::c0a8:101", false, "NAT64 192.168.1.1"},
		{"64:ff9b::a00:1", false, "NAT64 10.0.0.1"},
		{"64:ff9b::808:808", true, "NAT64 8.8.8.8"},
		{"64:ff9b::1:808:808", false, "inside 64:ff9b::/48 but outside the /96"},
		// Local-use NAT64: the embedding is the operator's choice; refused.
		{"64:ff9b:1::7f00:1", false, "local-use NAT64"},
		{"64:ff9b:1:ffff::808:808", false, "local-use NAT64, public-looking"},
		// 6to4: refused.
		{"2002:7f00:1::1", false, "6to4 127.0.0.1"},
		{"2002:a9fe:a9fe::1", false, "6to4 169.254.169.254"},
		{"2002:808:808::1", false, "6to4 8.8.8.8 (the prefix is refused)"},
		// Teredo and the rest of the IETF protocol block: refused.
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", false, "Teredo"},
		{"2001:0:7f00:1::", false, "Teredo with a loopback server"},
		{"2001:2::1", false, "benchmarking"},
		{"2001:10::1", false, "ORCHID"},
		// Discard-only and other non-global blocks.
		{"100::1", false, "discard-only 100::/64"},
		{"100::ffff:7f00:1", false, "discard-only, IPv4-looking tail"},
		{"2001:db8::1", false, "documentation"},
		{"3fff::1", false, "documentation (RFC 9637)"},
		{"5f00::1", false, "SRv6 SIDs"},
		{"fc00::1", false, "unique local"},
		{"fd12:3456::1", false, "unique local"},
		{"fe80::1", false, "link local"},
		{"fec0::1", false, "deprecated site local"},
		{"ff02::1", false, "multicast"},
		{"ff0e::1", false, "global multicast"},
		{"::", false, "unspecified"},
		{"::1", false, "loopback"},
		{"4000::1", false, "unallocated, outside 2000::/3"},
		// Global unicast stays public.
		{"2606:4700::1111", true, "Cloudflare"},
		{"2001:4860:4860::8888", true, "Google (2001:4860::/32 is outside 2001::/23)"},
		{"2a00:1450:4001::1", true, "global unicast"},
		// IPv4 for comparison.
		{"192.88.99.1", false, "6to4 relay anycast"},
		{"8.8.8.8", true, "public IPv4"},
	}
	for _, tc := range tests {
		if got := isPublic(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("isPublic(%s) = %v, want %v (%s)", tc.addr, got, tc.want, tc.why)
		}
	}
}
