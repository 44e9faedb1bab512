package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
)

// Listener handles a plain, contained or serial event. A plain Listener
// subscribed to a waterfall observes it: it receives the current value,
// which passes on unchanged unless it fails.
type Listener func(ctx context.Context, payload any) error

// WaterfallListener handles a waterfall event: it receives the previous
// listener's output (the emitted payload for the first) and returns it,
// modified or not. The returned value must have the payload's dynamic type.
// In a dispatch of another mode (possible only for events outside the core
// table) its output is discarded.
type WaterfallListener func(ctx context.Context, payload any) (any, error)

// Bus dispatches named events to subscribed listeners. The zero Bus is
// ready to use and logs to slog.Default. A Bus must not be copied after
// first use.
type Bus struct {
	logger *slog.Logger

	mu   sync.Mutex                          // serialises subscription changes
	subs atomic.Pointer[map[string][]*entry] // immutable snapshot, read lock-free

	serial sync.Map // event name -> chan struct{} (capacity 1), the serial lock
}

type entry struct {
	name      string
	plain     Listener
	waterfall WaterfallListener
	removed   atomic.Bool
}

// New returns an empty Bus that logs contained failures and recovered
// panics to logger, or to slog.Default when logger is nil.
func New(logger *slog.Logger) *Bus {
	return &Bus{logger: logger}
}

func (b *Bus) log() *slog.Logger {
	if b.logger != nil {
		return b.logger
	}
	return slog.Default()
}

// On subscribes l to event. name identifies the listener in errors and logs
// (e.g. "plugin:facts"). Listeners run in subscription order. The returned
// off unsubscribes it; calling off again does nothing. On fails for a nil
// l (ErrNilListener) and for an event's old name (ErrRenamedEvent).
func (b *Bus) On(event, name string, l Listener) (off func(), err error) {
	if l == nil {
		return nil, fmt.Errorf("events: subscribe %q to %q: %w", name, event, ErrNilListener)
	}
	if err := checkRenamed(event); err != nil {
		return nil, fmt.Errorf("events: subscribe %q: %w", name, err)
	}
	return b.subscribe(event, &entry{name: name, plain: l}), nil
}

// OnWaterfall subscribes l to event, as On does. It fails with
// ErrWrongMode when event is a core event that is not a waterfall, where
// l's output would be silently dropped, and with ErrNilListener for a nil l.
func (b *Bus) OnWaterfall(event, name string, l WaterfallListener) (off func(), err error) {
	if l == nil {
		return nil, fmt.Errorf("events: subscribe %q to %q: %w", name, event, ErrNilListener)
	}
	if err := checkRenamed(event); err != nil {
		return nil, fmt.Errorf("events: subscribe %q: %w", name, err)
	}
	if err := checkMode(event, Waterfall); err != nil {
		return nil, fmt.Errorf("events: subscribe %q: %w", name, err)
	}
	return b.subscribe(event, &entry{name: name, waterfall: l}), nil
}

func (b *Bus) subscribe(event string, e *entry) (off func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	next := b.cloneSubs()
	// Clip first so that append copies: published slices are immutable.
	next[event] = append(slices.Clip(next[event]), e)
	b.subs.Store(&next)
	return func() { b.unsubscribe(event, e) }
}

func (b *Bus) unsubscribe(event string, e *entry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e.removed.Swap(true) {
		return
	}
	next := b.cloneSubs()
	list := slices.DeleteFunc(slices.Clone(next[event]), func(x *entry) bool { return x == e })
	if len(list) == 0 {
		delete(next, event)
	} else {
		next[event] = list
	}
	b.subs.Store(&next)
}

// cloneSubs returns a shallow copy of the current subscriptions; b.mu must
// be held.
func (b *Bus) cloneSubs() map[string][]*entry {
	if cur := b.subs.Load(); cur != nil {
		return maps.Clone(*cur)
	}
	return make(map[string][]*entry)
}

func (b *Bus) snapshot(event string) []*entry {
	if cur := b.subs.Load(); cur != nil {
		return (*cur)[event]
	}
	return nil
}

// Listeners returns the names of event's listeners, in dispatch order.
func (b *Bus) Listeners(event string) []string {
	list := b.snapshot(event)
	names := make([]string, len(list))
	for i, e := range list {
		names[i] = e.name
	}
	return names
}

// Emit dispatches a plain event: listeners run in subscription order, and
// the first failure stops the dispatch and is returned as a
// *ListenerError. ctx is checked before each listener; once it is done,
// Emit returns its error. A core event of another mode fails with
// ErrWrongMode.
func (b *Bus) Emit(ctx context.Context, event string, payload any) error {
	if err := checkMode(event, Plain); err != nil {
		return fmt.Errorf("events: emit: %w", err)
	}
	return b.dispatch(orBackground(ctx), event, payload)
}

// EmitSerial dispatches a serial event. It behaves as Emit, and in
// addition no two EmitSerial dispatches of the same event run at once: a
// second one waits for the first to finish (or for its ctx to be done,
// returning ctx's error), so a listener such as compaction never races
// itself. Emit gives no such guarantee: concurrent Emits of one event run
// their listeners concurrently. Different events never wait for each other.
//
// A listener that emits the same serial event with the context it was
// given (or one derived from it) gets ErrSerialReentry instead of
// deadlocking; with an unrelated context it would deadlock.
func (b *Bus) EmitSerial(ctx context.Context, event string, payload any) error {
	if err := checkMode(event, Serial); err != nil {
		return fmt.Errorf("events: emit serial: %w", err)
	}
	ctx = orBackground(ctx)
	if holdsSerial(ctx, event) {
		return fmt.Errorf("events: emit serial %q: %w", event, ErrSerialReentry)
	}
	lock := b.serialLock(event)
	select {
	case lock <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("events: emit serial %q: waiting for the running dispatch: %w", event, ctx.Err())
	}
	defer func() { <-lock }()
	outer, _ := ctx.Value(serialKey{}).(*serialHeld)
	ctx = context.WithValue(ctx, serialKey{}, &serialHeld{event: event, outer: outer})
	return b.dispatch(ctx, event, payload)
}

// EmitContained dispatches a contained (lifecycle) event: every listener
// runs, whatever the others do. Each failure, panics included, is logged
// and isolated; EmitContained returns their errors.Join (nil when all
// succeeded) for callers that report them, but never stops early. It does
// not stop on a done ctx either: listeners receive ctx and may cut their
// own work short, but each is told, so that an unload always completes. A
// core event of another mode fails with ErrWrongMode, before any listener
// runs.
func (b *Bus) EmitContained(ctx context.Context, event string, payload any) error {
	if err := checkMode(event, Contained); err != nil {
		return fmt.Errorf("events: emit contained: %w", err)
	}
	ctx = orBackground(ctx)
	var errs []error
	for _, e := range b.snapshot(event) {
		if e.removed.Load() {
			continue
		}
		if _, panicked, err := b.call(ctx, event, e, payload); err != nil {
			if !panicked { // call has logged the panic with its stack
				b.log().Warn("events: contained listener failed", "event", event, "listener", e.name, "err", err)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Waterfall dispatches a waterfall event: each listener receives the
// previous one's output (the first receives payload) and the last output is
// returned. The first failure stops the dispatch and is returned as a
// *ListenerError with a nil value; so is a listener output whose dynamic
// type differs from payload's (ErrPayloadType). ctx is checked before each
// listener. With no listeners, payload is returned as is. A core event of
// another mode fails with ErrWrongMode.
func (b *Bus) Waterfall(ctx context.Context, event string, payload any) (any, error) {
	if err := checkMode(event, Waterfall); err != nil {
		return nil, fmt.Errorf("events: waterfall: %w", err)
	}
	ctx = orBackground(ctx)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("events: waterfall %q: %w", event, err)
	}
	want := reflect.TypeOf(payload)
	value := payload
	for i, e := range b.snapshot(event) {
		if e.removed.Load() {
			continue
		}
		if i > 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("events: waterfall %q: %w", event, err)
			}
		}
		out, _, err := b.call(ctx, event, e, value)
		if err != nil {
			return nil, err
		}
		if got := reflect.TypeOf(out); got != want {
			return nil, &ListenerError{Event: event, Listener: e.name,
				Err: fmt.Errorf("%w: returned %v, want %v", ErrPayloadType, typeName(got), typeName(want))}
		}
		value = out
	}
	return value, nil
}

// dispatch runs event's listeners in order, stopping at the first failure
// or when ctx is done.
func (b *Bus) dispatch(ctx context.Context, event string, payload any) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("events: emit %q: %w", event, err)
	}
	for i, e := range b.snapshot(event) {
		if e.removed.Load() {
			continue
		}
		if i > 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("events: emit %q: %w", event, err)
			}
		}
		if _, _, err := b.call(ctx, event, e, payload); err != nil {
			return err
		}
	}
	return nil
}

// call runs one listener, recovering a panic. out is the listener's output
// (the payload itself for a plain Listener); err is nil or a
// *ListenerError.
func (b *Bus) call(ctx context.Context, event string, e *entry, payload any) (out any, panicked bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			b.log().Error("events: listener panicked", "event", event, "listener", e.name,
				"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			out, panicked, err = nil, true, &ListenerError{Event: event, Listener: e.name, Err: panicError(r)}
		}
	}()
	if e.waterfall != nil {
		out, err = e.waterfall(ctx, payload)
	} else {
		out, err = payload, e.plain(ctx, payload)
	}
	if err != nil {
		return nil, false, &ListenerError{Event: event, Listener: e.name, Err: err}
	}
	return out, false, nil
}

func (b *Bus) serialLock(event string) chan struct{} {
	if l, ok := b.serial.Load(event); ok {
		return l.(chan struct{})
	}
	l, _ := b.serial.LoadOrStore(event, make(chan struct{}, 1))
	return l.(chan struct{})
}

// serialKey marks, in a serial dispatch's context, the serial events whose
// dispatch is running on it.
type serialKey struct{}

type serialHeld struct {
	event string
	outer *serialHeld
}

func holdsSerial(ctx context.Context, event string) bool {
	h, _ := ctx.Value(serialKey{}).(*serialHeld)
	for ; h != nil; h = h.outer {
		if h.event == event {
			return true
		}
	}
	return false
}

func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

func typeName(t reflect.Type) string {
	if t == nil {
		return "nil"
	}
	return t.String()
}
