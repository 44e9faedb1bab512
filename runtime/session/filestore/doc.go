// Package filestore keeps sessions as JSONL files on local disk: the
// default session.Storage, the one the CLI and the embedding API use
// unless told otherwise.
//
// # Layout
//
// Files live under a Store's root at cwd-<first 12 hex digits of
// sha256(cwd)>/<id>.jsonl, or _no-cwd/<id>.jsonl, as the reference
// harness lays them out; each is the session's JSONL text, the header
// line then an event a line (see package session).
//
// # Durability
//
// Create fsyncs the header (and a fork's seed) and the directory before
// it returns. Each Session.Flush is one write of the appended lines and
// an fsync of the file. So after a crash the file holds everything up to
// the last Flush that returned, and of the events appended since, at most
// a prefix that the crash cut anywhere, even inside a line.
//
// Store.Open repairs that: it cuts a torn last line off the file, adds a
// missing final newline and closes a turn left open (see session.Decode),
// and the repairs are on disk before it returns. If a write fails, the
// file is cut back to what it held before and the events stay pending
// for the next Flush; if that cut or an fsync fails, the session is
// broken (session.ErrBroken) and must be reopened.
//
// # One writer
//
// An open session holds an exclusive advisory lock (flock) on its file,
// so a second writer, in this process or another on the same machine,
// gets session.ErrLocked. Where flock is unavailable only the Store's own
// record of its open sessions keeps two writers apart.
package filestore
