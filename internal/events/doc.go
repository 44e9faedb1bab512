// Package events is the runtime's native event bus.
//
// Native Go listeners and, through an adapter, Wasm plugin listeners
// subscribe to named events; the runtime emits them. How a dispatch treats
// a failing listener is the event's mode, and each core event has exactly
// one:
//
//	mode       dispatch                                        emitter
//	plain      in order; first failure stops, reaches emitter  Emit
//	contained  every listener runs; failures logged, isolated  EmitContained
//	serial     like plain, and one dispatch of the event at    EmitSerial
//	           a time
//	waterfall  in order, each gets the previous one's output;  Waterfall
//	           first failure stops, reaches emitter
//
// The core events:
//
//	event                      mode       why
//	subagent/provider-added    plain      a listener that cannot take the provider
//	                                      (a tool mirroring it) fails the
//	                                      registration, which is rolled back
//	subagent/provider-removed  contained  an unload must always complete; one
//	                                      failing listener must not leave a later
//	                                      one holding a stale provider
//	agent/open                 plain      a listener that cannot set the agent up
//	                                      (a hook file it cannot read) refuses the
//	                                      session's open
//	agent/pre-step             serial     compaction measures the assembled prompt
//	                                      and may rewrite history; it must never
//	                                      race itself
//	system-prompt/assemble     waterfall  listeners see, add or override sections
//	                                      and variables
//	agent/request              waterfall  listeners may rewrite the model request
//	tools/pre-execute          waterfall  listeners may deny a call
//	tools/post-execute         waterfall  listeners may rewrite a result
//	agent/start, agent/end,    contained  lifecycle notices: observers must not
//	turn/start, turn/end,                 break the agent or starve each other
//	subagent/start,
//	subagent/end,
//	plugin/loaded,
//	plugin/unloaded
//
// Emitting a core event through the wrong method fails with ErrWrongMode,
// as does subscribing a WaterfallListener to a core event that is not a
// waterfall; a plain Listener on a waterfall is an observer that passes the
// value on unchanged. Events outside the table (plugin-defined ones) may be
// emitted in any mode.
//
// The tool events have the reference harness's names. A subscription to
// a former name (tool/pre-execute, tool/post-execute) fails with
// ErrRenamedEvent and names the new one: nothing emits the old name, and a
// policy listening there would silently never be called (see Renamed).
//
// Every dispatch works on the listeners subscribed when it began: a
// listener subscribed during a dispatch first runs in the next one, and a
// listener unsubscribed during a dispatch is skipped if it has not run yet.
// A listener panic is recovered and becomes an error wrapping
// ErrListenerPanic. A Bus is safe for concurrent use; dispatch takes no
// lock (serial events excepted).
package events
