package events_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/internal/events"
)

// A plain event propagates: the registry that emits provider-added rolls
// the registration back when a listener cannot take the provider.
func ExampleBus_Emit() {
	bus := events.New(slog.New(slog.DiscardHandler))
	registered := map[string]bool{}
	_, _ = bus.On(events.EventProviderAdded, "tool:subagent", func(_ context.Context, p any) error {
		if p == "acp" {
			return errors.New("cannot describe provider acp")
		}
		return nil
	})

	for _, provider := range []string{"fork", "acp"} {
		registered[provider] = true
		if err := bus.Emit(context.Background(), events.EventProviderAdded, provider); err != nil {
			delete(registered, provider) // roll back
			fmt.Println("rolled back:", err)
		}
	}
	fmt.Println("registered:", registered)
	// Output:
	// rolled back: event "subagent/provider-added": listener "tool:subagent": cannot describe provider acp
	// registered: map[fork:true]
}

// A contained event reaches every listener: one failing mirror cannot stop
// a later one from dropping the removed provider.
func ExampleBus_EmitContained() {
	bus := events.New(slog.New(slog.DiscardHandler))
	_, _ = bus.On(events.EventProviderRemoved, "plugin:broken", func(context.Context, any) error {
		panic("bug in a plugin")
	})
	_, _ = bus.On(events.EventProviderRemoved, "tool:subagent", func(_ context.Context, p any) error {
		fmt.Println("tool:subagent dropped", p)
		return nil
	})

	err := bus.EmitContained(context.Background(), events.EventProviderRemoved, "fork")
	fmt.Println("reported:", errors.Is(err, events.ErrListenerPanic))
	// Output:
	// tool:subagent dropped fork
	// reported: true
}

// A serial event never has two dispatches running at once, so compaction,
// listening on agent/pre-step, never races itself. Firing it any other way
// is refused.
func ExampleBus_EmitSerial() {
	bus := events.New(slog.New(slog.DiscardHandler))
	_, _ = bus.On(events.EventAgentPreStep, "compaction", func(_ context.Context, p any) error {
		fmt.Println("compaction measures", p, "tokens")
		return nil
	})

	if err := bus.EmitSerial(context.Background(), events.EventAgentPreStep, 91000); err != nil {
		fmt.Println(err)
	}
	err := bus.Emit(context.Background(), events.EventAgentPreStep, 91000)
	fmt.Println(errors.Is(err, events.ErrWrongMode))
	// Output:
	// compaction measures 91000 tokens
	// true
}

// In a waterfall each listener receives the previous one's output.
func ExampleBus_Waterfall() {
	bus := events.New(slog.New(slog.DiscardHandler))
	_, _ = bus.OnWaterfall(events.EventToolPostExecute, "redact", func(_ context.Context, p any) (any, error) {
		return strings.ReplaceAll(p.(string), "s3cret", "[redacted]"), nil
	})
	_, _ = bus.OnWaterfall(events.EventToolPostExecute, "truncate", func(_ context.Context, p any) (any, error) {
		if s := p.(string); len(s) > 24 {
			return s[:24] + "…", nil
		}
		return p, nil
	})

	out, err := bus.Waterfall(context.Background(), events.EventToolPostExecute, "token=s3cret; lines=4096; more output")
	fmt.Println(out, err)
	// Output:
	// token=[redacted]; lines=… <nil>
}

func ExampleModeOf() {
	for _, e := range []string{
		events.EventProviderAdded,
		events.EventProviderRemoved,
		events.EventAgentPreStep,
		events.EventAssemble,
		"plugin:facts/refresh",
	} {
		fmt.Printf("%s: %s\n", e, events.ModeOf(e))
	}
	// Output:
	// subagent/provider-added: plain
	// subagent/provider-removed: contained
	// agent/pre-step: serial
	// system-prompt/assemble: waterfall
	// plugin:facts/refresh: any
}
