package netguard

import (
	"errors"
	"testing"
)

func TestParseHostPattern(t *testing.T) {
	tests := []struct {
		in   string
		want string // canonical form; "" means the parse must fail
	}{
		{"api.example.com", "api.example.com"},
		{"API.Example.COM.", "api.example.com"},
		{"api.example.com:8443", "api.example.com:8443"},
		{"*.github.com", "*.github.com"},
		{"*.github.com:443", "*.github.com:443"},
		{"*", "*"},
		{"*:443", "*:443"},
		{"localhost", "localhost"},
		{"192.0.2.7", "192.0.2.7"},
		{"192.0.2.7:80", "192.0.2.7:80"},
		{"::1", "[::1]"},
		{"[2001:db8::1]:443", "[2001:db8::1]:443"},
		{"[::ffff:192.0.2.7]", "192.0.2.7"},
		{"under_score.example.com", "under_score.example.com"},
		{"", ""},
		{"https://example.com", ""},
		{"example.com/path", ""},
		{"user@example.com", ""},
		{"api-*.example.com", ""},
		{"*example.com", ""},
		{"a.*.example.com", ""},
		{"**.example.com", ""},
		{"*.", ""},
		{"example.com:0", ""},
		{"example.com:65536", ""},
		{"example.com:08", ""},
		{"example.com:", ""},
		{"-bad.example.com", ""},
		{"bad-.example.com", ""},
		{"a..b", ""},
		{"bücher.example", ""},
		{"2130706433", ""},
		{"127.1", ""},
		{"0x7f.1", ""},
		{"[::1", ""},
		{"[::1]x", ""},
		{"[fe80::1%eth0]", ""},
		{"exa mple.com", ""},
	}
	for _, tt := range tests {
		p, err := ParseHostPattern(tt.in)
		if tt.want == "" {
			if err == nil {
				t.Errorf("ParseHostPattern(%q) = %v, want an error", tt.in, p)
			} else if !errors.Is(err, ErrInvalidPattern) {
				t.Errorf("ParseHostPattern(%q) error %v is not ErrInvalidPattern", tt.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseHostPattern(%q): %v", tt.in, err)
			continue
		}
		if got := p.String(); got != tt.want {
			t.Errorf("ParseHostPattern(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestAllowlistAllows(t *testing.T) {
	list, err := ParseAllowlist([]string{"api.example.com", "*.github.com", "pinned.test:8443", "192.0.2.7", "[2001:db8::1]:443"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		host, port string
		want       bool
	}{
		{"api.example.com", "443", true},
		{"API.EXAMPLE.COM.", "80", true},
		{"api.example.com", "9999", true},
		{"example.com", "443", false},
		{"x.api.example.com", "443", false},
		{"api.github.com", "443", true},
		{"a.b.github.com", "443", true},
		{"github.com", "443", false},
		{"evilgithub.com", "443", false},
		{"github.com.evil.test", "443", false},
		{"pinned.test", "8443", true},
		{"pinned.test", "443", false},
		{"192.0.2.7", "80", true},
		{"::ffff:192.0.2.7", "80", true},
		{"192.0.2.8", "80", false},
		{"2001:db8::1", "443", true},
		{"2001:db8::1", "80", false},
		{"", "80", false},
		{"2130706433", "80", false},
	}
	for _, tt := range tests {
		if got := list.Allows(tt.host, tt.port); got != tt.want {
			t.Errorf("Allows(%q, %q) = %v, want %v", tt.host, tt.port, got, tt.want)
		}
	}
	if (Allowlist{}).Allows("example.com", "443") {
		t.Error("empty allowlist allowed a host")
	}
}

func TestWildcardNeverMatchesIP(t *testing.T) {
	list, err := ParseAllowlist([]string{"*", "*.0.1"})
	if err == nil {
		// "*.0.1" has a numeric top-level label and must be refused.
		t.Fatalf("ParseAllowlist accepted a numeric suffix: %v", list)
	}
	list, err = ParseAllowlist([]string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	if !list.Allows("anything.example", "443") {
		t.Error(`"*" did not allow a host name`)
	}
	if list.Allows("127.0.0.1", "80") || list.Allows("::1", "80") {
		t.Error(`"*" allowed an IP literal`)
	}
}

func TestAllowlistCovers(t *testing.T) {
	list, err := ParseAllowlist([]string{"api.example.com", "*.github.com", "pinned.test:8443", "192.0.2.7"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		declared string
		want     bool
	}{
		{"api.example.com", true},
		{"api.example.com:443", true},
		{"other.example.com", false},
		{"api.github.com", true},
		{"*.github.com", true},
		{"*.api.github.com", true},
		{"github.com", false},
		{"*", false},
		{"pinned.test:8443", true},
		{"pinned.test", false}, // any port is more than port 8443
		{"192.0.2.7", true},
		{"192.0.2.7:80", true},
		{"192.0.2.8", false},
	}
	for _, tt := range tests {
		got, err := list.Covers(tt.declared)
		if err != nil {
			t.Errorf("Covers(%q): %v", tt.declared, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Covers(%q) = %v, want %v", tt.declared, got, tt.want)
		}
	}
	all, _ := ParseAllowlist([]string{"*"})
	if ok, _ := all.Covers("*.anything.example"); !ok {
		t.Error(`"*" does not cover a wildcard name`)
	}
	if ok, _ := all.Covers("192.0.2.7"); ok {
		t.Error(`"*" covers an IP literal`)
	}
	if _, err := list.Covers("bad host"); !errors.Is(err, ErrInvalidPattern) {
		t.Errorf("Covers(bad) error = %v, want ErrInvalidPattern", err)
	}
}
