package config

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/internal/events"
)

// Default prompt placement: after the deployment's persona (order 0), at
// order 1 and above.
const (
	DefaultPromptOrderLo = 1
	DefaultPromptOrderHi = math.MaxInt
)

// PromptGrant says where a plugin's prompt sections may sit.
type PromptGrant struct {
	// Order is the inclusive range [lo, hi] of section orders the plugin
	// may use; nil means [DefaultPromptOrderLo, DefaultPromptOrderHi].
	// The harness's identity sits at -100 and the persona at 0, so a
	// range reaching 0 or below lets the plugin's text come before them.
	Order *[2]int `yaml:"order,omitempty"`
}

// OrderRange returns the granted order range, defaults applied.
func (p PromptGrant) OrderRange() (lo, hi int) {
	if p.Order == nil {
		return DefaultPromptOrderLo, DefaultPromptOrderHi
	}
	return p.Order[0], p.Order[1]
}

// CheckOrder refuses an order outside the granted range, naming the
// grant.
func (p PromptGrant) CheckOrder(section string, order int) error {
	lo, hi := p.OrderRange()
	if order >= lo && order <= hi {
		return nil
	}
	return fmt.Errorf("%w: section %q at order %d is outside grants.prompt.order %s (the harness's identity is at -100, the persona at 0); only the operator can widen the range",
		ErrNotGranted, section, order, FormatOrderRange(lo, hi))
}

// FormatOrderRange writes a range as the config would: [1, max].
func FormatOrderRange(lo, hi int) string {
	f := func(v int) string {
		switch v {
		case math.MaxInt:
			return "max"
		case math.MinInt:
			return "min"
		}
		return fmt.Sprint(v)
	}
	return "[" + f(lo) + ", " + f(hi) + "]"
}

// GrantsEvent reports whether grants.events lists event.
func (g Grants) GrantsEvent(event string) bool { return slices.Contains(g.Events, event) }

// checkEventGrant vets one grants.events entry: a waterfall a plugin may
// join. Core events that are not waterfalls need no grant (listening is
// free), so naming one is a mistake worth reporting.
func checkEventGrant(s string) string {
	switch m := events.ModeOf(s); {
	case m == events.Waterfall:
		return ""
	case m != events.Any:
		return fmt.Sprintf("%s is a %s event, not a waterfall: listening needs no grant", s, m)
	}
	if s == "" || len(s) > 128 || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return fmt.Sprintf("event name %q must be 1 to 128 printable bytes", s)
	}
	return ""
}

func checkOrderRange(r *[2]int) string {
	if r != nil && r[0] > r[1] {
		return fmt.Sprintf("[%d, %d]: the low end is above the high end", r[0], r[1])
	}
	return ""
}
