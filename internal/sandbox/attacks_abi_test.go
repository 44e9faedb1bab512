package sandbox

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
)

// wantAll asserts that every step of r has status st and a message
// containing msg.
func (e *env) wantAll(r report, st hostfns.Status, msg string) {
	e.t.Helper()
	if len(r.Steps) == 0 {
		e.t.Fatalf("empty report")
	}
	for _, s := range r.Steps {
		e.wantStatus(r, s.Op, st, msg)
	}
}

func abiAttacks() []hostileAttack {
	return []hostileAttack{
		{name: "abi-out-of-bounds-pointers", run: func(e *env) string {
			e.attacker(nil)
			r := e.attack(e.main, attackArgs{Attack: "abi-oob"})
			for _, op := range []string{"request past the end", "request at 0xffffff00", "request wraps around"} {
				e.wantStatus(r, op, hostfns.ErrBadPointer, "log: request 0x")
				e.wantStatus(r, op, hostfns.ErrBadPointer, "is outside guest memory")
			}
			for _, op := range []string{"out buffer past the end", "out capacity 4 GiB", "out buffer wraps around"} {
				e.wantStatus(r, op, hostfns.ErrBadPointer, "log: out buffer 0x")
			}
			return "refused (bad pointer), for requests and out buffers alike"
		}},
		{name: "abi-overlapping-pointers", run: func(e *env) string {
			e.attacker(nil)
			e.wantAll(e.attack(e.main, attackArgs{Attack: "abi-overlap"}), hostfns.ErrBadPointer, "overlaps the out buffer")
			return "refused (bad pointer: request and out buffer overlap)"
		}},
		{name: "abi-invalid-utf8", run: func(e *env) string {
			e.attacker(nil)
			e.wantAll(e.attack(e.main, attackArgs{Attack: "abi-utf8"}), hostfns.ErrBadUTF8, "request is not valid UTF-8")
			return "refused (bad UTF-8) before any decoding"
		}},
		{name: "abi-json-deep-nesting", run: func(e *env) string {
			e.attacker(nil)
			r := e.attack(e.main, attackArgs{Attack: "abi-json-deep", N: 600_000})
			e.wantAll(r, hostfns.ErrBadJSON, "exceeded max depth")
			return "refused (bad JSON: exceeded max depth) for 600,000 levels of nesting"
		}},
		{name: "abi-json-huge-array", run: func(e *env) string {
			e.attacker(nil)
			r := e.attack(e.main, attackArgs{Attack: "abi-json-wide", N: 1_900_000})
			e.wantStatus(r, "state_set array of 1900000", hostfns.ErrTooLarge, fmt.Sprintf("value of 3800001 bytes exceeds %d", 1<<20))
			return "refused (too large: a 3.8 MB value against the 1 MiB state cap)"
		}},
		{name: "abi-oversize-request", run: func(e *env) string {
			e.attacker(nil)
			r := e.attack(e.main, attackArgs{Attack: "abi-oversize"})
			e.wantStatus(r, "log request of MaxRequestBytes+1", hostfns.ErrTooLarge, fmt.Sprintf("log: request of %d bytes exceeds the limit of %d", hostfns.MaxRequestBytes+1, hostfns.MaxRequestBytes))
			e.wantStatus(r, "request length 0xffffffff", hostfns.ErrTooLarge, "request of 4294967295 bytes exceeds the limit")
			return "refused (too large) before the host reads it"
		}},
		{name: "abi-take-misuse", run: func(e *env) string {
			e.attacker(nil)
			r := e.attack(e.main, attackArgs{Attack: "abi-take"})
			get := r.step(e.t, "state_get into 16 bytes")
			if get.Status != "ok" || get.N <= 16 {
				e.t.Fatalf("state_get: %+v", get)
			}
			for op, want := range map[string]int64{
				"take with nothing pending": -1, "take with the wrong length": -1, "take past the end of memory": -1,
				"take wrapping around": -1, "take with the right length": get.N, "take again": -1,
			} {
				if s := r.step(e.t, op); s.N != want {
					e.t.Errorf("%s returned %d, want %d", op, s.N, want)
				}
			}
			return "refused (-1) for no pending result, a wrong length or a bad pointer; the pending result survives"
		}},
		{name: "state-key-limits", run: func(e *env) string {
			e.attacker(nil)
			r := e.attack(e.main, attackArgs{Attack: "state-keys"})
			e.wantAll(r, hostfns.ErrBadJSON, "key must be 1 to 256 bytes")
			return "refused (bad JSON: key must be 1 to 256 bytes)"
		}},
		{name: "state-flood", run: func(e *env) string {
			// Encoding 1 MiB requests is real guest work: give it room, so
			// a loaded machine measures the host's limit, not the budget.
			e.attacker(nil, limits("30s", "5s", "64MiB"))
			r := e.attack(e.main, attackArgs{Attack: "state-flood", N: 64})
			s := r.Steps[0]
			if s.Code != uint32(hostfns.ErrLimit) || !strings.Contains(s.Msg, "plugin state full") || s.Op != "state_set after 16 MiB" {
				e.t.Errorf("state flood: %+v", s)
			}
			return "refused (limit reached) at 16 MiB per plugin and session"
		}},
		{name: "env-not-granted", run: func(e *env) string {
			e.attacker(nil, "env: ["+grantedEnv+"]")
			r := e.attack(e.main, attackArgs{Attack: "env-get", Names: []string{canaryEnv, "PATH", "", grantedEnv}})
			for _, n := range []string{canaryEnv, "PATH", ""} {
				e.wantStatus(r, "env_get "+n, hostfns.ErrDenied, fmt.Sprintf("environment variable %q is not granted to plugin \"attacker\" (grants.env)", n))
			}
			var got hostfns.EnvGetResponse
			if s := r.step(e.t, "env_get "+grantedEnv); s.Status != "ok" || json.Unmarshal([]byte(s.Data), &got) != nil || !got.Found || got.Value != "visible" {
				e.t.Errorf("the granted variable: %+v", s)
			}
			return "refused (denied) for every variable not in grants.env"
		}},
		{name: "env-wasi-environ", run: func(e *env) string {
			e.attacker(nil, "env: ["+grantedEnv+"]")
			r := e.attack(e.main, attackArgs{Attack: "env-wasi", Names: []string{canaryEnv, "PATH", "HOME", grantedEnv}})
			if s := r.step(e.t, "os.Environ"); s.Data != grantedEnv+"=visible" {
				e.t.Errorf("the guest's environment: %q", s.Data)
			}
			for _, n := range []string{canaryEnv, "PATH", "HOME"} {
				if s := r.step(e.t, "os.LookupEnv "+n); s.N != 0 {
					e.t.Errorf("%s is visible: %+v", n, s)
				}
			}
			return "the WASI environment holds only granted variables"
		}},
	}
}
