// Package agent is the agent loop: it runs an agent's turns on an
// event-sourced session (package session), asking a model.Provider for
// answers and a ToolRunner (the plugin host) for tool results.
//
// # Turns
//
// RunTurn takes every queued user message, records turn/start and a
// user/message for each, runs steps until the continuation decision
// (Options.Continue; by default, while the model calls tools) says stop,
// records turn/end and flushes the session. The end reasons are the
// reference harness's, in its shapes: completed; aborted {reason} (Cancel,
// or the caller's context); error {step, message, code?} with the
// reference's codes (AUTH, RATE_LIMIT, INVALID_REQUEST, SERVER,
// HTTP_<status>, CONTENT_FILTER, ABORTED, MALFORMED_RESPONSE), and
// OUTPUT_LIMIT, this runtime's own, for a stream past OutputBounds; none
// for a failure without a class, such as a render failure or a failing
// listener; disposed (Close while the turn ran); max-tokens (an answer
// hit the output-token ceiling, or the optional Options.MaxSteps cap);
// interrupted, written only by crash recovery.
//
// Cancel returns true only if the turn will end aborted: a turn decides
// its end under the lock Cancel takes, and from then on Cancel returns
// false.
//
// # One step
//
// A step is one model request. Its prompt is built and agent/pre-step
// runs before step/start is recorded, so a failure or a cancel there
// records no step, and what pre-step listeners record (compaction) comes
// before the step it prepares. Its data flows:
//
//	Registry.Assemble({agent facts})   sections, variables, tools; system-prompt/assemble hooks
//	prompt.Render                      the system prompt: there is no other way to one
//	agent/pre-step (serial)            *PreStep{system, messages, tools}; compaction listens here
//	step/start
//	Session.Messages()                 the conversation, read again after pre-step
//	model.Request                      {model, system, messages, tools, meta{session, turn, step}}
//	agent/request (waterfall)          listeners may rewrite the request; no model after it fails the turn
//	Provider.Generate                  each chunk recorded as assistant/chunk
//	assistant/message                  the answer and its usage, flushed before any tool runs
//	for each tool call, one at a time, while the turn is not cancelled:
//	    tool/call
//	    tools/pre-execute (waterfall)  listeners may deny the call
//	    ToolRunner.CallTool
//	    tools/post-execute (waterfall) listeners may rewrite the result
//	    tool/result
//	step/end                           flushed
//
// An answer that finished with an error or aborted records no
// assistant/message and ends the turn error. A truncated answer (finish
// max-tokens) keeps its text, drops its tool calls and ends the turn
// max-tokens. An answer with neither content nor usage records no
// assistant/message.
//
// # Durability
//
// The session is flushed, with fsync, when the user's messages are
// recorded, when an assistant message is recorded (before its tools run),
// at each step end and at turn end. A crash can lose at most what was
// recorded since the last of these: the chunks of a stream in progress,
// and the tool/call and tool/result events of the calls of the current
// step (a call that already ran is then answered by crash recovery with an
// interrupted error result, though its effects on the world remain).
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
// context carries the agent's facts (prompt.WithAgent), so a plugin
// handles it in that agent's instance.
//
//	event                   mode       payload
//	agent/open              plain      *AgentEvent (a failing listener fails New)
//	agent/start, agent/end  contained  *AgentEvent
//	turn/start, turn/end    contained  *TurnEvent
//	agent/pre-step          serial     *PreStep
//	agent/request           waterfall  *model.Request
//	tools/pre-execute       waterfall  *ToolExecution (Result nil; a listener may set Deny)
//	tools/post-execute      waterfall  *ToolExecution (Result set)
//
// The tool events have the reference harness's names. A subscription to
// their old names, tool/pre-execute and tool/post-execute, is refused with
// an error naming the new one (events.ErrRenamedEvent).
//
// # Failures
//
// A tool call that fails in any way (the tool reports an error, the
// arguments are not JSON or not canonical (CanonicalArguments: then no
// listener sees the call), the model named a tool it was not given, the
// plugin trapped or ran out of budget, a tools/pre-execute or
// tools/post-execute listener failed) is an error tool result, "Error: "
// and the message as the reference writes it, that goes back to the
// model, and the turn goes on. JSON arguments that are not an object go
// to the tool, which refuses them itself. A failure of the prompt, of
// another event listener or of the model ends the turn "error". Cancel
// stops the model stream and any running tool, and ends the turn
// "aborted": the running call records its result and the calls after it
// record nothing, as in the reference.
//
// # Compaction
//
// AttachCompaction subscribes compaction to agent/pre-step: when the
// prompt nears the configured context window, the older part of the
// conversation is replaced by a model-written summary. A compaction that
// fails is logged as a warning, and the step goes on with the full
// history.
package agent
