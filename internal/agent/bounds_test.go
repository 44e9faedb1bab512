package agent

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// TestAssemblyDeadline: a dynamic section that would take longer than the
// assembly's deadline fails the turn with ErrAssemblyTimeout, naming the
// section, at the deadline; the next turn works.
func TestAssemblyDeadline(t *testing.T) {
	reg := newRegistry(t, testPersona)
	var slow atomic.Bool
	slow.Store(true)
	if _, err := reg.RegisterSection(prompt.Section{Name: "slow", Order: 5, Dynamic: func(ctx context.Context, _ prompt.AssembleContext) (string, error) {
		if !slow.Load() {
			return "quick now", nil
		}
		select {
		case <-ctx.Done():
			return "", context.Cause(ctx)
		case <-time.After(30 * time.Second):
			return "too late", nil
		}
	}}); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, Options{Registry: reg, Bounds: AssemblyBounds{Timeout: 200 * time.Millisecond},
		Provider: scripted(t, step(2, 1, textAnswer("ok")))})
	start := time.Now()
	res := f.prompt(t, "one")
	took := time.Since(start)
	if res.End.Kind != session.EndError || !errors.Is(res.Err, ErrAssemblyTimeout) ||
		!errors.Is(res.Err, ErrPrompt) || !strings.Contains(res.Err.Error(), `section "slow"`) {
		t.Fatalf("turn = %+v, err %v", res.End, res.Err)
	}
	if took > 5*time.Second {
		t.Errorf("the turn took %v against a 200ms deadline", took)
	}
	slow.Store(false)
	if res := f.prompt(t, "two"); res.End.Kind != session.EndCompleted {
		t.Fatalf("the next turn: %+v, %v", res.End, res.Err)
	}
}

// TestPromptQuota: the whole-prompt quota counts static text as the
// assembly takes it in, and bounds the rendered prompt, which variables
// interpolated many times can make longer than what was assembled.
func TestPromptQuota(t *testing.T) {
	reg := newRegistry(t, testPersona)
	if _, err := reg.RegisterSection(prompt.Section{Name: "big", Order: 5, Text: strings.Repeat("b", 3000)}); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, Options{Registry: reg, Bounds: AssemblyBounds{PromptBytes: 2000}, Provider: scripted(t)})
	res := f.prompt(t, "one")
	if res.End.Kind != session.EndError || !errors.Is(res.Err, prompt.ErrPromptQuota) || !strings.Contains(res.Err.Error(), `section "big"`) {
		t.Fatalf("a 3000-byte section under a 2000-byte quota: %+v, %v", res.End, res.Err)
	}

	reg2 := newRegistry(t, testPersona)
	if _, err := reg2.RegisterVariable("blob", func(context.Context, prompt.AssembleContext) (string, bool, error) {
		return strings.Repeat("v", 600), true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg2.RegisterSection(prompt.Section{Name: "amp", Order: 5, Text: "{{blob}}{{blob}}{{blob}}{{blob}}"}); err != nil {
		t.Fatal(err)
	}
	f2 := newFixture(t, Options{Registry: reg2, Bounds: AssemblyBounds{PromptBytes: 2000}, Provider: scripted(t)})
	res = f2.prompt(t, "one")
	if res.End.Kind != session.EndError || !errors.Is(res.Err, prompt.ErrPromptQuota) || !strings.Contains(res.Err.Error(), "rendered") {
		t.Fatalf("a 2400-byte rendering under a 2000-byte quota: %+v, %v", res.End, res.Err)
	}
}

func TestAssemblyBoundsOptions(t *testing.T) {
	f := newFixture(t, Options{Provider: scripted(t)})
	if f.bounds.Timeout != DefaultAssemblyTimeout || f.bounds.PromptBytes != DefaultPromptBytes {
		t.Errorf("defaults: %+v", f.bounds)
	}
	_, err := New(context.Background(), Options{Session: f.sess, Provider: f.prov, Registry: f.reg, Tools: echoTools(),
		Bounds: AssemblyBounds{Timeout: -time.Second}})
	if !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("a negative timeout: %v", err)
	}
}
