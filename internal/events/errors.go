package events

import (
	"errors"
	"fmt"
)

// Errors returned by the Bus, wrapped with detail. Callers test with
// errors.Is.
var (
	// ErrWrongMode: a core event was emitted, or a WaterfallListener
	// subscribed, in a mode other than the event's own (see ModeOf).
	ErrWrongMode = errors.New("event used in the wrong mode")
	// ErrListenerPanic: a listener panicked; the panic was recovered. When
	// the panic value is an error, it is wrapped as well.
	ErrListenerPanic = errors.New("event listener panicked")
	// ErrPayloadType: a waterfall listener returned a value whose dynamic
	// type differs from the payload's, which would break the emitter.
	ErrPayloadType = errors.New("waterfall listener changed the payload type")
	// ErrNilListener: On or OnWaterfall was given a nil function.
	ErrNilListener = errors.New("nil event listener")
	// ErrSerialReentry: a serial event was emitted from within its own
	// dispatch (with a context derived from a listener's), which would
	// otherwise deadlock.
	ErrSerialReentry = errors.New("serial event emitted from its own dispatch")
	// ErrRenamedEvent: a subscription named an event by a name it no
	// longer has (see Renamed); the error names the new one.
	ErrRenamedEvent = errors.New("event renamed")
)

// ListenerError reports the failure of one listener. Err is what the
// listener returned, or for a panic an error wrapping ErrListenerPanic.
type ListenerError struct {
	Event    string
	Listener string
	Err      error
}

func (e *ListenerError) Error() string {
	return fmt.Sprintf("event %q: listener %q: %v", e.Event, e.Listener, e.Err)
}

func (e *ListenerError) Unwrap() error { return e.Err }

// panicError turns a recovered panic value into an error wrapping
// ErrListenerPanic, and the value itself when it is an error.
func panicError(r any) error {
	if err, ok := r.(error); ok {
		return fmt.Errorf("%w: %w", ErrListenerPanic, err)
	}
	return fmt.Errorf("%w: %v", ErrListenerPanic, r)
}
