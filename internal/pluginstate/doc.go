// Package pluginstate holds what plugins keep in an agent's session and
// the agent loop persists: their key-value state (Store, with an
// in-memory Memory) and the sink of the events they append
// (SessionEventSink, carried on a call's context).
//
// It is a leaf shared by the loop (internal/agent, whose PluginState is a
// Store that writes to the session) and the plugin host (internal/plugin,
// which serves state_get, state_set and session_event_append from it), so
// that the loop needs nothing of the Wasm host, and the host nothing of
// the loop. It imports nothing of this module.
package pluginstate
