package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/plugin/internal/abi/dsh"
)

func validEventName(s string) bool {
	if s == "" || len(s) > 128 || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f {
			return false
		}
	}
	return true
}

// hostEventSubscribe implements event_subscribe: during dsh_init, listen
// to an event or join a waterfall the plugin is granted.
func hostEventSubscribe(in *instance, cs *callState, req []byte) ([]byte, hostfns.Status, string) {
	var r hostfns.SubscribeRequest
	if st, msg := dsh.Decode(req, &r); st != 0 {
		return nil, st, msg
	}
	p := in.p
	if !cs.init {
		return nil, hostfns.ErrDenied, "subscriptions are made during dsh_init; a plugin's subscriptions are fixed for its load"
	}
	if !validEventName(r.Event) {
		return nil, hostfns.ErrRule, fmt.Sprintf("event name %q must be 1 to 128 printable bytes", r.Event)
	}
	if n, ok := events.Renamed(r.Event); ok {
		return nil, hostfns.ErrRule, fmt.Sprintf("event %s was renamed: subscribe to %s", r.Event, n)
	}
	if r.Mode == "" {
		r.Mode = hostfns.ModeListen
	}
	want := events.ModeOf(r.Event)
	switch r.Mode {
	case hostfns.ModeListen:
		if want == events.Waterfall {
			return nil, hostfns.ErrRule, fmt.Sprintf("%s is a waterfall event: subscribe with mode %q", r.Event, hostfns.ModeWaterfall)
		}
	case hostfns.ModeWaterfall:
		if want != events.Waterfall && want != events.Any {
			return nil, hostfns.ErrRule, fmt.Sprintf("%s is a %s event, not a waterfall", r.Event, want)
		}
		if err := p.checkWaterfallGrant(r.Event); err != nil {
			return nil, hostfns.ErrDenied, err.Error()
		}
	default:
		return nil, hostfns.ErrBadJSON, fmt.Sprintf("mode %q is not %q or %q", r.Mode, hostfns.ModeListen, hostfns.ModeWaterfall)
	}
	if st, msg := p.contrib.needExport(hostfns.ExportEvent, "an event handler"); st != 0 {
		return nil, st, msg
	}
	c := p.contrib
	c.mu.Lock()
	dup := slices.ContainsFunc(c.subs, func(s hostfns.SubscribeRequest) bool { return s.Event == r.Event })
	c.mu.Unlock()
	if dup {
		return nil, hostfns.ErrRule, fmt.Sprintf("already subscribed to %s", r.Event)
	}
	if r.Event == events.EventAssemble {
		hook := func(ctx context.Context, ac prompt.AssembleContext, next prompt.AssembleFunc) (*prompt.Assembly, error) {
			a, err := next(ctx, ac)
			if err != nil {
				return nil, err
			}
			return p.assembleHook(ctx, ac, a)
		}
		_, st, msg := c.register(cs, hookReg(r.Event, hook))
		if st != 0 {
			return nil, st, msg
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.subs {
		if s.Event == r.Event {
			return nil, hostfns.ErrRule, fmt.Sprintf("already subscribed to %s", r.Event)
		}
	}
	if r.Event != events.EventAssemble && c.count() >= p.limits.MaxRegistrations {
		return nil, hostfns.ErrLimit, fmt.Sprintf("plugin %q reached its limit of %d registrations", p.name, p.limits.MaxRegistrations)
	}
	c.subs = append(c.subs, r)
	return nil, 0, ""
}

// eventNamespace is the prefix of the events a plugin may emit:
// "plugin:<name>/".
func eventNamespace(plugin string) string { return "plugin:" + plugin + "/" }

// hostEventEmit implements event_emit: an event in the plugin's own
// namespace, outside dsh_init and dsh_setup.
func hostEventEmit(in *instance, cs *callState, req []byte) ([]byte, hostfns.Status, string) {
	var r hostfns.EmitRequest
	if st, msg := dsh.Decode(req, &r); st != 0 {
		return nil, st, msg
	}
	ns := eventNamespace(in.p.name)
	if !strings.HasPrefix(r.Event, ns) || !validEventName(r.Event) || len(r.Event) == len(ns) {
		return nil, hostfns.ErrDenied, fmt.Sprintf("plugin %q may emit only its own events, named %s<event>; not %q", in.p.name, ns, r.Event)
	}
	if cs.init || cs.setup {
		return nil, hostfns.ErrDenied, "events cannot be emitted during dsh_init or dsh_setup"
	}
	payload := json.RawMessage(r.Payload)
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	}
	if err := in.p.h.bus.Emit(cs.activeCtx(in), r.Event, payload); err != nil {
		if errors.Is(err, ErrDeadlock) {
			return nil, hostfns.ErrDenied, err.Error()
		}
		if cs.guard.Stopped() != nil {
			return nil, hostfns.ErrCanceled, err.Error()
		}
		return nil, hostfns.ErrInternal, err.Error()
	}
	return nil, 0, ""
}
