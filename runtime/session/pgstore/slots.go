package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// TurnSlots counts each tenant's running turns across every worker on
// the database (httpapi.TurnSlots): a turn holds a slot row under a lease
// that its worker's heartbeat renews, so a dead worker's slots free within
// one lease TTL.
type TurnSlots struct{ s *Store }

// TurnSlots returns the store's tenant turn counter.
func (s *Store) TurnSlots() *TurnSlots { return &TurnSlots{s} }

// slotKey names a held slot for the heartbeat.
func slotKey(tenant string, slot int) string { return tenant + "/" + strconv.Itoa(slot) }

// Acquire takes a free slot of tenant's limit: ok false when limit
// slots have live leases. Takers of one tenant are serialised by a
// transaction-scoped advisory lock.
func (t *TurnSlots) Acquire(ctx context.Context, tenant string, limit int) (func(), bool, error) {
	s := t.s
	if limit <= 0 {
		return nil, false, nil
	}
	slot := -1
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('dsh_turn_slots/' || $1))`, tenant); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `SELECT g FROM generate_series(0, $2 - 1) AS g
			WHERE (SELECT count(*) FROM dsh_turn_slots WHERE tenant = $1 AND lease_until > now()) < $2
			AND NOT EXISTS (SELECT 1 FROM dsh_turn_slots WHERE tenant = $1 AND slot = g AND lease_until > now())
			ORDER BY g LIMIT 1`, tenant, limit).Scan(&slot)
		if errors.Is(err, pgx.ErrNoRows) {
			slot = -1
			return nil
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO dsh_turn_slots (tenant, slot, owner, lease_until)
			VALUES ($1, $2, $3, now() + $4::interval)
			ON CONFLICT (tenant, slot) DO UPDATE SET owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until`,
			tenant, slot, s.owner, s.ttlSQL())
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("pgstore: take a turn slot of %s: %w", tenant, err)
	}
	if slot < 0 {
		return nil, false, nil
	}
	key := slotKey(tenant, slot)
	s.openMu.Lock()
	s.slots[key] = true
	s.openMu.Unlock()
	return func() { t.release(tenant, slot, key) }, true, nil
}

// release gives a slot back: no longer renewed, then deleted, tried again
// within the retry bound; if that fails the slot's lease expires.
func (t *TurnSlots) release(tenant string, slot int, key string) {
	s := t.s
	s.openMu.Lock()
	delete(s.slots, key)
	s.openMu.Unlock()
	err := s.retry(func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `DELETE FROM dsh_turn_slots WHERE tenant = $1 AND slot = $2 AND owner = $3`, tenant, slot, s.owner)
		return err
	})
	if err != nil {
		s.log.Warn("pgstore: give back a turn slot; it expires", "tenant", tenant, "err", err)
	}
}

// heldSlots lists the slots this store holds, for the heartbeat.
func (s *Store) heldSlots() []string {
	s.openMu.Lock()
	defer s.openMu.Unlock()
	keys := make([]string, 0, len(s.slots))
	for k := range s.slots {
		keys = append(keys, k)
	}
	return keys
}
