package sandbox

import (
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/prereq"
)

// hostileAttack is one attack of the suite: a distinct mechanism by which
// a plugin tries to get out of its sandbox, starve the host, or reach
// another plugin. run performs it against a fresh env, asserts the exact
// refusal, and returns a one-line verdict; the suite then checks, for
// every attack, that no canary leaked, that nothing outside the roots
// changed and that legitimate calls still work on the same host.
type hostileAttack struct {
	name string
	// bwrap attacks need bubblewrap: they skip without it, unless
	// CI=true, where they fail.
	bwrap bool
	run   func(e *env) string
}

// hostileAttacks lists the suite; the attacks_*_test.go files define
// them.
func hostileAttacks() []hostileAttack {
	var all []hostileAttack
	for _, group := range [][]hostileAttack{fsAttacks(), fsBoundsAttacks(), execAttacks(), netAttacks(), computeAttacks(), abiAttacks(), registryAttacks(), promptAttacks(), moduleAttacks(), bwrapAttacks(), execIsoAttacks(), communityAttacks(), boundsAttacks()} {
		all = append(all, group...)
	}
	for _, group := range seamGroups {
		all = append(all, group()...)
	}
	return all
}

// seamGroups are the attacks on the seams between parts of the sandbox,
// where one fact is handled in two places (docs/SECURITY.md, "Seams").
// Each attacks_seams_*_test.go file adds its group from an init func, so
// the classes stay apart.
var seamGroups []func() []hostileAttack

type outcome struct {
	name, status, verdict string
}

// TestHostile runs every attack as TestHostile/<attack> and prints one
// line per attack with its verdict, then the count.
func TestHostile(t *testing.T) {
	attacks := hostileAttacks()
	seen := map[string]bool{}
	var mu sync.Mutex
	var outcomes []outcome
	for _, a := range attacks {
		if seen[a.name] {
			t.Fatalf("attack %q is listed twice", a.name)
		}
		seen[a.name] = true
		t.Run(a.name, func(t *testing.T) {
			o := outcome{name: a.name}
			t.Cleanup(func() {
				switch {
				case t.Failed():
					o.status = "FAIL"
				case t.Skipped():
					o.status = "SKIP"
				default:
					o.status = "PASS"
				}
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
			})
			if a.bwrap {
				requireBwrap(t, &o)
			}
			e := newEnv(t)
			o.verdict = a.run(e)
			e.finish()
		})
	}
	counts := map[string]int{}
	var b strings.Builder
	for _, o := range outcomes {
		counts[o.status]++
		fmt.Fprintf(&b, "HOSTILE %s: %s %s\n", o.name, o.status, o.verdict)
	}
	fmt.Fprintf(&b, "HOSTILE total: %d attacks, %d passed, %d failed, %d skipped", len(outcomes), counts["PASS"], counts["FAIL"], counts["SKIP"])
	t.Log("\n" + b.String())
}

func requireBwrap(t *testing.T, o *outcome) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		o.verdict = "(bubblewrap not installed)"
		prereq.Missing(t, "bubblewrap (bwrap) is not installed; the sandbox: true attacks need it: %v", err)
	}
}
