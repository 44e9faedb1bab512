package subagent_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/internal/subagent"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

type fakeProvider struct {
	name    string
	caps    subagent.Capabilities
	inherit bool
	started chan subagent.Request
}

func (f *fakeProvider) Name() string                        { return f.name }
func (f *fakeProvider) Capabilities() subagent.Capabilities { return f.caps }
func (f *fakeProvider) InheritsParentContext() bool         { return f.inherit }
func (f *fakeProvider) Start(ctx context.Context, req subagent.Request) (subagent.Run, error) {
	if f.started != nil {
		f.started <- req
	}
	return &fakeRun{done: make(chan struct{})}, nil
}

// fakeRun ends only when cancelled.
type fakeRun struct {
	once   sync.Once
	done   chan struct{}
	reason string
}

func (r *fakeRun) ID() string { return "child-1" }
func (r *fakeRun) Cancel(reason string) {
	r.once.Do(func() { r.reason = reason; close(r.done) })
}
func (r *fakeRun) Wait(ctx context.Context) (subagent.Result, error) {
	select {
	case <-r.done:
		return subagent.Result{StopReason: subagent.StopAborted, Text: "partial"}, nil
	case <-ctx.Done():
		return subagent.Result{}, ctx.Err()
	}
}

func TestProviderAddedListenerFailureRollsBack(t *testing.T) {
	bus := events.New(nil)
	reg := subagent.NewRegistry(bus)
	var removed []string
	if _, err := bus.On(events.EventProviderRemoved, "observer", func(_ context.Context, p any) error {
		removed = append(removed, p.(subagent.ProviderEvent).Provider.Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	off, err := bus.On(events.EventProviderAdded, "refuser", func(context.Context, any) error {
		return errors.New("cannot take it")
	})
	if err != nil {
		t.Fatal(err)
	}
	err = reg.Register(context.Background(), &fakeProvider{name: "spawn"})
	if err == nil {
		t.Fatal("Register succeeded although a provider-added listener failed")
	}
	if _, ok := reg.Lookup("spawn"); ok || len(reg.Providers()) != 0 {
		t.Fatalf("the provider stayed registered after the rollback: %v", reg.Providers())
	}
	if len(removed) != 1 || removed[0] != "spawn" {
		t.Fatalf("the rollback told provider-removed listeners %v, want [spawn]", removed)
	}
	off()
	if err := reg.Register(context.Background(), &fakeProvider{name: "spawn"}); err != nil {
		t.Fatalf("registering again after the rollback: %v", err)
	}
}

func TestProviderRemovedFailingListenerDoesNotStarveLater(t *testing.T) {
	bus := events.New(nil)
	reg := subagent.NewRegistry(bus)
	if err := reg.Register(context.Background(), &fakeProvider{name: "fork", inherit: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.On(events.EventProviderRemoved, "thrower", func(context.Context, any) error {
		panic("listener bug")
	}); err != nil {
		t.Fatal(err)
	}
	var dropped string
	if _, err := bus.On(events.EventProviderRemoved, "later", func(_ context.Context, p any) error {
		dropped = p.(subagent.ProviderEvent).Provider.Name
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	err := reg.Unregister(context.Background(), "fork")
	if !errors.Is(err, events.ErrListenerPanic) {
		t.Fatalf("Unregister error = %v, want the listener's panic reported", err)
	}
	if dropped != "fork" {
		t.Fatal("the listener after a failing one was not called")
	}
	if _, ok := reg.Lookup("fork"); ok {
		t.Fatal("the provider is still registered after Unregister")
	}
}

func TestStartChecksCapabilitiesAndDepth(t *testing.T) {
	reg := subagent.NewRegistry(events.New(nil))
	p := &fakeProvider{name: "spawn", caps: subagent.Capabilities{MaxDepth: 2}}
	if err := reg.Register(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err := reg.Start(ctx, "nope", subagent.Request{Prompt: "x"})
	if !errors.Is(err, subagent.ErrUnknownProvider) {
		t.Fatalf("unknown provider: %v", err)
	}
	_, err = reg.Start(ctx, "spawn", subagent.Request{Prompt: "x", OutputSchema: []byte(`{}`)})
	var ce *subagent.CapabilityError
	if !errors.As(err, &ce) || ce.Capability != "output_schema" || !errors.Is(err, subagent.ErrUnsupported) {
		t.Fatalf("output schema: %v", err)
	}
	_, err = reg.Start(ctx, "spawn", subagent.Request{Prompt: "x", Tools: []string{"read"}})
	if !errors.As(err, &ce) || ce.Capability != "tool_filter" {
		t.Fatalf("tool filter: %v", err)
	}
	_, err = reg.Start(ctx, "spawn", subagent.Request{Prompt: "x", Parent: prompt.AgentFacts{Depth: 2}})
	if !errors.Is(err, subagent.ErrDepth) {
		t.Fatalf("depth 3 under a limit of 2: %v", err)
	}
	if _, err := reg.Start(ctx, "spawn", subagent.Request{Prompt: "x", Parent: prompt.AgentFacts{Depth: 1}}); err != nil {
		t.Fatalf("depth 2 under a limit of 2: %v", err)
	}
}

func TestRunCancelledWithParentAndEndEmitted(t *testing.T) {
	bus := events.New(nil)
	reg := subagent.NewRegistry(bus)
	p := &fakeProvider{name: "spawn", started: make(chan subagent.Request, 1)}
	if err := reg.Register(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	ends := make(chan subagent.EndEvent, 2)
	if _, err := bus.On(events.EventSubagentEnd, "t", func(_ context.Context, e any) error {
		ends <- e.(subagent.EndEvent)
		return errors.New("observers cannot fail a child")
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan subagent.Result, 1)
	go func() {
		res, err := reg.Run(ctx, "spawn", subagent.Request{Prompt: "x"})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	<-p.started
	cancel()
	select {
	case res := <-done:
		if res.StopReason != subagent.StopAborted {
			t.Fatalf("stop reason %q, want aborted", res.StopReason)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancelling the parent did not end the child")
	}
	if e := <-ends; e.StopReason != subagent.StopAborted || e.ID != "child-1" || e.LastMessage != "partial" {
		t.Fatalf("subagent/end = %+v", e)
	}
}
