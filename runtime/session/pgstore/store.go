package pgstore

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

//go:embed migrations/*.sql
var migrations embed.FS

// ErrLeaseLost: the session's lease expired and another worker may hold
// it; the write was refused.
var ErrLeaseLost = errors.New("pgstore: the session's lease was lost")

// DefaultLeaseTTL is how long a lease outlives its holder's last renewal.
const DefaultLeaseTTL = 15 * time.Second

// Options configure a Store.
type Options struct {
	// LeaseTTL is how long a dead worker's lease lasts; 0 means
	// DefaultLeaseTTL. The heartbeat renews leases every third of it.
	LeaseTTL time.Duration
	// RetryFor bounds how long a write (an append, a lease release) is
	// tried again while the database does not answer; 0 means LeaseTTL.
	// An append that still fails leaves its events queued (the session's
	// next flush offers them again); a release that still fails lets the
	// lease expire.
	RetryFor time.Duration
	// Now stamps headers and events; nil means the system clock.
	Now    func() time.Time
	Logger *slog.Logger
}

// Store is a session.Storage in PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool     *pgxpool.Pool
	owner    string // this store's lease owner id
	ttl      time.Duration
	retryFor time.Duration

	// openMu guards open: the sessions this store has open, the only
	// leases the heartbeat renews. A session whose release failed is no
	// longer open, so its lease expires.
	openMu sync.Mutex
	open   map[string]int
	slots  map[string]bool // turn slots held (slotKey)
	now    func() time.Time
	log    *slog.Logger

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

var _ session.Storage = (*Store)(nil)

// Open connects to the database at dsn, applies the embedded migrations
// it lacks and starts the lease heartbeat.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgstore: parse the DSN: %w", redact(err))
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: connect: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	s := &Store{pool: pool, owner: hex.EncodeToString(b[:]), ttl: opts.LeaseTTL, retryFor: opts.RetryFor, now: opts.Now, log: opts.Logger,
		open: map[string]int{}, slots: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	if s.ttl <= 0 {
		s.ttl = DefaultLeaseTTL
	}
	if s.retryFor <= 0 {
		s.retryFor = s.ttl
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	go s.heartbeat()
	return s, nil
}

// redact drops a DSN that a parse error may quote (it can hold a password).
func redact(err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		return errors.New("invalid DSN")
	}
	return err
}

// migrate applies the migrations not yet applied, in name order, each in
// its own transaction, serialised across workers by an advisory lock.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return fmt.Errorf("pgstore: migrations: %w", err)
	}
	slices.Sort(names)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	defer conn.Release()
	const lockKey = 0x64736877 // "dshw"
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, lockKey); err != nil {
		return fmt.Errorf("pgstore: migrate: lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, lockKey)
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS dsh_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	for _, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		var done bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM dsh_migrations WHERE name = $1)`, base).Scan(&done); err != nil {
			return fmt.Errorf("pgstore: migrate: %w", err)
		}
		if done {
			continue
		}
		sql, err := migrations.ReadFile(name)
		if err != nil {
			return fmt.Errorf("pgstore: migrate %s: %w", base, err)
		}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, string(sql)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO dsh_migrations (name) VALUES ($1)`, base)
			return err
		})
		if err != nil {
			return fmt.Errorf("pgstore: migrate %s: %w", base, err)
		}
	}
	return nil
}

// Close stops the heartbeat, releases the leases this store holds and
// closes the pool. Sessions still open can no longer write.
func (s *Store) Close() error {
	s.once.Do(func() {
		close(s.stop)
		<-s.done
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = s.pool.Exec(ctx, `UPDATE dsh_sessions SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = $1`, s.owner)
		_, _ = s.pool.Exec(ctx, `DELETE FROM dsh_turn_slots WHERE owner = $1`, s.owner)
		s.pool.Close()
	})
	return nil
}

// Ping reports whether the database answers (for readiness checks).
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

func (s *Store) ttlSQL() string { return fmt.Sprintf("%d milliseconds", s.ttl.Milliseconds()) }

// opened and closed count the sessions this store has open.
func (s *Store) opened(id string) {
	s.openMu.Lock()
	s.open[id]++
	s.openMu.Unlock()
}

func (s *Store) closed(id string) {
	s.openMu.Lock()
	if s.open[id]--; s.open[id] <= 0 {
		delete(s.open, id)
	}
	s.openMu.Unlock()
}

func (s *Store) openIDs() []string {
	s.openMu.Lock()
	defer s.openMu.Unlock()
	ids := make([]string, 0, len(s.open))
	for id := range s.open {
		ids = append(ids, id)
	}
	return ids
}

// heartbeat renews the leases of the sessions this store has open, and
// of the turn slots it holds, every third of the TTL.
func (s *Store) heartbeat() {
	defer close(s.done)
	t := time.NewTicker(s.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.renew()
	}
}

// Create stores a new session and returns it open, its lease taken.
func (s *Store) Create(h session.Header, initial ...session.Event) (*session.Session, error) {
	p, err := session.Prepare(h, s.now, initial...)
	if err != nil {
		return nil, err
	}
	header, recs := p.Header, p.Records
	var full session.Header
	if err := json.Unmarshal(header, &full); err != nil {
		return nil, fmt.Errorf("pgstore: create: %w", err)
	}
	ctx, cancel := s.ctx()
	defer cancel()
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO dsh_sessions (id, created_at, cwd, header, lease_owner, lease_until)
			VALUES ($1, $2, $3, $4, $5, now() + $6::interval)`,
			full.ID, full.CreatedAt, full.Cwd, string(header), s.owner, s.ttlSQL()); err != nil {
			return err
		}
		return insert(ctx, tx, full.ID, recs)
	})
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "dsh_sessions_pkey" {
			return nil, fmt.Errorf("pgstore: create %s: %w", full.ID, session.ErrExists)
		}
		return nil, fmt.Errorf("pgstore: create %s: %w", full.ID, err)
	}
	return s.restore(full.ID, header, recs)
}

func (s *Store) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

func insert(ctx context.Context, tx pgx.Tx, id string, recs []session.Record) error {
	if len(recs) == 0 {
		return nil
	}
	seqs := make([]int64, len(recs))
	texts := make([]string, len(recs))
	for i, r := range recs {
		seqs[i], texts[i] = r.Seq, string(r.JSON)
	}
	_, err := tx.Exec(ctx, `INSERT INTO dsh_events (session_id, seq, event)
		SELECT $1, s, e::json FROM unnest($2::bigint[], $3::text[]) AS t(s, e)`, id, seqs, texts)
	return err
}

func (s *Store) restore(id string, header []byte, recs []session.Record) (*session.Session, error) {
	s.opened(id)
	b := &backend{s: s, id: id}
	sess, err := session.Restore("postgres:"+id, header, recs, b, s.now, nil)
	if err != nil {
		b.Close()
		return nil, err
	}
	return sess, nil
}

// Open takes the session's lease and returns it open, repairing a turn a
// dead worker left open. It fails with session.ErrNotFound for an unknown
// id and session.ErrLocked while another holder's lease is live.
func (s *Store) Open(id string) (*session.Session, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	var header string
	err := s.pool.QueryRow(ctx, `UPDATE dsh_sessions SET lease_owner = $2, lease_until = now() + $3::interval
		WHERE id = $1 AND (lease_owner IS NULL OR lease_until < now()) RETURNING header`, id, s.owner, s.ttlSQL()).Scan(&header)
	if errors.Is(err, pgx.ErrNoRows) {
		var exists bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM dsh_sessions WHERE id = $1)`, id).Scan(&exists); err != nil {
			return nil, fmt.Errorf("pgstore: open %s: %w", id, err)
		}
		if !exists {
			return nil, fmt.Errorf("pgstore: open %s: %w", id, session.ErrNotFound)
		}
		return nil, fmt.Errorf("pgstore: open %s: %w", id, session.ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: open %s: %w", id, err)
	}
	recs, err := s.records(ctx, id)
	if err != nil {
		s.release(id)
		return nil, err
	}
	return s.restore(id, []byte(header), recs)
}

func (s *Store) records(ctx context.Context, id string) ([]session.Record, error) {
	rows, err := s.pool.Query(ctx, `SELECT seq, event::text FROM dsh_events WHERE session_id = $1 ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("pgstore: read %s: %w", id, err)
	}
	var recs []session.Record
	for rows.Next() {
		var r session.Record
		var text string
		if err := rows.Scan(&r.Seq, &text); err != nil {
			return nil, fmt.Errorf("pgstore: read %s: %w", id, err)
		}
		r.JSON = []byte(text)
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: read %s: %w", id, err)
	}
	return recs, nil
}

// release gives back the lease of session id, which this store no
// longer has open: tried again within the retry bound, and if it still
// fails the heartbeat no longer renews the lease, so it expires.
func (s *Store) release(id string) error {
	s.closed(id)
	err := s.retry(func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `UPDATE dsh_sessions SET lease_owner = NULL, lease_until = NULL WHERE id = $1 AND lease_owner = $2`, id, s.owner)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: release %s: %w", id, err)
	}
	return nil
}

// List returns the sessions' headers, oldest first.
func (s *Store) List() ([]session.Header, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT id, header FROM dsh_sessions ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list: %w", err)
	}
	var hs []session.Header
	var errs []error
	for rows.Next() {
		var id, text string
		if err := rows.Scan(&id, &text); err != nil {
			return nil, fmt.Errorf("pgstore: list: %w", err)
		}
		var h session.Header
		if err := json.Unmarshal([]byte(text), &h); err != nil {
			errs = append(errs, &session.CorruptError{Path: "postgres:" + id, Line: 1, Err: err})
			continue
		}
		hs = append(hs, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: list: %w", err)
	}
	return hs, errors.Join(errs...)
}

// Header reads session id's header.
func (s *Store) Header(id string) (session.Header, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	var text string
	err := s.pool.QueryRow(ctx, `SELECT header FROM dsh_sessions WHERE id = $1`, id).Scan(&text)
	if errors.Is(err, pgx.ErrNoRows) {
		return session.Header{}, fmt.Errorf("pgstore: %s: %w", id, session.ErrNotFound)
	}
	if err != nil {
		return session.Header{}, fmt.Errorf("pgstore: %s: %w", id, err)
	}
	var h session.Header
	if err := json.Unmarshal([]byte(text), &h); err != nil {
		return session.Header{}, &session.CorruptError{Path: "postgres:" + id, Line: 1, Err: err}
	}
	return h, nil
}

// Export writes the session as the JSONL file the embedded store keeps.
func (s *Store) Export(id string, w io.Writer) error {
	ctx, cancel := s.ctx()
	defer cancel()
	var header string
	err := s.pool.QueryRow(ctx, `SELECT header FROM dsh_sessions WHERE id = $1`, id).Scan(&header)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("pgstore: export %s: %w", id, session.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("pgstore: export %s: %w", id, err)
	}
	recs, err := s.records(ctx, id)
	if err != nil {
		return err
	}
	buf := append([]byte(header), '\n')
	for _, r := range recs {
		buf = append(append(buf, r.JSON...), '\n')
	}
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("pgstore: export %s: %w", id, err)
	}
	return nil
}

// backend writes one open session's events, under its lease.
type backend struct {
	s  *Store
	id string
}

// Append stores recs in one transaction that checks and renews the
// lease. A failure that may heal (the database restarting, a lost
// connection) is tried again within the retry bound; if it still fails,
// the error matches session.ErrNotStored and the session offers the
// records again on its next flush. Each attempt is idempotent (see
// appendOnce), so a commit whose answer was lost is not stored twice.
func (b *backend) Append(recs []session.Record) error {
	if len(recs) == 0 {
		return nil
	}
	err := b.s.retry(func(ctx context.Context) error { return b.appendOnce(ctx, recs) })
	switch {
	case err == nil:
		return nil
	case final(err):
		return fmt.Errorf("pgstore: append to %s: %w", b.id, err)
	}
	return fmt.Errorf("pgstore: append to %s: %w (tried for %s): %w", b.id, session.ErrNotStored, b.s.retryFor, err)
}

func (b *backend) Close() error { return b.s.release(b.id) }
