package plugin

import (
	"context"
	"fmt"
	"time"
)

// An instance runs one call at a time. Its lock is a one-slot channel
// rather than a mutex, so that a call can wait for it under a context and
// give up, and so that Unload, EndAgent and Close wait for it only for
// closeWait.
//
// Calls nest: a call's event_emit runs other plugins' handlers on the same
// goroutine, each in its own instance. Two such chains can each hold the
// instance the other wants (plugin A's handler emits what B listens for,
// and B's emits what A listens for, for the same agent at the same time).
// The host keeps a wait-for graph to refuse that: each chain of nested
// calls is represented by its outermost callState (its root); an instance
// records the root holding it (owner) and a root records the instance its
// chain waits for (waitingFor). A chain about to wait follows
// owner -> waitingFor -> owner... from the instance it wants; if that leads
// back to itself, waiting would never end, and the call fails with
// ErrDeadlock instead. Both fields are atomics written before the wait
// and read after the write (sequentially consistent), so of two chains
// closing a cycle at the same moment at least one sees it.

// closeWait bounds how long Unload, EndAgent and Close wait for a call they
// have stopped to let go of its instance; past it, the call closes the
// instance itself when it ends.
const closeWait = time.Second

// maxWaitChain bounds the walk of the wait-for graph (a chain longer than
// the number of instances is impossible; this only guards the loop).
const maxWaitChain = 4096

// root returns the outermost call of cs's chain.
func (cs *callState) rootCall() *callState {
	if cs.root != nil {
		return cs.root
	}
	return cs
}

// acquire takes the instance for a call of chain root. The uncontended
// path is one channel send. Otherwise it waits until the instance is free,
// ctx ends, or the instance closes, unless waiting would close a cycle.
func (in *instance) acquire(ctx context.Context, root *callState) error {
	select {
	case in.sem <- struct{}{}:
		in.owner.Store(root)
		return nil
	default:
	}
	root.waitingFor.Store(in)
	defer root.waitingFor.Store(nil)
	if in.wouldDeadlock(root) {
		return fmt.Errorf("%w: the instance is held by a call that is waiting, directly or through others, for this call's chain", ErrDeadlock)
	}
	select {
	case in.sem <- struct{}{}:
		in.owner.Store(root)
		return nil
	case <-ctx.Done():
		return fmt.Errorf("call cancelled while waiting for the instance: %w", context.Cause(ctx))
	case <-in.closing:
		return errInstanceClosed
	}
}

// release lets go of the instance; an instance closed while the call ran
// is finalised here, by the call that held it.
func (in *instance) release() {
	if in.closed.Load() {
		in.finalize()
	}
	in.owner.Store(nil)
	<-in.sem
}

// wouldDeadlock follows the wait-for graph from in.
func (in *instance) wouldDeadlock(root *callState) bool {
	inst := in
	for i := 0; inst != nil && i < maxWaitChain; i++ {
		o := inst.owner.Load()
		if o == nil {
			return false
		}
		if o == root {
			return true
		}
		inst = o.waitingFor.Load()
	}
	return false
}
