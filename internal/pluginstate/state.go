package pluginstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Store keeps plugins' host-side state, scoped to (plugin, session).
// It outlives instances: an instance re-created after a trap, or a resumed
// session, finds its state where it left it. Values are JSON.
type Store interface {
	Get(plugin, session, key string) (json.RawMessage, bool, error)
	// Set stores value; a nil value deletes the key.
	Set(plugin, session, key string, value json.RawMessage) error
}

// LimitedStore is a Store that takes each plugin's own bound
// (grants.limits.state_bytes): SetWithin is Set with limit in place of
// MaxBytes. The plugin host uses it when the store implements it.
type LimitedStore interface {
	Store
	SetWithin(plugin, session, key string, value json.RawMessage, limit int64) error
}

// ErrFull: a plugin's state for one session reached its size limit.
var ErrFull = errors.New("plugin state full")

// MaxBytes caps one plugin's state in one session, unless its grants
// set another bound (grants.limits.state_bytes). It is that grant's
// default (internal/defaults refers to it), defined here so that this
// package stays a leaf.
const MaxBytes = 16 << 20

// Memory is an in-memory Store. OnSet, when set, is told of
// every change (the agent loop records them in the session so that resume
// restores them).
type Memory struct {
	mu    sync.Mutex
	data  map[[2]string]map[string]json.RawMessage
	OnSet func(plugin, session, key string, value json.RawMessage)
}

var _ LimitedStore = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{data: map[[2]string]map[string]json.RawMessage{}}
}

// Get implements Store.
func (m *Memory) Get(plugin, session, key string) (json.RawMessage, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.data[[2]string{plugin, session}][key]
	return slices.Clone(v), ok, nil
}

// Set implements Store.
func (m *Memory) Set(plugin, session, key string, value json.RawMessage) error {
	return m.SetWithin(plugin, session, key, value, MaxBytes)
}

// SetWithin implements LimitedStore.
func (m *Memory) SetWithin(plugin, session, key string, value json.RawMessage, limit int64) error {
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
		if int64(size) > limit {
			m.mu.Unlock()
			return fmt.Errorf("%w: plugin %q would hold %d bytes in session %q (limit %d)", ErrFull, plugin, size, session, limit)
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
