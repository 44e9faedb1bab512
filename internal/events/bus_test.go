package events

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const custom = "plugin:facts/refresh" // an event outside the core table

func quietBus() *Bus { return New(slog.New(slog.DiscardHandler)) }

func logBus() (*Bus, *bytes.Buffer) {
	var buf bytes.Buffer
	return New(slog.New(slog.NewTextHandler(&buf, nil))), &buf
}

func mustOn(t *testing.T, b *Bus, event, name string, l Listener) func() {
	t.Helper()
	off, err := b.On(event, name, l)
	if err != nil {
		t.Fatalf("On(%q, %q): %v", event, name, err)
	}
	return off
}

func mustOnWaterfall(t *testing.T, b *Bus, event, name string, l WaterfallListener) func() {
	t.Helper()
	off, err := b.OnWaterfall(event, name, l)
	if err != nil {
		t.Fatalf("OnWaterfall(%q, %q): %v", event, name, err)
	}
	return off
}

// recorder returns a listener appending name to *calls.
func recorder(calls *[]string, name string, err error) Listener {
	return func(context.Context, any) error {
		*calls = append(*calls, name)
		return err
	}
}

func TestEmitRunsInOrderAndStopsOnFirstFailure(t *testing.T) {
	b := quietBus()
	boom := errors.New("boom")
	var calls []string
	mustOn(t, b, EventProviderAdded, "a", recorder(&calls, "a", nil))
	mustOn(t, b, EventProviderAdded, "b", recorder(&calls, "b", boom))
	mustOn(t, b, EventProviderAdded, "c", recorder(&calls, "c", nil))

	err := b.Emit(context.Background(), EventProviderAdded, "fork")
	if !errors.Is(err, boom) {
		t.Fatalf("Emit error = %v, want it to wrap boom", err)
	}
	var le *ListenerError
	if !errors.As(err, &le) || le.Event != EventProviderAdded || le.Listener != "b" {
		t.Fatalf("Emit error = %#v, want ListenerError{%q, %q}", err, EventProviderAdded, "b")
	}
	if want := `event "subagent/provider-added": listener "b": boom`; err.Error() != want {
		t.Errorf("message = %q, want %q", err.Error(), want)
	}
	if want := []string{"a", "b"}; !slices.Equal(calls, want) {
		t.Errorf("calls = %v, want %v", calls, want)
	}
}

func TestEmitPassesPayloadAndSucceeds(t *testing.T) {
	b := quietBus()
	var got []any
	for _, n := range []string{"a", "b"} {
		mustOn(t, b, custom, n, func(_ context.Context, p any) error { got = append(got, p); return nil })
	}
	if err := b.Emit(context.Background(), custom, 42); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []any{42, 42}) {
		t.Errorf("payloads = %v", got)
	}
	if err := b.Emit(context.Background(), "nobody/listens", nil); err != nil {
		t.Errorf("Emit with no listeners: %v", err)
	}
	var zero Bus // the zero Bus is usable
	if err := zero.Emit(context.Background(), custom, nil); err != nil {
		t.Errorf("zero Bus Emit: %v", err)
	}
}

func TestEmitContainedRunsEveryListener(t *testing.T) {
	b, logs := logBus()
	first, second := errors.New("first failure"), errors.New("second failure")
	var calls []string
	mustOn(t, b, EventProviderRemoved, "a", recorder(&calls, "a", first))
	mustOn(t, b, EventProviderRemoved, "b", func(context.Context, any) error {
		calls = append(calls, "b")
		panic("b exploded")
	})
	mustOn(t, b, EventProviderRemoved, "c", recorder(&calls, "c", second))
	mustOn(t, b, EventProviderRemoved, "d", recorder(&calls, "d", nil))

	err := b.EmitContained(context.Background(), EventProviderRemoved, "fork")
	if want := []string{"a", "b", "c", "d"}; !slices.Equal(calls, want) {
		t.Fatalf("calls = %v, want %v", calls, want)
	}
	for _, target := range []error{first, second, ErrListenerPanic} {
		if !errors.Is(err, target) {
			t.Errorf("EmitContained error %v does not wrap %v", err, target)
		}
	}
	var failed []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var le *ListenerError
		if !errors.As(e, &le) {
			t.Fatalf("joined error %v is not a *ListenerError", e)
		}
		failed = append(failed, le.Listener)
	}
	if want := []string{"a", "b", "c"}; !slices.Equal(failed, want) {
		t.Errorf("failed listeners = %v, want %v", failed, want)
	}
	out := logs.String()
	for _, want := range []string{"listener=a", "first failure", "listener=b", "b exploded", "stack=", "listener=c"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "listener=b"); n != 1 {
		t.Errorf("panic logged %d times, want once:\n%s", n, out)
	}

	calls = nil
	mustOn(t, b, EventPluginLoaded, "ok", recorder(&calls, "ok", nil))
	if err := b.EmitContained(context.Background(), EventPluginLoaded, nil); err != nil {
		t.Errorf("EmitContained with no failure = %v, want nil", err)
	}
}

func TestEmitContainedIgnoresCancellation(t *testing.T) {
	b := quietBus()
	ctx, cancel := context.WithCancel(context.Background())
	var calls []string
	mustOn(t, b, EventPluginUnloaded, "canceller", func(context.Context, any) error {
		calls = append(calls, "canceller")
		cancel()
		return nil
	})
	mustOn(t, b, EventPluginUnloaded, "mirror", func(ctx context.Context, _ any) error {
		calls = append(calls, "mirror")
		if ctx.Err() == nil {
			t.Error("mirror did not see the cancelled context")
		}
		return nil
	})
	if err := b.EmitContained(ctx, EventPluginUnloaded, nil); err != nil {
		t.Fatal(err)
	}
	if want := []string{"canceller", "mirror"}; !slices.Equal(calls, want) {
		t.Errorf("calls = %v, want %v", calls, want)
	}
}

func TestPanicIsRecovered(t *testing.T) {
	sentinel := errors.New("sentinel")
	for _, tc := range []struct {
		name  string
		value any
		also  error
	}{
		{"string", "kaboom", nil},
		{"error", fmt.Errorf("wrapped: %w", sentinel), sentinel},
		{"nil", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, logs := logBus()
			called := false
			mustOn(t, b, custom, "bad", func(context.Context, any) error { panic(tc.value) })
			mustOn(t, b, custom, "after", func(context.Context, any) error { called = true; return nil })
			err := b.Emit(context.Background(), custom, nil)
			if !errors.Is(err, ErrListenerPanic) {
				t.Fatalf("Emit error = %v, want ErrListenerPanic", err)
			}
			if tc.also != nil && !errors.Is(err, tc.also) {
				t.Errorf("Emit error = %v, want it to wrap the panic value", err)
			}
			var le *ListenerError
			if !errors.As(err, &le) || le.Listener != "bad" || le.Event != custom {
				t.Errorf("Emit error = %#v, want ListenerError naming bad", err)
			}
			if called {
				t.Error("dispatch continued past a panic in plain mode")
			}
			if !strings.Contains(logs.String(), "listener panicked") {
				t.Errorf("panic not logged:\n%s", logs)
			}
		})
	}
}

func TestWaterfallChainsOutputs(t *testing.T) {
	b := quietBus()
	var observed []int
	mustOnWaterfall(t, b, EventAgentRequest, "double", func(_ context.Context, p any) (any, error) {
		return p.(int) * 2, nil
	})
	mustOn(t, b, EventAgentRequest, "observer", func(_ context.Context, p any) error {
		observed = append(observed, p.(int))
		return nil
	})
	mustOnWaterfall(t, b, EventAgentRequest, "plus3", func(_ context.Context, p any) (any, error) {
		return p.(int) + 3, nil
	})
	got, err := b.Waterfall(context.Background(), EventAgentRequest, 5)
	if err != nil {
		t.Fatal(err)
	}
	if got != 13 { // (5*2)+3; the reverse order would give 16
		t.Errorf("Waterfall = %v, want 13", got)
	}
	if !slices.Equal(observed, []int{10}) {
		t.Errorf("observer saw %v, want [10]", observed)
	}

	got, err = b.Waterfall(context.Background(), EventToolPostExecute, "untouched")
	if err != nil || got != "untouched" {
		t.Errorf("Waterfall with no listeners = %v, %v; want the payload", got, err)
	}
}

func TestWaterfallModifiesInPlace(t *testing.T) {
	type assembly struct{ vars map[string]string }
	b := quietBus()
	mustOnWaterfall(t, b, EventAssemble, "model-owner", func(_ context.Context, p any) (any, error) {
		a := p.(*assembly)
		a.vars["model"] = "deepseek-chat"
		return a, nil
	})
	in := &assembly{vars: map[string]string{}}
	out, err := b.Waterfall(context.Background(), EventAssemble, in)
	if err != nil {
		t.Fatal(err)
	}
	if out.(*assembly) != in || in.vars["model"] != "deepseek-chat" {
		t.Errorf("Waterfall = %v, want the same assembly with model set", out)
	}
}

func TestWaterfallStopsOnFirstFailure(t *testing.T) {
	b := quietBus()
	veto := errors.New("tool call vetoed")
	calls := 0
	mustOnWaterfall(t, b, EventToolPreExecute, "policy", func(context.Context, any) (any, error) {
		calls++
		return nil, veto
	})
	mustOnWaterfall(t, b, EventToolPreExecute, "later", func(_ context.Context, p any) (any, error) {
		calls++
		return p, nil
	})
	got, err := b.Waterfall(context.Background(), EventToolPreExecute, "call")
	if !errors.Is(err, veto) || got != nil {
		t.Fatalf("Waterfall = %v, %v; want nil, veto", got, err)
	}
	var le *ListenerError
	if !errors.As(err, &le) || le.Listener != "policy" {
		t.Errorf("error %v does not name the policy listener", err)
	}
	if calls != 1 {
		t.Errorf("%d listeners ran, want 1", calls)
	}
}

func TestWaterfallRejectsTypeChange(t *testing.T) {
	b := quietBus()
	mustOnWaterfall(t, b, EventAgentRequest, "sloppy", func(context.Context, any) (any, error) {
		return nil, nil // forgot to return the payload
	})
	_, err := b.Waterfall(context.Background(), EventAgentRequest, "request")
	if !errors.Is(err, ErrPayloadType) {
		t.Fatalf("error = %v, want ErrPayloadType", err)
	}
	if !strings.Contains(err.Error(), `"sloppy"`) || !strings.Contains(err.Error(), "want string") {
		t.Errorf("message %q names neither the listener nor the types", err)
	}
}

func TestWaterfallPanicIsRecovered(t *testing.T) {
	b := quietBus()
	mustOnWaterfall(t, b, EventAssemble, "bad", func(context.Context, any) (any, error) {
		var m map[string]int
		m["x"] = 1 // nil map write
		return nil, nil
	})
	got, err := b.Waterfall(context.Background(), EventAssemble, 1)
	if !errors.Is(err, ErrListenerPanic) || got != nil {
		t.Fatalf("Waterfall = %v, %v; want nil, ErrListenerPanic", got, err)
	}
}

func TestWaterfallListenerInPlainDispatchRuns(t *testing.T) {
	b := quietBus()
	var seen any
	mustOnWaterfall(t, b, custom, "wf", func(_ context.Context, p any) (any, error) {
		seen = p
		return "ignored", nil
	})
	if err := b.Emit(context.Background(), custom, "payload"); err != nil {
		t.Fatal(err)
	}
	if seen != "payload" {
		t.Errorf("waterfall listener saw %v", seen)
	}
}

func TestSerialExcludesConcurrentDispatch(t *testing.T) {
	b := quietBus()
	entered := make(chan struct{}, 10)
	release := make(chan struct{})
	mustOn(t, b, EventAgentPreStep, "compaction", func(ctx context.Context, _ any) error {
		entered <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})

	firstDone := make(chan error, 1)
	go func() { firstDone <- b.EmitSerial(context.Background(), EventAgentPreStep, nil) }()
	<-entered

	// While the first dispatch holds the event, a second one must wait: it
	// gives up when its context expires, never having entered the listener.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := b.EmitSerial(ctx, EventAgentPreStep, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second EmitSerial = %v, want DeadlineExceeded", err)
	}
	if n := len(entered); n != 0 {
		t.Fatalf("listener entered %d more times while the first dispatch ran", n)
	}

	// Another serial event is not blocked by this one.
	mustOn(t, b, custom, "other", func(context.Context, any) error { return nil })
	if err := b.EmitSerial(context.Background(), custom, nil); err != nil {
		t.Fatalf("EmitSerial of another event: %v", err)
	}

	close(release)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	if err := b.EmitSerial(context.Background(), EventAgentPreStep, nil); err != nil {
		t.Fatalf("EmitSerial after release: %v", err)
	}
	<-entered
}

// TestSerialNeverOverlaps hammers EmitSerial and checks that the listener
// never runs twice at once; TestEmitMayOverlap shows Emit gives no such
// guarantee, so the check is not vacuous.
func TestSerialNeverOverlaps(t *testing.T) {
	b := quietBus()
	var active, peak atomic.Int32
	mustOn(t, b, EventAgentPreStep, "compaction", func(context.Context, any) error {
		n := active.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(100 * time.Microsecond)
		active.Add(-1)
		return nil
	})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				if err := b.EmitSerial(context.Background(), EventAgentPreStep, nil); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p != 1 {
		t.Errorf("peak concurrent listener runs = %d, want 1", p)
	}
}

func TestEmitMayOverlap(t *testing.T) {
	b := quietBus()
	var arrived sync.WaitGroup
	arrived.Add(2)
	both := make(chan struct{})
	go func() { arrived.Wait(); close(both) }()
	mustOn(t, b, custom, "barrier", func(context.Context, any) error {
		arrived.Done()
		select {
		case <-both:
			return nil
		case <-time.After(5 * time.Second):
			return errors.New("the other dispatch never arrived")
		}
	})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if err := b.Emit(context.Background(), custom, nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

func TestSerialReentryIsRefused(t *testing.T) {
	b := quietBus()
	var inner error
	mustOn(t, b, EventAgentPreStep, "recursive", func(ctx context.Context, _ any) error {
		inner = b.EmitSerial(ctx, EventAgentPreStep, nil)
		// A different serial event from inside is fine.
		return b.EmitSerial(ctx, custom, nil)
	})
	// Without the re-entry check the inner call would wait for its own
	// dispatch until this deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.EmitSerial(ctx, EventAgentPreStep, nil); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(inner, ErrSerialReentry) {
		t.Errorf("re-entrant EmitSerial = %v, want ErrSerialReentry", inner)
	}
	// The marker does not outlive the dispatch.
	if err := b.EmitSerial(context.Background(), EventAgentPreStep, nil); err != nil {
		t.Errorf("EmitSerial after a re-entrant attempt: %v", err)
	}
}

func TestUnsubscribeDuringDispatch(t *testing.T) {
	b := quietBus()
	var calls []string
	var offB, offSelf func()
	mustOn(t, b, custom, "a", func(context.Context, any) error {
		calls = append(calls, "a")
		offB() // b has not run yet: it is skipped
		mustOn(t, b, custom, "late", recorder(&calls, "late", nil))
		return nil
	})
	offB = mustOn(t, b, custom, "b", recorder(&calls, "b", nil))
	offSelf = mustOn(t, b, custom, "once", func(context.Context, any) error {
		calls = append(calls, "once")
		offSelf()
		return nil
	})
	mustOn(t, b, custom, "d", recorder(&calls, "d", nil))

	if err := b.Emit(context.Background(), custom, nil); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "once", "d"}; !slices.Equal(calls, want) {
		t.Errorf("first dispatch calls = %v, want %v", calls, want)
	}
	if want := []string{"a", "d", "late"}; !slices.Equal(b.Listeners(custom), want) {
		t.Errorf("Listeners = %v, want %v", b.Listeners(custom), want)
	}
}

func TestUnsubscribeIsIdempotent(t *testing.T) {
	b := quietBus()
	var calls []string
	offFirst := mustOn(t, b, custom, "same", recorder(&calls, "first", nil))
	mustOn(t, b, custom, "same", recorder(&calls, "second", nil))
	offFirst()
	offFirst()
	if err := b.Emit(context.Background(), custom, nil); err != nil {
		t.Fatal(err)
	}
	if want := []string{"second"}; !slices.Equal(calls, want) {
		t.Errorf("calls = %v, want %v", calls, want)
	}
	if got := b.Listeners(custom); !slices.Equal(got, []string{"same"}) {
		t.Errorf("Listeners = %v", got)
	}
}

func TestCancellationStopsDispatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		emit func(*Bus, context.Context) error
	}{
		{"Emit", func(b *Bus, ctx context.Context) error { return b.Emit(ctx, custom, 0) }},
		{"EmitSerial", func(b *Bus, ctx context.Context) error { return b.EmitSerial(ctx, custom, 0) }},
		{"Waterfall", func(b *Bus, ctx context.Context) error {
			out, err := b.Waterfall(ctx, custom, 0)
			if out != nil {
				return fmt.Errorf("Waterfall returned %v alongside its error", out)
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := quietBus()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var calls []string
			mustOn(t, b, custom, "canceller", func(context.Context, any) error {
				calls = append(calls, "canceller")
				cancel()
				return nil
			})
			mustOn(t, b, custom, "after", recorder(&calls, "after", nil))
			if err := tc.emit(b, ctx); !errors.Is(err, context.Canceled) {
				t.Fatalf("error = %v, want context.Canceled", err)
			}
			if want := []string{"canceller"}; !slices.Equal(calls, want) {
				t.Errorf("calls = %v, want %v", calls, want)
			}

			// A context done before the dispatch runs nothing, even with no
			// listeners subscribed.
			calls = nil
			if err := tc.emit(b, ctx); !errors.Is(err, context.Canceled) || len(calls) != 0 {
				t.Errorf("dispatch on a done context = %v, calls %v", err, calls)
			}
			if err := tc.emit(quietBus(), ctx); !errors.Is(err, context.Canceled) {
				t.Errorf("dispatch on a done context with no listeners = %v", err)
			}
		})
	}
}

func TestWrongModeIsRefused(t *testing.T) {
	b := quietBus()
	ran := false
	emitters := map[Mode]func(string) error{
		Plain:     func(e string) error { return b.Emit(context.Background(), e, nil) },
		Contained: func(e string) error { return b.EmitContained(context.Background(), e, nil) },
		Serial:    func(e string) error { return b.EmitSerial(context.Background(), e, nil) },
		Waterfall: func(e string) error {
			_, err := b.Waterfall(context.Background(), e, nil)
			return err
		},
	}
	for event, mode := range coreModes {
		mustOn(t, b, event, "spy", func(context.Context, any) error { ran = true; return nil })
		for used, emit := range emitters {
			ran = false
			err := emit(event)
			if used == mode {
				if err != nil || !ran {
					t.Errorf("%s emitted as %s: err %v, ran %v", event, used, err, ran)
				}
				continue
			}
			if !errors.Is(err, ErrWrongMode) {
				t.Errorf("%s (%s) emitted as %s: err %v, want ErrWrongMode", event, mode, used, err)
			}
			if ran {
				t.Errorf("%s (%s) emitted as %s ran a listener", event, mode, used)
			}
		}
		for used, emit := range emitters {
			if err := emit(custom); err != nil {
				t.Errorf("plugin event emitted as %s: %v", used, err)
			}
		}
	}
	err := b.Emit(context.Background(), EventAgentPreStep, nil)
	if want := `"agent/pre-step" is a serial event, not plain`; !strings.Contains(err.Error(), want) {
		t.Errorf("message %q lacks %q", err, want)
	}
}

func TestOnWaterfallRefusesNonWaterfallCoreEvents(t *testing.T) {
	b := quietBus()
	pass := func(_ context.Context, p any) (any, error) { return p, nil }
	for event, mode := range coreModes {
		off, err := b.OnWaterfall(event, "wf", pass)
		if mode == Waterfall {
			if err != nil || off == nil {
				t.Errorf("OnWaterfall(%s): %v", event, err)
			}
			continue
		}
		if !errors.Is(err, ErrWrongMode) || off != nil {
			t.Errorf("OnWaterfall(%s, a %s event) = %v, want ErrWrongMode", event, mode, err)
		}
		if n := len(b.Listeners(event)); n != 0 {
			t.Errorf("refused subscription left %d listeners on %s", n, event)
		}
	}
	if _, err := b.OnWaterfall(custom, "wf", pass); err != nil {
		t.Errorf("OnWaterfall on a plugin event: %v", err)
	}
}

func TestNilListenerIsRefused(t *testing.T) {
	b := quietBus()
	if _, err := b.On(custom, "nil", nil); !errors.Is(err, ErrNilListener) {
		t.Errorf("On(nil) = %v", err)
	}
	if _, err := b.OnWaterfall(custom, "nil", nil); !errors.Is(err, ErrNilListener) {
		t.Errorf("OnWaterfall(nil) = %v", err)
	}
	if n := len(b.Listeners(custom)); n != 0 {
		t.Errorf("%d listeners after refused subscriptions", n)
	}
}

func TestNilContext(t *testing.T) {
	b := quietBus()
	var got context.Context
	mustOn(t, b, custom, "a", func(ctx context.Context, _ any) error { got = ctx; return nil })
	var nilCtx context.Context // bad input the bus tolerates
	if err := b.Emit(nilCtx, custom, nil); err != nil || got == nil {
		t.Errorf("Emit(nil ctx) = %v, listener ctx %v", err, got)
	}
}

func TestModeOf(t *testing.T) {
	for event, want := range map[string]Mode{
		EventProviderAdded:   Plain,
		EventProviderRemoved: Contained,
		EventAgentPreStep:    Serial,
		EventAssemble:        Waterfall,
		EventAgentRequest:    Waterfall,
		EventToolPreExecute:  Waterfall,
		EventToolPostExecute: Waterfall,
		EventAgentStart:      Contained,
		EventAgentEnd:        Contained,
		EventTurnStart:       Contained,
		EventTurnEnd:         Contained,
		EventPluginLoaded:    Contained,
		EventPluginUnloaded:  Contained,
		EventSubagentStart:   Contained,
		EventSubagentEnd:     Contained,
		custom:               Any,
	} {
		if got := ModeOf(event); got != want {
			t.Errorf("ModeOf(%q) = %s, want %s", event, got, want)
		}
	}
	for m, want := range map[Mode]string{Any: "any", Plain: "plain", Contained: "contained",
		Serial: "serial", Waterfall: "waterfall", Mode(99): "Mode(99)"} {
		if got := m.String(); got != want {
			t.Errorf("Mode(%d).String() = %q, want %q", m, got, want)
		}
	}
}

// TestConcurrentUse subscribes, unsubscribes and dispatches from many
// goroutines at once; run with -race.
func TestConcurrentUse(t *testing.T) {
	b := New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				off := mustOn(t, b, custom, fmt.Sprintf("g%d-%d", g, i), func(context.Context, any) error { return nil })
				offW := mustOnWaterfall(t, b, custom, "w", func(_ context.Context, p any) (any, error) { return p, nil })
				if err := b.Emit(context.Background(), custom, i); err != nil {
					t.Error(err)
				}
				if _, err := b.Waterfall(context.Background(), custom, i); err != nil {
					t.Error(err)
				}
				_ = b.EmitContained(context.Background(), custom, i)
				_ = b.Listeners(custom)
				off()
				offW()
			}
		})
	}
	wg.Wait()
	if n := len(b.Listeners(custom)); n != 0 {
		t.Errorf("%d listeners left after every off", n)
	}
}
