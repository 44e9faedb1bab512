package mcpserver

import (
	"context"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type sessionKey struct{}

// withSession marks ctx as work done for an MCP session, so that the
// plugin logs written under it reach that session.
func withSession(ctx context.Context, ss *mcp.ServerSession) context.Context {
	return context.WithValue(ctx, sessionKey{}, ss)
}

// LogHandler is the slog.Handler a served deployment logs through. Every
// record goes to the next handler (standard error) when it is enabled
// there; a record logged during a session's call (a plugin's log, with
// its "plugin" attribute) also goes to that session as an MCP
// notifications/message, which the SDK drops below the level the client
// chose with logging/setLevel (and all of them until it chose one).
type LogHandler struct {
	next   slog.Handler
	logger string // the "plugin" attribute, the MCP logger name
	attrs  []slog.Attr
}

// NewLogHandler returns a handler writing to next and to the sessions.
func NewLogHandler(next slog.Handler) *LogHandler { return &LogHandler{next: next} }

// Enabled is true at every level: a session may want debug records that
// standard error does not.
func (h *LogHandler) Enabled(context.Context, slog.Level) bool { return true }

// Handle writes r to standard error if enabled there, and to the session
// ctx belongs to, if any.
func (h *LogHandler) Handle(ctx context.Context, r slog.Record) error {
	var err error
	if h.next.Enabled(ctx, r.Level) {
		err = h.next.Handle(ctx, r)
	}
	ss, _ := ctx.Value(sessionKey{}).(*mcp.ServerSession)
	if ss == nil {
		return err
	}
	data := map[string]any{"msg": r.Message}
	add := func(a slog.Attr) bool {
		if a.Key != "plugin" {
			data[a.Key] = a.Value.Resolve().Any()
		}
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	// A failed notification (the client gone) must not fail the plugin.
	_ = ss.Log(ctx, &mcp.LoggingMessageParams{Level: mcpLevel(r.Level), Logger: h.logger, Data: data})
	return err
}

// WithAttrs keeps the attributes for both destinations; "plugin" names
// the MCP logger.
func (h *LogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := &LogHandler{next: h.next.WithAttrs(attrs), logger: h.logger, attrs: append(append([]slog.Attr(nil), h.attrs...), attrs...)}
	for _, a := range attrs {
		if a.Key == "plugin" {
			c.logger = "plugin " + a.Value.String()
		}
	}
	return c
}

// WithGroup groups on standard error; MCP data stays flat.
func (h *LogHandler) WithGroup(name string) slog.Handler {
	return &LogHandler{next: h.next.WithGroup(name), logger: h.logger, attrs: h.attrs}
}

func mcpLevel(l slog.Level) mcp.LoggingLevel {
	switch {
	case l >= slog.LevelError:
		return "error"
	case l >= slog.LevelWarn:
		return "warning"
	case l >= slog.LevelInfo:
		return "info"
	}
	return "debug"
}
