package prompt

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

func static(v string) VariableFunc {
	return func(context.Context, AssembleContext) (string, bool, error) { return v, true, nil }
}

func TestRegistrationRules(t *testing.T) {
	r := NewRegistry(nil)
	mustOK := func(_ Disposer, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustOK(r.RegisterSection(Section{Name: "tool:bash", Order: 105, Text: "x"}))
	mustOK(r.RegisterVariable("model", static("m")))
	mustOK(r.RegisterTool(Tool{Name: "bash", Parameters: []byte(`{"type":"object"}`)}))
	tests := []struct {
		name string
		do   func() (Disposer, error)
		want error
	}{
		{"duplicate section", func() (Disposer, error) { return r.RegisterSection(Section{Name: "tool:bash"}) }, ErrDuplicateSection},
		{"empty section name", func() (Disposer, error) { return r.RegisterSection(Section{}) }, ErrInvalidSectionName},
		{"control char section", func() (Disposer, error) { return r.RegisterSection(Section{Name: "a\nb"}) }, ErrInvalidSectionName},
		{"duplicate variable", func() (Disposer, error) { return r.RegisterVariable("model", static("x")) }, ErrDuplicateVariable},
		{"variable capital", func() (Disposer, error) { return r.RegisterVariable("Model", static("x")) }, ErrInvalidVariable},
		{"variable leading digit", func() (Disposer, error) { return r.RegisterVariable("1a", static("x")) }, ErrInvalidVariable},
		{"variable leading underscore", func() (Disposer, error) { return r.RegisterVariable("_a", static("x")) }, ErrInvalidVariable},
		{"variable empty", func() (Disposer, error) { return r.RegisterVariable("", static("x")) }, ErrInvalidVariable},
		{"variable dash", func() (Disposer, error) { return r.RegisterVariable("a-b", static("x")) }, ErrInvalidVariable},
		{"variable nil provider", func() (Disposer, error) { return r.RegisterVariable("ok", nil) }, ErrInvalidVariable},
		{"duplicate tool", func() (Disposer, error) { return r.RegisterTool(Tool{Name: "bash"}) }, ErrDuplicateTool},
		{"tool name space", func() (Disposer, error) { return r.RegisterTool(Tool{Name: "my tool"}) }, ErrInvalidToolName},
		{"tool name dot", func() (Disposer, error) { return r.RegisterTool(Tool{Name: "a.b"}) }, ErrInvalidToolName},
		{"tool name empty", func() (Disposer, error) { return r.RegisterTool(Tool{Name: ""}) }, ErrInvalidToolName},
		{"tool name 65", func() (Disposer, error) { return r.RegisterTool(Tool{Name: strings.Repeat("a", 65)}) }, ErrInvalidToolName},
		{"tool schema array", func() (Disposer, error) { return r.RegisterTool(Tool{Name: "t", Parameters: []byte(`[]`)}) }, ErrInvalidToolSchema},
		{"tool schema junk", func() (Disposer, error) { return r.RegisterTool(Tool{Name: "t", Parameters: []byte(`{`)}) }, ErrInvalidToolSchema},
		{"tool schema null", func() (Disposer, error) { return r.RegisterTool(Tool{Name: "t", Parameters: []byte(`null`)}) }, ErrInvalidToolSchema},
		{"nil hook", func() (Disposer, error) { return r.RegisterAssembleHook("h", nil) }, ErrNilHook},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := tc.do()
			var re *RegistrationError
			if !errors.Is(err, tc.want) || !errors.As(err, &re) || d != nil {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	mustOK(r.RegisterTool(Tool{Name: strings.Repeat("A", 64)}))
	mustOK(r.RegisterTool(Tool{Name: "a-b_C9"}))
	secs, vs, tools := r.Names()
	if len(secs) != 1 || len(vs) != 1 || len(tools) != 3 {
		t.Fatalf("rejected registrations leaked: %v %v %v", secs, vs, tools)
	}
}

func TestDisposerRemovesOnlyItsOwnRegistration(t *testing.T) {
	r := NewRegistry(nil)
	d1, _ := r.RegisterSection(Section{Name: "s", Text: "one"})
	if err := d1.Dispose(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.RegisterSection(Section{Name: "s", Text: "two"}); err != nil {
		t.Fatal(err)
	}
	if err := d1.Dispose(); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("stale disposer: err = %v", err)
	}
	a, _ := r.Assemble(context.Background(), AssembleContext{})
	if len(a.Sections) != 1 || a.Sections[0].Text != "two" {
		t.Fatalf("stale disposer removed the new section: %+v", a.Sections)
	}
}

func TestChangeListenerRollsBack(t *testing.T) {
	r := NewRegistry(nil)
	var seen []string
	remove := r.OnChange(func(c Change) error {
		seen = append(seen, c.Kind.String()+" "+c.Name)
		if c.Name == "refused" {
			return errors.New("no")
		}
		return nil
	})
	if _, err := r.RegisterVariable("refused", static("x")); !errors.Is(err, ErrListenerRejected) {
		t.Fatalf("err = %v", err)
	}
	err := r.Update(func(tx *Tx) error {
		if _, err := tx.AddSection(Section{Name: "a"}); err != nil {
			return err
		}
		_, err := tx.AddTool(Tool{Name: "refused"})
		return err
	})
	if !errors.Is(err, ErrListenerRejected) {
		t.Fatalf("err = %v", err)
	}
	if s, v, tl := r.Names(); len(s)+len(v)+len(tl) != 0 {
		t.Fatalf("rolled-back update leaked: %v %v %v", s, v, tl)
	}
	d, err := r.RegisterSection(Section{Name: "kept"})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Dispose(); err != nil {
		t.Fatal(err)
	}
	remove()
	if _, err := r.RegisterVariable("refused", static("x")); err != nil {
		t.Fatalf("removed listener still runs: %v", err)
	}
	want := "variable added refused|section added a|tool added refused|section added kept|section removed kept"
	if got := strings.Join(seen, "|"); got != want {
		t.Fatalf("notifications\n got %s\nwant %s", got, want)
	}
}

func TestRemovalListenerFailureDoesNotBlockRemoval(t *testing.T) {
	r := NewRegistry(nil)
	d, _ := r.RegisterTool(Tool{Name: "t"})
	r.OnChange(func(c Change) error { return errors.New("listener broke") })
	if err := d.Dispose(); err != nil {
		t.Fatal(err)
	}
	if len(r.Tools()) != 0 {
		t.Fatal("tool not removed")
	}
}

func TestUpdateIsAtomic(t *testing.T) {
	r := NewRegistry(nil)
	err := r.Update(func(tx *Tx) error {
		tx.AddSection(Section{Name: "a"})
		tx.AddVariable("v", static("x"))
		return errors.New("abandon")
	})
	if err == nil || err.Error() != "abandon" {
		t.Fatalf("err = %v", err)
	}
	if s, v, _ := r.Names(); len(s)+len(v) != 0 {
		t.Fatal("failed update leaked")
	}
	// Concurrent assemblies see all of a swap or none of it.
	old, _ := r.RegisterSection(Section{Name: "gen", Text: "old"})
	oldVar, _ := r.RegisterVariable("gen", static("old"))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				a, err := r.Assemble(context.Background(), AssembleContext{})
				if err != nil {
					t.Error(err)
					return
				}
				if len(a.Sections) != 1 || a.Sections[0].Text != a.Variables["gen"].Text {
					t.Errorf("mixed assembly: %+v", a)
					return
				}
			}
		}()
	}
	for i := range 200 {
		gen := []string{"old", "new"}[i%2]
		err := r.Update(func(tx *Tx) error {
			if err := old.Tx(tx); err != nil {
				return err
			}
			if err := oldVar.Tx(tx); err != nil {
				return err
			}
			var err error
			if old, err = tx.AddSection(Section{Name: "gen", Text: gen}); err != nil {
				return err
			}
			oldVar, err = tx.AddVariable("gen", static(gen))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}

func TestHarnessSections(t *testing.T) {
	r := NewRegistry(nil)
	if _, _, err := RegisterHarnessSections(r, ""); err != nil {
		t.Fatal(err)
	}
	r.RegisterSection(Section{Name: "tool:bash", Order: 105, Text: "Check the exit code."})
	a, _ := r.Assemble(context.Background(), AssembleContext{})
	got, err := Render(a)
	if err != nil || got != Identity+"\n\nCheck the exit code." {
		t.Fatalf("Render = %q, %v", got, err)
	}
	if _, err := r.RegisterSection(Section{Name: PersonaSection}); !errors.Is(err, ErrDuplicateSection) {
		t.Fatalf("empty persona did not reserve its name: %v", err)
	}
	if _, _, err := RegisterHarnessSections(r, "again"); !errors.Is(err, ErrDuplicateSection) {
		t.Fatalf("err = %v", err)
	}
}
