package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// cancelChannel is the NOTIFY channel cancel requests travel on.
const cancelChannel = "dsh_cancel"

type cancelMsg struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// SendCancel asks every worker listening (see Listen) to cancel the turn
// of session id that it runs.
func (s *Store) SendCancel(ctx context.Context, id, reason string) error {
	payload, err := json.Marshal(cancelMsg{ID: id, Reason: reason})
	if err != nil {
		return err
	}
	if len(payload) > 7000 { // NOTIFY payloads are capped at 8000 bytes
		payload, _ = json.Marshal(cancelMsg{ID: id})
	}
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, cancelChannel, string(payload)); err != nil {
		return fmt.Errorf("pgstore: send cancel for %s: %w", id, err)
	}
	return nil
}

// Listen calls fn for every cancel request sent by any worker, until ctx
// ends. It holds one connection, and reconnects when it is lost. ready,
// when not nil, is closed once the first LISTEN is in place.
func (s *Store) Listen(ctx context.Context, ready chan<- struct{}, fn func(id, reason string)) {
	first := true
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, func() {
			if first && ready != nil {
				close(ready)
			}
			first = false
		}, fn)
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("pgstore: cancel listener lost its connection; reconnecting", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (s *Store) listenOnce(ctx context.Context, listening func(), fn func(id, reason string)) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+cancelChannel); err != nil {
		return err
	}
	defer conn.Exec(context.WithoutCancel(ctx), "UNLISTEN "+cancelChannel)
	listening()
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return err
		}
		var m cancelMsg
		if json.Unmarshal([]byte(n.Payload), &m) != nil || m.ID == "" {
			s.log.Warn("pgstore: malformed cancel request", "payload", n.Payload)
			continue
		}
		fn(m.ID, m.Reason)
	}
}
