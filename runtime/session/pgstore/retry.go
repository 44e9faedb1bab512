package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// errConflict: the rows stored at the seqs an Append offers are not the
// records it offers. Another writer wrote them; the session is broken.
var errConflict = errors.New("the stored events differ from the ones offered")

// final reports whether err cannot heal by trying again: a lost lease, a
// conflict, or an error PostgreSQL gave about the statement itself. Lost
// connections, a server shutting down or starting, and serialisation
// failures are worth another try.
func final(err error) bool {
	if errors.Is(err, ErrLeaseLost) || errors.Is(err, errConflict) || errors.Is(err, session.ErrNotFound) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			strings.HasPrefix(pe.Code, "57P"), // admin shutdown, crash shutdown, cannot connect now
			strings.HasPrefix(pe.Code, "40"),  // serialization failure, deadlock
			strings.HasPrefix(pe.Code, "53"):  // insufficient resources
			return false
		}
		return true
	}
	return false
}

// retry calls op until it succeeds, fails for good (final), or the
// store's retry bound (Options.RetryFor) has passed; each attempt gets its
// own deadline. It returns the last error.
func (s *Store) retry(op func(ctx context.Context) error) error {
	deadline := time.Now().Add(s.retryFor)
	wait := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), s.attemptTimeout())
		err := op(ctx)
		cancel()
		if err == nil || final(err) || !time.Now().Add(wait).Before(deadline) {
			return err
		}
		s.log.Warn("pgstore: write failed; retrying", "err", err, "in", wait)
		select {
		case <-time.After(wait):
		case <-s.stop:
			return err
		}
		wait = min(2*wait, time.Second)
	}
}

// attemptTimeout bounds one attempt of a retried write: a connection that
// hangs is given up in time for another attempt within the bound.
func (s *Store) attemptTimeout() time.Duration { return max(s.retryFor/3, time.Second) }

// appendOnce is one attempt at storing recs, idempotent: it renews the
// lease if this store still holds it (ErrLeaseLost otherwise), and stores
// what of recs is not stored yet. Rows already at their seqs (a commit
// whose answer was lost, then offered again) must be those records
// (errConflict otherwise).
func (b *backend) appendOnce(ctx context.Context, recs []session.Record) error {
	return pgx.BeginFunc(ctx, b.s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE dsh_sessions SET lease_until = now() + $3::interval
			WHERE id = $1 AND lease_owner = $2`, b.id, b.s.owner, b.s.ttlSQL())
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return ErrLeaseLost
		}
		rows, err := tx.Query(ctx, `SELECT seq, event::text FROM dsh_events WHERE session_id = $1 AND seq >= $2 ORDER BY seq`,
			b.id, recs[0].Seq)
		if err != nil {
			return err
		}
		n := 0
		for rows.Next() {
			var seq int64
			var text string
			if err := rows.Scan(&seq, &text); err != nil {
				rows.Close()
				return err
			}
			if n >= len(recs) || recs[n].Seq != seq || string(recs[n].JSON) != text {
				rows.Close()
				return fmt.Errorf("%w: seq %d", errConflict, seq)
			}
			n++
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return insert(ctx, tx, b.id, recs[n:])
	})
}

// renew extends the leases of the sessions this store has open and of
// the turn slots it holds, and only those: a session closed or a slot
// given back, even one whose release failed, is left to expire.
func (s *Store) renew() {
	ctx, cancel := context.WithTimeout(context.Background(), s.ttl/3)
	defer cancel()
	if ids := s.openIDs(); len(ids) > 0 {
		_, err := s.pool.Exec(ctx, `UPDATE dsh_sessions SET lease_until = now() + $2::interval
			WHERE lease_owner = $1 AND id = ANY($3)`, s.owner, s.ttlSQL(), ids)
		if err != nil {
			s.log.Warn("pgstore: renew session leases", "err", err)
		}
	}
	if keys := s.heldSlots(); len(keys) > 0 {
		_, err := s.pool.Exec(ctx, `UPDATE dsh_turn_slots SET lease_until = now() + $2::interval
			WHERE owner = $1 AND (tenant || '/' || slot) = ANY($3)`, s.owner, s.ttlSQL(), keys)
		if err != nil {
			s.log.Warn("pgstore: renew turn slots", "err", err)
		}
	}
}
