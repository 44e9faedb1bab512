// Package agent is the agent loop: it runs an agent's turns on an
// event-sourced session (package session), asking a model.Provider for
// answers and a ToolRunner (the plugin host) for tool results.
//
// # Turns
//
// RunTurn takes every queued user message, records turn/start and a
// user/message for each, runs steps until the continuation decision
// (Options.Continue; by default, while the model calls tools) says stop,
// records turn/end and flushes the session. The end reason is one of
// completed, aborted (Cancel, or the caller's context), error, max-tokens
// (the model's token limit, or Options.MaxSteps) and rejected (a content
// filter, or a listener returning ErrRejected); interrupted is written only
// by crash recovery.
//
// # One step
//
// A step is one model request. Its data flows:
//
//	step/start
//	Registry.Assemble({agent facts})   sections, variables, tools; system-prompt/assemble hooks
//	prompt.Render                      the system prompt: there is no other way to one
//	agent/pre-step (serial)            *PreStep{system, messages, tools}; compaction listens here
//	Session.Messages()                 the conversation, read again after pre-step
//	model.Request                      {model, system, messages, tools, meta{session, turn, step}}
//	agent/request (waterfall)          listeners may rewrite the request
//	Provider.Generate                  each chunk recorded as assistant/chunk
//	assistant/message                  the accumulated answer and its usage
//	for each tool call, one at a time:
//	    tool/call
//	    tool/pre-execute (waterfall)   listeners may rewrite or veto the call
//	    ToolRunner.CallTool
//	    tool/post-execute (waterfall)  listeners may rewrite the result
//	    tool/result
//	step/end
//
// The built-in variables model and cwd project the agent's facts (its
// model, its session's cwd); register them once per registry with
// RegisterBuiltinVariables.
//
// # Events
//
// The payloads the loop emits on the event bus encode as JSON, which is
// how Wasm plugin listeners see them. Waterfall payloads are pointers, and
// a listener returns the same type, modified or not. Every emission's
// context carries the agent's facts (plugin.WithAgent), so a plugin
// handles it in that agent's instance.
//
//	event                   mode       payload
//	agent/start, agent/end  contained  *AgentEvent
//	turn/start, turn/end    contained  *TurnEvent
//	agent/pre-step          serial     *PreStep
//	agent/request           waterfall  *model.Request
//	tool/pre-execute        waterfall  *ToolExecution (Result nil)
//	tool/post-execute       waterfall  *ToolExecution (Result set)
//
// # Failures
//
// A tool call that fails in any way (the tool reports an error, the
// arguments are not a JSON object, the model named a tool it was not
// given, the plugin trapped or ran out of budget) is an error tool result
// that goes back to the model, and the turn goes on. A failure of the
// prompt, of an event listener or of the model ends the turn "error": the
// step is closed with step/end, and turn/end carries the message. Cancel
// stops the model stream and any running tool, and ends the turn
// "aborted". A step whose stream did not complete records no
// assistant/message (its chunks are recorded); tool calls that could not
// run when a turn ended early get error results, so the conversation
// stays valid for the next turn, which the agent accepts as usual.
//
// # Compaction
//
// AttachCompaction subscribes compaction to agent/pre-step: when the
// prompt nears the configured context window, the older part of the
// conversation is replaced by a model-written summary.
package agent
