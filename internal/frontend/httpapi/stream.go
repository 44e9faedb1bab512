package httpapi

import (
	"context"

	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// streamTurn runs one turn of sess on text and passes every event it
// records to send, in order, as the session stores them (an event is
// streamed only once durable: deploy.Session's stream carries what the
// store holds). It returns when the turn has returned and every event it
// stored was sent, with the turn's error: one that ends with no turn/end
// (its events could not be saved) ends the stream too, so the caller can
// say so. A send that fails (the client left) stops nothing: the turn
// goes on to its end or its cancel.
func (s *Server) streamTurn(ctx context.Context, sess *deploy.Session, text string, send func(any) error) error {
	stream := sess.Follow()
	done := make(chan error, 1)
	follow, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	go func() {
		_, err := sess.Prompt(ctx, text)
		done <- err
		stopFollow()
	}()
	calls := map[string]int64{} // call id → tool/call time
	deliver := func(e session.Event) {
		s.metrics.observe(e, calls)
		_ = send(e)
	}
	for {
		e, err := stream.Next(follow)
		if err != nil {
			break // the turn returned, the client left, or the session closed
		}
		deliver(e)
		if e.Type == session.TypeTurnEnd {
			break
		}
	}
	err := <-done
	// What the turn stored after the follower stopped.
	for {
		e, ok := stream.TryNext()
		if !ok {
			break
		}
		deliver(e)
	}
	return err
}
