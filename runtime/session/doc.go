// Package session stores agent sessions as event logs in the reference
// harness's JSONL format, version 0, so sessions move between the two.
//
// # Format
//
// A session file holds one JSON object a line. The first line is the
// header:
//
//	{"type":"session","version":0,"id":"…","createdAt":1782094878368,"cwd":"/home/me/project"}
//
// with parentSession for a subagent's session and seedLength for a fork,
// whose file starts with that many events copied from its parent. Every
// other line is an event:
//
//	{"type":"tool/result","seq":33,"time":1782094878605,"data":{…},"sourceEventSeqs":[32],"surfaceOp":"append"}
//
// seq counts from 0 without gaps; time is in Unix milliseconds; data
// depends on type (see the Payload types: turn/start, user/message,
// step/start, assistant/chunk, assistant/message, tool/call,
// tool/result, step/end, turn/end, compact/start, compact/summary,
// compact/end, context/message, steering/message, prompt/blocked,
// hook/invoked, hook/result). Event types, keys and data this package
// does not know are kept and written back as they were.
//
// Messages (user/message, assistant/message, tool/result, and the
// context/message and steering/message the model sees as user messages
// wrapped in <context source="KIND"> or <steering source="KIND"> tags,
// as the reference harness sends them) carry a
// surfaceOp saying how they enter the conversation the model sees:
// "append" adds to its end; {"op":"replace","start":S,"end":E}, written by
// compaction, puts the message in place of the run of messages from the
// one with seq S to the one with seq E, and a bare "replace" in place of
// all before it. Events without a surfaceOp are a record, not something
// the model sees. Messages derives the model's conversation from the
// events; a fork's seed is part of it.
//
// Files live under a Store's root at cwd-<first 12 hex digits of
// sha256(cwd)>/<id>.jsonl, or _no-cwd/<id>.jsonl.
//
// # Durability
//
// Session.Append keeps events in memory; Session.Flush writes them in one
// write and fsyncs the file. The agent loop flushes when a turn's user
// messages are recorded, when an assistant message is recorded (before
// its tools run), at each step end and at turn end. Create fsyncs the header (and a fork's seed) and the
// directory before it returns. So after a crash the file holds everything
// up to the last Flush that returned, and of the events appended since,
// at most a prefix that the crash cut anywhere, even inside a line.
//
// Store.Open repairs that: it cuts off a torn last line (one that is not
// valid JSON), and closes a turn left open as the reference harness's
// repair does (session/src/repair.ts): an error tool/result ("Tool call
// interrupted by a crash; no result was recorded.", error
// {InterruptedError, interrupted}) for each call of the open step's
// assistant messages without a result, step/end for an open step, and
// turn/end with kind "interrupted", all at the time of the last event. It
// writes the repairs before returning and reports them in
// Session.Recovery. A malformed line anywhere else is not crash damage:
// Open refuses the file with a *CorruptError naming the line.
package session
