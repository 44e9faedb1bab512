package config

import (
	"fmt"
	"strings"
)

// MaxSessionEventType bounds a session event type's length.
const MaxSessionEventType = 64

// coreSessionEvents are the session event types that shape the model's
// history or a turn's structure. Only the agent loop writes them; no
// grant can give them to a plugin. An entry ending in "/" covers every
// type under it.
var coreSessionEvents = []string{
	"session", "user/message", "assistant/", "tool/", "turn/", "step/",
	"context/message", "steering/message", "compact/",
}

// CheckSessionEventType returns why t cannot be granted in
// grants.session_events, or "" when it can: a name such as "todo/write"
// (1 to 64 bytes of [a-z0-9_./-], with one slash or more between
// non-empty parts) that is not a core type.
func CheckSessionEventType(t string) string {
	if t == "" || len(t) > MaxSessionEventType {
		return fmt.Sprintf("session event type %q: want 1 to %d bytes", t, MaxSessionEventType)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '/') {
			return fmt.Sprintf("session event type %q: unexpected character %q; want lower-case letters, digits, _ . - and /", t, c)
		}
	}
	if !strings.Contains(t, "/") || strings.HasPrefix(t, "/") || strings.HasSuffix(t, "/") || strings.Contains(t, "//") {
		return fmt.Sprintf("session event type %q: want namespace/name, such as todo/write", t)
	}
	for _, core := range coreSessionEvents {
		if t == core || strings.HasSuffix(core, "/") && strings.HasPrefix(t, core) {
			return fmt.Sprintf("session event type %q is written only by the agent loop (it shapes the model's history or a turn) and cannot be granted", t)
		}
	}
	return ""
}
