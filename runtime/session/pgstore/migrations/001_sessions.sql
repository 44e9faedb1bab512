-- One row per session: its header line exactly as the JSONL store writes
-- it, and the lease of the worker running it.
CREATE TABLE dsh_sessions (
    id          text PRIMARY KEY,
    created_at  bigint NOT NULL,
    cwd         text NOT NULL,
    header      text NOT NULL,
    lease_owner text,
    lease_until timestamptz
);
CREATE INDEX dsh_sessions_created ON dsh_sessions (created_at, id);

-- One row per event, keyed (session_id, seq). The column is json, not
-- jsonb: json keeps the text as given, so an export is byte-identical.
CREATE TABLE dsh_events (
    session_id text NOT NULL REFERENCES dsh_sessions (id) ON DELETE CASCADE,
    seq        bigint NOT NULL CHECK (seq >= 0),
    event      json NOT NULL,
    PRIMARY KEY (session_id, seq)
);
