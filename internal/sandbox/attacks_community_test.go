package sandbox

import (
	"strings"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/netguard"
)

// community loads testdata/guests/mcp-v1, a hyper-mcp v1 plugin on the
// official go-pdk, as plugin "community" with the workspace and ro grants.
func (e *env) community(grants ...string) *plugin.Plugin {
	e.t.Helper()
	path, err := guestbuild.Build("testdata/guests/mcp-v1")
	must(e.t, err)
	if !strings.HasPrefix(strings.Join(grants, " "), "limits:") {
		grants = append(grants, defaultLimits)
	}
	p, err := e.host.Load(e.ctx, e.spec("community", path, "", map[string]any{}, append([]string{e.fsGrant()}, grants...)...))
	e.recordErr(err)
	if err != nil {
		e.t.Fatalf("load the community plugin: %v", err)
	}
	if p.ABI() != plugin.ABIHyperMCPv1 {
		e.t.Fatalf("community plugin ABI %q", p.ABI())
	}
	return p
}

// communityAttacks are the attacks of an unmodified Extism (hyper-mcp)
// plugin: the same boundaries hold on our Extism kernel.
func communityAttacks() []hostileAttack {
	return []hostileAttack{
		{name: "community-path-escape", run: func(e *env) string {
			e.community()
			ok, err := e.call(e.main, "read_file", map[string]string{"path": e.ws + "/hello.txt"})
			if err != nil || ok.IsError || ok.Text != helloText {
				e.t.Fatalf("the granted file: %+v, %v", ok, err)
			}
			for _, path := range []string{e.ws + "/host-abs-link", e.ws + "/host-dir-link/secret.txt",
				e.outside + "/secret.txt", e.ws + "/" + e.rel + "/secret.txt"} {
				r, err := e.call(e.main, "read_file", map[string]string{"path": path})
				if err != nil || !r.IsError {
					e.t.Errorf("read %s: %+v, %v; want the guest's own error result", path, r, err)
				}
			}
			return "refused by the fs jail (symlinks, absolute and .. paths), as for dsh plugins"
		}},
		{name: "community-redirect-to-private-address", run: func(e *env) string {
			s := e.servers()
			e.community(netGrant(hostPort(s.allowed), ", allow_private: true"))
			ok, err := e.call(e.main, "fetch", map[string]string{"url": s.allowed.URL + "/"})
			if err != nil || ok.Text != "200 hello from the allowed host" {
				e.t.Fatalf("the granted host: %+v, %v", ok, err)
			}
			// The allowed host redirects to the canary, a loopback address
			// the grant does not list.
			_, err = e.call(e.main, "fetch", map[string]string{"url": s.allowed.URL + "/redirect"})
			e.wantErr("redirect", err, netguard.ErrHostNotAllowed, "http_request: netguard: fetch "+s.allowed.URL+"/redirect")
			s.wantNoCanaryHit(e)
			return "refused at the redirect hop by netguard; the call failed, the host went on"
		}},
		{name: "community-spin", run: func(e *env) string {
			e.community(loopLimits)
			// The instance is made first: the bound is the spin's.
			if _, err := e.call(e.main, "echo", map[string]string{"text": "x"}); err != nil {
				e.t.Fatalf("make the instance: %v", err)
			}
			start := time.Now()
			_, err := e.call(e.main, "spin", map[string]string{})
			e.wantErr("spin", err, plugin.ErrComputeBudget, "exceeded its compute budget")
			if took := time.Since(start); took > killLimit {
				e.t.Errorf("spin ran %v, want under %v", took, killLimit)
			}
			return "killed by the compute budget"
		}},
		{name: "community-memory-growth", run: func(e *env) string {
			e.community(limits("5s", "5s", "32MiB"))
			_, err := e.call(e.main, "grow", map[string]string{})
			e.wantErr("grow", err, plugin.ErrTrap, "")
			e.wantLog("out of memory")
			return "trapped at the 32 MiB limit; the instance was discarded"
		}},
	}
}
