// Package session is the format of agent sessions: event logs in the
// reference harness's JSONL format, version 0, so sessions move between
// the two. The stores that keep them are packages of their own (see
// Storage).
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
// # Storage
//
// The format is kept apart from where sessions are kept. This package
// holds the events, their payloads, the derivation of messages, the
// checks every write passes and compaction; it declares Storage, what a
// store offers, and Backend, where an open Session's events go. The
// stores are packages beside it: runtime/session/filestore keeps a JSONL
// file per session on local disk (the default), runtime/session/pgstore
// keeps the same events in PostgreSQL for workers that share them. A
// store builds its Sessions with Prepare (for Create) and Restore, or
// Decode and Resume, so a session reads, repairs and exports the same in
// any of them; runtime/session/storetest is the contract they all meet.
//
// # Durability
//
// Session.Append keeps events in memory; Session.Flush hands them to the
// store in one step, and returns once they are durable (the file store
// writes them in one write and fsyncs the file). The agent loop flushes
// when a turn's user messages are recorded, when an assistant message is
// recorded (before its tools run), at each step end and at turn end.
//
// After a crash, what a store holds may end inside a turn, and a file may
// end inside a line. Decode reads that as a store's Open does: a torn
// last line (one that is not valid JSON) is dropped, and a turn left open
// is closed as the reference harness's repair does
// (session/src/repair.ts): an error tool/result ("Tool call interrupted
// by a crash; no result was recorded.", error {InterruptedError,
// interrupted}) for each call of the open step's assistant messages
// without a result, step/end for an open step, and turn/end with kind
// "interrupted", all at the time of the last event. Open stores the
// repairs before returning and reports them in Session.Recovery. A
// malformed line anywhere else is not crash damage: it is refused with a
// *CorruptError naming the line.
package session
