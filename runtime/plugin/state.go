package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// StateStore keeps plugins' host-side state, scoped to (plugin, session).
// It outlives instances: an instance re-created after a trap, or a resumed
// session, finds its state where it left it. Values are JSON.
type StateStore interface {
	Get(plugin, session, key string) (json.RawMessage, bool, error)
	// Set stores value; a nil value deletes the key.
	Set(plugin, session, key string, value json.RawMessage) error
}

// ErrStateFull: a plugin's state for one session reached its size limit.
var ErrStateFull = errors.New("plugin state full")

// MaxStateBytes caps one plugin's state in one session.
const MaxStateBytes = 16 << 20

// MemoryState is an in-memory StateStore. OnSet, when set, is told of
// every change (the agent loop records them in the session so that resume
// restores them).
type MemoryState struct {
	mu    sync.Mutex
	data  map[[2]string]map[string]json.RawMessage
	OnSet func(plugin, session, key string, value json.RawMessage)
}

// NewMemoryState returns an empty in-memory store.
func NewMemoryState() *MemoryState {
	return &MemoryState{data: map[[2]string]map[string]json.RawMessage{}}
}

// Get implements StateStore.
func (m *MemoryState) Get(plugin, session, key string) (json.RawMessage, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.data[[2]string{plugin, session}][key]
	return slices.Clone(v), ok, nil
}

// Set implements StateStore.
func (m *MemoryState) Set(plugin, session, key string, value json.RawMessage) error {
	m.mu.Lock()
	k := [2]string{plugin, session}
	kv := m.data[k]
	if value == nil {
		delete(kv, key)
	} else {
		size := len(key) + len(value)
		for k2, v := range kv {
			if k2 != key {
				size += len(k2) + len(v)
			}
		}
		if size > MaxStateBytes {
			m.mu.Unlock()
			return fmt.Errorf("%w: plugin %q would hold %d bytes in session %q (limit %d)", ErrStateFull, plugin, size, session, MaxStateBytes)
		}
		if kv == nil {
			kv = map[string]json.RawMessage{}
			m.data[k] = kv
		}
		kv[key] = slices.Clone(value)
	}
	onSet := m.OnSet
	m.mu.Unlock()
	if onSet != nil {
		onSet(plugin, session, key, value)
	}
	return nil
}
