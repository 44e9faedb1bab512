package prompt

import (
	"context"
	"errors"
	"testing"
)

func TestAssembleOrdersAndResolves(t *testing.T) {
	r := NewRegistry(nil)
	r.RegisterSection(Section{Name: "guide-b", Order: 100, Text: "B"})
	r.RegisterSection(Section{Name: "persona", Order: 0, Text: "P on {{model}} in {{cwd}}"})
	r.RegisterSection(Section{Name: "guide-a", Order: 100, Text: "A"})
	r.RegisterSection(Section{Name: "identity", Order: -100, Text: "I"})
	r.RegisterSection(Section{Name: "dyn", Order: 150, Dynamic: func(_ context.Context, ac AssembleContext) (string, error) {
		if ac.Agent == nil {
			return "", nil
		}
		return "agent " + ac.Agent.ID, nil
	}})
	r.RegisterVariable("model", func(_ context.Context, ac AssembleContext) (string, bool, error) {
		if ac.Agent == nil || ac.Agent.Model == "" {
			return "", false, nil
		}
		return ac.Agent.Model, true, nil
	})
	r.RegisterVariable("cwd", func(_ context.Context, ac AssembleContext) (string, bool, error) {
		if ac.Agent == nil || ac.Agent.Cwd == "" {
			return "", false, nil
		}
		return ac.Agent.Cwd, true, nil
	})
	ctx := context.Background()
	a, err := r.Assemble(ctx, AssembleContext{Agent: &AgentFacts{ID: "a1", Model: "m1", Cwd: "/w"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Render(a)
	if want := "I\n\nP on m1 in /w\n\nB\n\nA\n\nagent a1"; err != nil || got != want {
		t.Fatalf("Render = %q, %v; want %q", got, err, want)
	}
	// A second agent sees its own facts; a cwd-less one fails at render.
	a, _ = r.Assemble(ctx, AssembleContext{Agent: &AgentFacts{ID: "a2", Model: "m2"}})
	if _, err := Render(a); !errors.Is(err, ErrNoValue) {
		t.Fatalf("err = %v", err)
	}
	// No agent at all: providers tolerate it.
	a, err = r.Assemble(ctx, AssembleContext{})
	if err != nil || a.Variables["model"].OK {
		t.Fatalf("a = %+v, err = %v", a, err)
	}
}

func TestAssembleProviderErrors(t *testing.T) {
	boom := errors.New("boom")
	r := NewRegistry(nil)
	d, _ := r.RegisterSection(Section{Name: "bad", Dynamic: func(context.Context, AssembleContext) (string, error) { return "", boom }})
	_, err := r.Assemble(context.Background(), AssembleContext{})
	var pe *ProviderError
	if !errors.Is(err, boom) || !errors.Is(err, ErrProvider) || !errors.As(err, &pe) || pe.Name != "bad" || pe.Kind != "section" {
		t.Fatalf("err = %v", err)
	}
	d.Dispose()
	r.RegisterVariable("v", func(context.Context, AssembleContext) (string, bool, error) { return "", false, boom })
	if _, err := r.Assemble(context.Background(), AssembleContext{}); !errors.As(err, &pe) || pe.Kind != "variable" {
		t.Fatalf("err = %v", err)
	}
}

func TestAssembleWaterfall(t *testing.T) {
	r := NewRegistry(nil)
	r.RegisterSection(Section{Name: "persona", Text: "powered by {{model}}"})
	r.RegisterVariable("model", func(_ context.Context, ac AssembleContext) (string, bool, error) {
		return "", false, nil // the model is late-bound: no value from options
	})
	var order []string
	r.RegisterAssembleHook("outer", func(ctx context.Context, ac AssembleContext, next AssembleFunc) (*Assembly, error) {
		order = append(order, "outer>")
		a, err := next(ctx, ac)
		order = append(order, "<outer")
		if err != nil {
			return nil, err
		}
		a.Sections = append(a.Sections, AssembledSection{Name: "added", Order: -5, Text: "first"})
		a.SortSections()
		return a, nil
	})
	r.RegisterAssembleHook("supplier", func(ctx context.Context, ac AssembleContext, next AssembleFunc) (*Assembly, error) {
		order = append(order, "supplier>")
		a, err := next(ctx, ac)
		order = append(order, "<supplier")
		if err != nil {
			return nil, err
		}
		a.SetVariable("model", "late-model")
		return a, nil
	})
	a, err := r.Assemble(context.Background(), AssembleContext{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Render(a)
	if err != nil || got != "first\n\npowered by late-model" {
		t.Fatalf("Render = %q, %v", got, err)
	}
	if want := "outer> supplier> <supplier <outer"; joinSp(order) != want {
		t.Fatalf("order = %v", order)
	}
	bad, _ := r.RegisterAssembleHook("broken", func(context.Context, AssembleContext, AssembleFunc) (*Assembly, error) {
		return nil, errors.New("hook failed")
	})
	_, err = r.Assemble(context.Background(), AssembleContext{})
	var pe *ProviderError
	if !errors.As(err, &pe) || pe.Name != "broken" || pe.Kind != "assemble hook" {
		t.Fatalf("err = %v", err)
	}
	bad.Dispose()
}

func joinSp(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}
