package dsh

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/pluginstate"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

// Quotas on session_event_append, per plugin and session.
const (
	MaxSessionEventBytes = 256 << 10 // one event's payload
	MaxSessionEvents     = 1000      // events
	MaxSessionEventTotal = 8 << 20   // payload bytes of all events
)

// SessionQuota is what a plugin appended to one session so far.
type SessionQuota struct {
	mu     sync.Mutex
	events int
	bytes  int64
}

// take counts an event of n bytes, or refuses it past the quotas.
func (q *SessionQuota) take(n int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.events >= MaxSessionEvents || q.bytes+int64(n) > MaxSessionEventTotal {
		return false
	}
	q.events++
	q.bytes += int64(n)
	return true
}

// give uncounts an event of n bytes that was not recorded.
func (q *SessionQuota) give(n int) {
	q.mu.Lock()
	q.events--
	q.bytes -= int64(n)
	q.mu.Unlock()
}

// hostSessionEventAppend implements session_event_append: an event of a
// granted type, recorded in the calling agent's session within quotas.
func hostSessionEventAppend(h Host, req []byte) ([]byte, hostfns.Status, string) {
	var r hostfns.SessionEventRequest
	if st, msg := Decode(req, &r); st != 0 {
		return nil, st, msg
	}
	if h.Call().Init || h.Call().Setup {
		return nil, hostfns.ErrDenied, "session events cannot be appended during dsh_init or dsh_setup"
	}
	if msg := config.CheckSessionEventType(r.Type); msg != "" {
		return nil, hostfns.ErrDenied, msg
	}
	g := h.Grants()
	if g == nil || !slices.Contains(g.SessionEvents, r.Type) {
		return nil, hostfns.ErrDenied, fmt.Sprintf("plugin %q is not granted session event %q (add it under grants.session_events)", h.Name(), r.Type)
	}
	if len(r.Data) > MaxSessionEventBytes {
		return nil, hostfns.ErrTooLarge, fmt.Sprintf("event data of %d bytes exceeds %d", len(r.Data), MaxSessionEventBytes)
	}
	if err := checkSessionEventData(r.Type, r.Data); err != nil {
		return nil, hostfns.ErrBadJSON, fmt.Sprintf("%s data: %v", r.Type, err)
	}
	sink := pluginstate.SessionEvents(h.Context())
	if h.Facts() == nil || sink == nil {
		return nil, hostfns.ErrDenied, "this call belongs to no agent session to record the event in"
	}
	q := h.SessionQuota()
	if !q.take(len(r.Data)) {
		return nil, hostfns.ErrLimit, fmt.Sprintf("plugin %q reached its quota of session events for this session (%d events, %d bytes)", h.Name(), MaxSessionEvents, MaxSessionEventTotal)
	}
	if err := sink(r.Type, r.Data); err != nil {
		q.give(len(r.Data))
		return nil, hostfns.ErrInternal, fmt.Sprintf("recording %s: %v", r.Type, err)
	}
	return nil, 0, ""
}

// checkSessionEventData checks an appended event's payload: a JSON object,
// in the shape the reference harness gives the types it knows.
func checkSessionEventData(typ string, data json.RawMessage) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return fmt.Errorf("want a JSON object")
	}
	switch typ {
	case "todo/write":
		var v struct {
			Todos *[]struct {
				Content *string `json:"content"`
				Status  *string `json:"status"`
			} `json:"todos"`
		}
		d := json.NewDecoder(bytes.NewReader(trimmed))
		d.DisallowUnknownFields()
		if err := d.Decode(&v); err != nil {
			return fmt.Errorf("want {\"todos\": [{\"content\", \"status\"}]}: %v", err)
		}
		if v.Todos == nil {
			return fmt.Errorf("missing todos")
		}
		for i, t := range *v.Todos {
			if t.Content == nil || strings.TrimSpace(*t.Content) == "" {
				return fmt.Errorf("todos[%d]: content must be a non-empty string", i)
			}
			if t.Status == nil {
				return fmt.Errorf("todos[%d]: missing status", i)
			}
			switch *t.Status {
			case "pending", "in_progress", "completed":
			default:
				return fmt.Errorf("todos[%d]: status %q; want pending, in_progress or completed", i, *t.Status)
			}
		}
	}
	return nil
}
