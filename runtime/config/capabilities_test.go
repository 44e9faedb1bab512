package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
)

// Capabilities is a plugin's declared needs with its name, as these tests
// write them; declared gives Grants.Check its arguments.
type Capabilities struct {
	Plugin        string
	FS            []FSCapability
	Exec          bool
	Net           []string
	Env           []string
	SessionEvents []string
}

// FSCapability is one declared fs need.
type FSCapability struct {
	Path string
	Mode FSMode
}

func (c Capabilities) declared() (string, hostfns.Capabilities) {
	h := hostfns.Capabilities{Exec: c.Exec, Net: c.Net, Env: c.Env, SessionEvents: c.SessionEvents}
	for _, f := range c.FS {
		h.FS = append(h.FS, hostfns.FSNeed{Path: f.Path, Mode: string(f.Mode)})
	}
	return c.Plugin, h
}

func TestCheck(t *testing.T) {
	g := Grants{
		FS: []FSGrant{
			{Path: Workspace, Mode: ModeRW},
			{Path: "/data", Mode: ModeRO},
			{Path: "/srv/app", Mode: ModeRW},
		},
		Exec: ExecGrant{Allowed: false},
		Net:  NetGrant{AllowedHosts: []string{"api.github.com", "*.githubusercontent.com", "pinned.test:8443"}},
		Env:  []string{"GITHUB_TOKEN"},
	}
	tests := []struct {
		name string
		caps Capabilities
		want []string // each a full error line; none means granted
	}{
		{"nothing", Capabilities{Plugin: "x"}, nil},
		{"all granted", Capabilities{
			Plugin: "x",
			FS: []FSCapability{
				{Path: Workspace, Mode: ModeRW}, {Path: Workspace}, {Path: "/data"}, {Path: "/data/sub/file"},
				{Path: "/srv/app/logs", Mode: ModeRW}, {Path: "/srv/app"},
			},
			Net: []string{"api.github.com", "raw.githubusercontent.com", "*.githubusercontent.com", "pinned.test:8443"},
			Env: []string{"GITHUB_TOKEN"},
		}, nil},
		{"net host", Capabilities{Plugin: "x", Net: []string{"api.example.com"}},
			[]string{`plugin "x" needs grant net.allowed_hosts "api.example.com": add under grants.net.allowed_hosts: - api.example.com`}},
		{"net apex not covered by wildcard", Capabilities{Plugin: "x", Net: []string{"githubusercontent.com"}},
			[]string{`plugin "x" needs grant net.allowed_hosts "githubusercontent.com": add under grants.net.allowed_hosts: - githubusercontent.com`}},
		{"net wildcard quoted", Capabilities{Plugin: "x", Net: []string{"*.github.com"}},
			[]string{`plugin "x" needs grant net.allowed_hosts "*.github.com": add under grants.net.allowed_hosts: - '*.github.com'`}},
		{"net any port vs pinned port", Capabilities{Plugin: "x", Net: []string{"pinned.test"}},
			[]string{`plugin "x" needs grant net.allowed_hosts "pinned.test": add under grants.net.allowed_hosts: - pinned.test`}},
		{"fs path", Capabilities{Plugin: "y", FS: []FSCapability{{Path: "/etc"}}},
			[]string{`plugin "y" needs grant fs "/etc (ro)": add under grants.fs: - {path: /etc, mode: ro}`}},
		{"fs sibling prefix is not ancestor", Capabilities{Plugin: "y", FS: []FSCapability{{Path: "/database"}}},
			[]string{`plugin "y" needs grant fs "/database (ro)": add under grants.fs: - {path: /database, mode: ro}`}},
		{"fs dotdot escape", Capabilities{Plugin: "y", FS: []FSCapability{{Path: "/data/../etc"}}},
			[]string{`plugin "y" needs grant fs "/etc (ro)"`}},
		{"fs rw over ro", Capabilities{Plugin: "y", FS: []FSCapability{{Path: "/data/out", Mode: ModeRW}}},
			[]string{`plugin "y" needs grant fs "/data/out (rw)": it is granted read-only; set mode: rw on its grants.fs entry, or add under grants.fs: - {path: /data/out, mode: rw}`}},
		{"fs absolute not covered by workspace", Capabilities{Plugin: "y", FS: []FSCapability{{Path: "/home/u/proj"}}},
			[]string{`plugin "y" needs grant fs "/home/u/proj (ro)"`}},
		{"exec", Capabilities{Plugin: "z", Exec: true},
			[]string{`plugin "z" needs grant exec: add under grants.exec: allowed: true`}},
		{"env", Capabilities{Plugin: "z", Env: []string{"AWS_SECRET_ACCESS_KEY"}},
			[]string{`plugin "z" needs grant env "AWS_SECRET_ACCESS_KEY": add under grants.env: - AWS_SECRET_ACCESS_KEY`}},
		{"several at once", Capabilities{Plugin: "w", Exec: true, Env: []string{"A"}, Net: []string{"b.test"}},
			[]string{
				`plugin "w" needs grant exec: add under grants.exec: allowed: true`,
				`plugin "w" needs grant net.allowed_hosts "b.test": add under grants.net.allowed_hosts: - b.test`,
				`plugin "w" needs grant env "A": add under grants.env: - A`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := g.Check(tt.caps.declared())
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrNotGranted) {
				t.Fatalf("Check = %v, want ErrNotGranted", err)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("Check gave %d errors, want %d:\n%v", len(lines), len(tt.want), err)
			}
			for i, want := range tt.want {
				if !strings.HasPrefix(lines[i], want) {
					t.Errorf("error %d:\n%s\nwant prefix:\n%s", i, lines[i], want)
				}
			}
			var ng *NotGrantedError
			if !errors.As(err, &ng) || ng.Plugin != tt.caps.Plugin {
				t.Errorf("errors.As(*NotGrantedError) = %+v", ng)
			}
		})
	}
}

func TestCheckExecGranted(t *testing.T) {
	if err := (Grants{Exec: ExecGrant{Allowed: true}}).Check(Capabilities{Plugin: "x", Exec: true}.declared()); err != nil {
		t.Errorf("Check = %v", err)
	}
}

func TestCheckInvalidDeclarations(t *testing.T) {
	tests := []Capabilities{
		{Plugin: "x", FS: []FSCapability{{Path: "relative"}}},
		{Plugin: "x", FS: []FSCapability{{Path: "/d", Mode: "wx"}}},
		{Plugin: "x", Net: []string{"https://example.com"}},
		{Plugin: "x", Env: []string{"A=B"}},
	}
	for _, c := range tests {
		err := (Grants{}).Check(c.declared())
		if !errors.Is(err, ErrInvalidCapabilities) {
			t.Errorf("Check(%+v) = %v, want ErrInvalidCapabilities", c, err)
		}
	}
}

func TestCheckFixLineParses(t *testing.T) {
	// The suggested YAML, pasted under its section, must grant the capability.
	c := Capabilities{Plugin: "x", Net: []string{"*.example.com:8443"}, FS: []FSCapability{{Path: "/var/lib/x y", Mode: ModeRW}}}
	err := (Grants{}).Check(c.declared())
	var fixes []string
	for _, line := range strings.Split(err.Error(), "\n") {
		_, fix, _ := strings.Cut(line, "- ")
		fixes = append(fixes, fix)
	}
	src := "source: x\ngrants:\n  fs:\n    - " + fixes[0] + "\n  net:\n    allowed_hosts:\n      - " + fixes[1] + "\n"
	e, lerr := Load("fix.yaml", []byte(src))
	if lerr != nil {
		t.Fatalf("suggested lines do not load:\n%s\n%v", src, lerr)
	}
	if err := e.Grants.Check(c.declared()); err != nil {
		t.Errorf("after applying the fix: %v", err)
	}
}
