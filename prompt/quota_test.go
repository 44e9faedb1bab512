package prompt

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestQuota(t *testing.T) {
	q := NewQuota(100)
	if got := q.Remaining("p", 30); got != 30 {
		t.Errorf("Remaining(p, 30) = %d", got)
	}
	if err := q.Charge("p", 30, 25, "own"); err != nil {
		t.Fatal(err)
	}
	if got := q.Remaining("p", 30); got != 5 {
		t.Errorf("after 25: Remaining = %d, want 5", got)
	}
	err := q.Charge("p", 30, 6, "own")
	var qe *QuotaError
	if !errors.As(err, &qe) || !errors.Is(err, ErrPromptQuota) || qe.Owner != "p" || qe.Quota != "own" || qe.Limit != 30 {
		t.Fatalf("over the owner's quota: %v", err)
	}
	if q.Used() != 25 {
		t.Errorf("a refused charge was counted: used %d", q.Used())
	}
	// Other owners share the whole prompt's quota.
	if err := q.Charge("", 0, 70, ""); err != nil {
		t.Fatal(err)
	}
	if got := q.Remaining("r", 1000); got != 5 {
		t.Errorf("Remaining for another owner = %d, want what is left of the whole (5)", got)
	}
	err = q.Charge("r", 1000, 6, "own")
	if !errors.As(err, &qe) || qe.Quota != "whole-prompt quota" || qe.Limit != 100 || !strings.Contains(err.Error(), `"r" would bring`) {
		t.Fatalf("over the whole quota: %v", err)
	}
	// No quota on ctx: only the owner's own limit applies.
	var none *Quota
	if none.Remaining("p", 10) != 10 || none.Charge("p", 10, 11, "own") == nil || none.Charge("p", 10, 10, "own") != nil {
		t.Error("a nil Quota does not apply the owner's limit")
	}
	if QuotaFrom(WithQuota(context.Background(), q)) != q || QuotaFrom(context.Background()) != nil {
		t.Error("WithQuota/QuotaFrom")
	}
}

// TestAssembleChargesStatic: static sections are charged as the assembly
// takes them in, and the first past the quota fails it, named.
func TestAssembleChargesStatic(t *testing.T) {
	r := NewRegistry(nil)
	for _, s := range []Section{{Name: "a", Text: strings.Repeat("a", 60)}, {Name: "b", Order: 1, Text: strings.Repeat("b", 60)}} {
		if _, err := r.RegisterSection(s); err != nil {
			t.Fatal(err)
		}
	}
	q := NewQuota(100)
	_, err := r.Assemble(WithQuota(context.Background(), q), AssembleContext{})
	var pe *ProviderError
	if !errors.As(err, &pe) || pe.Name != "b" || !errors.Is(err, ErrPromptQuota) {
		t.Fatalf("assemble past the quota: %v", err)
	}
	if _, err := r.Assemble(WithQuota(context.Background(), NewQuota(120)), AssembleContext{}); err != nil {
		t.Fatalf("within the quota: %v", err)
	}
}

func TestRenderLimit(t *testing.T) {
	a := &Assembly{Sections: []AssembledSection{{Name: "amp", Text: "x{{v}}{{v}}{{v}}y"}},
		Variables: map[string]Value{"v": {Text: strings.Repeat("v", 100), OK: true}}}
	out, err := RenderLimit(a, 302)
	if err != nil || len(out) != 302 {
		t.Fatalf("at the limit: %d bytes, %v", len(out), err)
	}
	_, err = RenderLimit(a, 301)
	if !errors.Is(err, ErrPromptQuota) || !strings.Contains(err.Error(), `section "amp"`) {
		t.Fatalf("one byte past: %v", err)
	}
	_, err = RenderLimit(a, 150)
	if !errors.Is(err, ErrPromptQuota) {
		t.Fatalf("past the limit in a variable: %v", err)
	}
	if got, _ := Render(a); got != out {
		t.Errorf("Render without a limit differs")
	}
}
