// Package pgstore keeps sessions in PostgreSQL, for workers that share
// them: any worker can open any session, one at a time.
//
// The format is the session package's: a session is its header's JSON
// text (table dsh_sessions) and one row per event keyed (session_id, seq)
// holding the event's exact JSON text (table dsh_events, a json column,
// which keeps the text as given). Export writes them back as the JSONL
// file the embedded store would have written, byte for byte.
//
// Durability: every Flush of a session (the agent flushes at each user
// message, assistant message, step end and turn end) is one transaction,
// committed before Flush returns.
//
// One writer per session: Open and Create take a lease on the session (a
// lease row with a deadline the store's heartbeat renews). A second Open
// fails with session.ErrLocked while the lease is live. A worker that dies
// stops renewing; once its lease has expired, the next Open takes it and
// repairs the turn the dead worker left open, as the file store does
// after a crash. Every write checks the lease in its transaction, so a
// worker that lost its lease (paused past the deadline) cannot write
// after the next holder: its Flush fails with ErrLeaseLost.
//
// Cancel requests travel between workers with LISTEN/NOTIFY (SendCancel,
// Listen).
package pgstore
