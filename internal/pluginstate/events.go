package pluginstate

import (
	"context"
	"encoding/json"
)

// SessionEventSink records an event a plugin appended, in the session of
// the agent the call belongs to. The host has checked the type against
// the plugin's grants and the payload's shape; the sink may still refuse
// (a closed session, say), and its error reaches the plugin.
type SessionEventSink func(eventType string, data json.RawMessage) error

type sinkKey struct{}

// WithSessionEvents returns ctx carrying sink: session_event_append calls
// made under ctx record their events through it. The agent loop puts its
// session's sink on the context of the calls it makes for the agent; a
// call without one cannot append.
func WithSessionEvents(ctx context.Context, sink SessionEventSink) context.Context {
	return context.WithValue(ctx, sinkKey{}, sink)
}

// SessionEvents returns the sink WithSessionEvents put on ctx, or nil.
func SessionEvents(ctx context.Context) SessionEventSink {
	s, _ := ctx.Value(sinkKey{}).(SessionEventSink)
	return s
}
