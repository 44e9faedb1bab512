package dsh

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/events"
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
func hostEventSubscribe(h Host, req []byte) ([]byte, hostfns.Status, string) {
	var r hostfns.SubscribeRequest
	if st, msg := Decode(req, &r); st != 0 {
		return nil, st, msg
	}
	if !h.Call().Init {
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
		if err := h.CheckWaterfallGrant(r.Event); err != nil {
			return nil, hostfns.ErrDenied, err.Error()
		}
	default:
		return nil, hostfns.ErrBadJSON, fmt.Sprintf("mode %q is not %q or %q", r.Mode, hostfns.ModeListen, hostfns.ModeWaterfall)
	}
	if !h.HasExport(hostfns.ExportEvent) {
		return nil, hostfns.ErrRule, needExport(hostfns.ExportEvent, "an event handler")
	}
	st, msg := h.Subscribe(r)
	return nil, st, msg
}

// EventNamespace is the prefix of the events a plugin may emit:
// "plugin:<name>/".
func EventNamespace(plugin string) string { return "plugin:" + plugin + "/" }

// hostEventEmit implements event_emit: an event in the plugin's own
// namespace, outside dsh_init and dsh_setup.
func hostEventEmit(h Host, req []byte) ([]byte, hostfns.Status, string) {
	var r hostfns.EmitRequest
	if st, msg := Decode(req, &r); st != 0 {
		return nil, st, msg
	}
	ns := EventNamespace(h.Name())
	if !strings.HasPrefix(r.Event, ns) || !validEventName(r.Event) || len(r.Event) == len(ns) {
		return nil, hostfns.ErrDenied, fmt.Sprintf("plugin %q may emit only its own events, named %s<event>; not %q", h.Name(), ns, r.Event)
	}
	if h.Call().Init || h.Call().Setup {
		return nil, hostfns.ErrDenied, "events cannot be emitted during dsh_init or dsh_setup"
	}
	payload := json.RawMessage(r.Payload)
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	}
	if err := h.Emit(r.Event, payload); err != nil {
		var denied *DeniedError
		if errors.As(err, &denied) {
			return nil, hostfns.ErrDenied, err.Error()
		}
		if h.Stopped() != nil {
			return nil, hostfns.ErrCanceled, err.Error()
		}
		return nil, hostfns.ErrInternal, err.Error()
	}
	return nil, 0, ""
}
