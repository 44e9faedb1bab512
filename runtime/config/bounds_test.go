package config

import (
	"strings"
	"testing"
	"time"
)

// TestBoundsKeys: the bounds of issue 9 decode strictly, with FILE:LINE
// errors, and take documented defaults.
func TestBoundsKeys(t *testing.T) {
	e, err := Load(file, []byte("source: x\ngrants:\n  net:\n    allowed_hosts: [a.test]\n    timeout: 2s\n  limits:\n    wall_timeout: 1m\n    host_bytes: 8MiB\n    prompt_bytes: 4KiB\n    log_bytes: 10KiB\n    state_bytes: 2MiB\n"))
	if err != nil {
		t.Fatal(err)
	}
	l := e.Grants.Limits
	if e.Grants.Net.Timeout != 2*time.Second || l.WallTimeout != time.Minute || l.HostBytes != 8*MiB || l.PromptBytes != 4*KiB || l.LogBytes != 10*KiB || l.StateBytes != 2*MiB {
		t.Errorf("decoded %+v, net %+v", l, e.Grants.Net)
	}
	if err := e.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}

	d, err := Load(file, []byte("source: x\n"))
	if err != nil {
		t.Fatal(err)
	}
	g := d.Grants
	if g.Net.Timeout != DefaultNetTimeout || g.Limits.WallTimeout != DefaultWallTimeout || g.Limits.HostBytes != DefaultHostBytes ||
		g.Limits.PromptBytes != DefaultPromptBytes || g.Limits.LogBytes != DefaultLogBytes || g.Limits.StateBytes != DefaultStateBytes {
		t.Errorf("defaults: %+v %+v", g.Limits, g.Net)
	}
	// The default wall-clock cap lets the longest command a grant allows
	// finish.
	x, err := Load(file, []byte("source: x\ngrants:\n  exec: {allowed: true, max_timeout: 1h}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := x.Grants.Limits.WallTimeout; got != time.Hour+WallSlack {
		t.Errorf("wall_timeout with max_timeout 1h = %v, want 1h1m", got)
	}

	for _, c := range []struct{ name, src, want string }{
		{"wall below call", "source: x\ngrants:\n  limits:\n    call_timeout: 10s\n    wall_timeout: 5s\n", "plugins.yaml:5: grants.limits.wall_timeout: 5s is shorter than call_timeout 10s"},
		{"wall below exec", "source: x\ngrants:\n  exec: {allowed: true, max_timeout: 5m}\n  limits:\n    wall_timeout: 1m\n", "plugins.yaml:5: grants.limits.wall_timeout: 1m0s is shorter than grants.exec.max_timeout 5m0s"},
		{"wall unitless", "source: x\ngrants:\n  limits:\n    wall_timeout: 5\n", "plugins.yaml:4: grants.limits.wall_timeout: duration 5 needs a unit"},
		{"host bytes small", "source: x\ngrants:\n  limits:\n    host_bytes: 1KiB\n", "plugins.yaml:4: grants.limits.host_bytes: 1024 bytes: must be at least 1048576"},
		{"prompt bytes huge", "source: x\ngrants:\n  limits:\n    prompt_bytes: 1GiB\n", "plugins.yaml:4: grants.limits.prompt_bytes: 1GiB exceeds the 16MiB maximum"},
		{"state bytes huge", "source: x\ngrants:\n  limits:\n    state_bytes: 2GiB\n", "plugins.yaml:4: grants.limits.state_bytes: 2GiB exceeds the 1GiB maximum"},
		{"log bytes zero", "source: x\ngrants:\n  limits:\n    log_bytes: 0\n", "plugins.yaml:4: grants.limits.log_bytes: 0 bytes: must be at least 1"},
		{"net timeout negative", "source: x\ngrants:\n  net:\n    timeout: -1s\n", "plugins.yaml:4: grants.net.timeout: -1s: must be positive"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(file, []byte(c.src))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error:\n%v\nwant it to contain:\n%s", err, c.want)
			}
		})
	}

	bad := Entry{Source: "x", Grants: Grants{Exec: ExecGrant{Allowed: true}, Limits: Limits{WallTimeout: time.Minute, PromptBytes: 32 * MiB}}}
	err = bad.Validate()
	for _, want := range []string{"grants.limits.wall_timeout: 1m0s is shorter than grants.exec.max_timeout 10m0s", "grants.limits.prompt_bytes: 32MiB exceeds"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want %q", err, want)
		}
	}
}
