package agent

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/dsh-wasm/dsh-wasm/internal/pluginstate"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// PluginStateChange is the payload of a plugin/state event
// (session.TypePluginState).
type PluginStateChange struct {
	Plugin string          `json:"plugin"`
	Key    string          `json:"key"`
	Value  json.RawMessage `json:"value"`
}

// EventType implements session.Payload.
func (PluginStateChange) EventType() string { return session.TypePluginState }

// PluginState is a pluginstate.Store that persists what plugins keep per
// session in that session's log, so that a resumed session finds its
// plugins' state (a todo list, the versions of the files read) where it
// was. Give it to the plugin host (plugin.Options.State) and to every
// agent (Options.State). State of sessions no agent has attached is kept
// in memory only.
type PluginState struct {
	mem      *pluginstate.Memory
	mu       sync.Mutex
	sessions map[string]*session.Session
}

var _ pluginstate.LimitedStore = (*PluginState)(nil)

// NewPluginState returns an empty store.
func NewPluginState() *PluginState {
	return &PluginState{mem: pluginstate.NewMemory(), sessions: map[string]*session.Session{}}
}

// Get implements pluginstate.Store.
func (s *PluginState) Get(pluginName, sessionID, key string) (json.RawMessage, bool, error) {
	return s.mem.Get(pluginName, sessionID, key)
}

// Set implements pluginstate.Store: it stores the change and appends it to
// the session's log, flushed with the turn it happened in.
func (s *PluginState) Set(pluginName, sessionID, key string, value json.RawMessage) error {
	return s.SetWithin(pluginName, sessionID, key, value, pluginstate.MaxBytes)
}

// SetWithin implements pluginstate.LimitedStore: Set under the plugin's
// own bound (grants.limits.state_bytes).
func (s *PluginState) SetWithin(pluginName, sessionID, key string, value json.RawMessage, limit int64) error {
	if err := s.mem.SetWithin(pluginName, sessionID, key, value, limit); err != nil {
		return err
	}
	s.mu.Lock()
	sess := s.sessions[sessionID]
	s.mu.Unlock()
	if sess == nil {
		return nil
	}
	v := value
	if v == nil {
		v = json.RawMessage("null")
	}
	if _, err := sess.Append(session.NewEvent(PluginStateChange{Plugin: pluginName, Key: key, Value: v})); err != nil {
		return fmt.Errorf("record plugin state: %w", err)
	}
	return nil
}

// attach restores the state recorded in sess and records later changes
// there.
func (s *PluginState) attach(sess *session.Session) error {
	id := sess.Header().ID
	for _, e := range sess.Events() {
		if e.Type != session.TypePluginState {
			continue
		}
		var c PluginStateChange
		if err := json.Unmarshal(e.Data, &c); err != nil {
			return fmt.Errorf("session %s: event %d: %s: %w", id, e.Seq, session.TypePluginState, err)
		}
		v := c.Value
		if string(v) == "null" {
			v = nil
		}
		if err := s.mem.Set(c.Plugin, id, c.Key, v); err != nil {
			return fmt.Errorf("session %s: event %d: %w", id, e.Seq, err)
		}
	}
	s.mu.Lock()
	s.sessions[id] = sess
	s.mu.Unlock()
	return nil
}

// detach stops recording for the session.
func (s *PluginState) detach(sess *session.Session) {
	s.mu.Lock()
	if s.sessions[sess.Header().ID] == sess {
		delete(s.sessions, sess.Header().ID)
	}
	s.mu.Unlock()
}
