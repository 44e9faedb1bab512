package prompt

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// A name the harness owns cannot be claimed by anyone else, whether the
// claim comes before or after the harness registers: the refusal is by
// owner, not by load order.
func TestReservedNamesAreTheHarnesss(t *testing.T) {
	claims := func(r *Registry) []error {
		var errs []error
		for _, name := range []string{IdentitySection, PersonaSection, "harness:anything", "deployment:tools"} {
			_, err := r.RegisterSection(Section{Name: name, Order: 5, Text: "evil", Owner: "plugin evil"})
			errs = append(errs, err)
			_, err = r.RegisterSection(Section{Name: name, Order: 5, Owner: "plugin evil",
				Dynamic: func(context.Context, AssembleContext) (string, error) { return "evil", nil }})
			errs = append(errs, err)
		}
		for _, name := range []string{ModelVariable, CwdVariable} {
			var err error
			r.Update(func(tx *Tx) error { _, err = tx.AddOwnedVariable(name, "plugin evil", static("evil")); return err })
			errs = append(errs, err)
		}
		return errs
	}
	harness := func(t *testing.T, r *Registry) {
		t.Helper()
		if _, _, err := RegisterHarnessSections(r, "Persona on {{model}}."); err != nil {
			t.Fatalf("the harness's own registration failed: %v", err)
		}
		for _, v := range []string{ModelVariable, CwdVariable} {
			if _, err := r.RegisterVariable(v, static(v+"-value")); err != nil {
				t.Fatalf("the harness's variable %s: %v", v, err)
			}
		}
	}
	check := func(t *testing.T, errs []error) {
		t.Helper()
		for i, err := range errs {
			var re *RegistrationError
			if !errors.Is(err, ErrReservedName) || !errors.As(err, &re) || !strings.Contains(err.Error(), "plugin evil") {
				t.Errorf("claim %d: err = %v, want ErrReservedName naming the claimant", i, err)
			}
		}
	}
	t.Run("plugin first", func(t *testing.T) {
		r := NewRegistry(nil)
		check(t, claims(r))
		harness(t, r)
		a, err := r.Assemble(context.Background(), AssembleContext{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := Render(a)
		if err != nil || got != Identity+"\n\nPersona on model-value." {
			t.Fatalf("prompt = %q, %v", got, err)
		}
	})
	t.Run("harness first", func(t *testing.T) {
		r := NewRegistry(nil)
		harness(t, r)
		check(t, claims(r))
	})
	t.Run("other names stay free", func(t *testing.T) {
		r := NewRegistry(nil)
		if _, err := r.RegisterSection(Section{Name: "plugin:harness:x", Order: 5, Owner: "plugin ok"}); err != nil {
			t.Fatal(err)
		}
		if err := r.Update(func(tx *Tx) error { _, err := tx.AddOwnedVariable("model_hint", "plugin ok", static("x")); return err }); err != nil {
			t.Fatal(err)
		}
	})
}

// A static section's template is checked when it is registered: a
// malformed one is a registration error now, not every turn's failure.
func TestStaticTemplateCheckedAtRegistration(t *testing.T) {
	r := NewRegistry(nil)
	for _, text := range []string{"{{ model }}", "a {{Model}} b", "{{}}", "{{{model}}}", "{{a{b}}", "x {{ y }} and {{model}}"} {
		_, err := r.RegisterSection(Section{Name: "s", Order: 5, Text: text, Owner: "plugin p"})
		var re *RenderError
		if !errors.Is(err, ErrInvalidTemplate) || !errors.As(err, &re) || re.Section != "s" {
			t.Errorf("%q: err = %v, want ErrInvalidTemplate wrapping a RenderError", text, err)
		}
	}
	if _, _, err := RegisterHarnessSections(r, "{{ model }}"); !errors.Is(err, ErrInvalidTemplate) {
		t.Errorf("a malformed persona: err = %v", err)
	}
	if s, _, _ := r.Names(); len(s) != 0 {
		t.Fatalf("refused sections were registered: %v", s)
	}
	// Well-formed text passes, whatever it references; a dynamic
	// section's text is checked when rendered.
	for i, text := range []string{"{{no_such_variable}}", "a {{ b", "}} x", "plain"} {
		if _, err := r.RegisterSection(Section{Name: "ok" + string(rune('a'+i)), Text: text}); err != nil {
			t.Errorf("%q: %v", text, err)
		}
	}
	if _, err := r.RegisterSection(Section{Name: "dyn", Dynamic: func(context.Context, AssembleContext) (string, error) { return "{{ x }}", nil }}); err != nil {
		t.Fatal(err)
	}
}

func TestDanglingReferences(t *testing.T) {
	r := NewRegistry(nil)
	d, err := r.RegisterVariable("date", static("today"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RegisterSection(Section{Name: "a", Text: "{{date}} {{date}} {{nope}}", Owner: "plugin a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.RegisterSection(Section{Name: "b", Text: "on {{date}}"}); err != nil {
		t.Fatal(err)
	}
	want := []Dangling{{Section: "a", Owner: "plugin a", Variable: "nope"}}
	if got := r.Dangling(); !slices.Equal(got, want) {
		t.Fatalf("Dangling = %v, want %v", got, want)
	}
	if err := d.Dispose(); err != nil {
		t.Fatal(err)
	}
	want = []Dangling{{"a", "plugin a", "date"}, {"a", "plugin a", "nope"}, {"b", "", "date"}}
	if got := r.Dangling(); !slices.Equal(got, want) {
		t.Fatalf("after removing date: Dangling = %v, want %v", got, want)
	}
	if !strings.Contains(want[2].String(), "the harness") {
		t.Fatalf("%s", want[2])
	}
}

// Render errors name the owner of the failing section and list every
// registered name, sorted, each with its owner where it has one.
func TestRenderErrorNamesOwners(t *testing.T) {
	r := NewRegistry(nil)
	r.RegisterVariable(ModelVariable, static("m"))
	r.Update(func(tx *Tx) error { _, err := tx.AddOwnedVariable("date", "plugin facts", static("d")); return err })
	if _, err := r.RegisterSection(Section{Name: "evil:s", Order: 3, Text: "{{nope}}", Owner: "plugin evil"}); err != nil {
		t.Fatal(err)
	}
	a, err := r.Assemble(context.Background(), AssembleContext{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Render(a)
	var re *RenderError
	if !errors.As(err, &re) || re.Owner != "plugin evil" || !slices.Equal(re.Known, []string{"date", "model"}) {
		t.Fatalf("err = %#v", err)
	}
	want := `render section "evil:s" of plugin evil: unknown variable {{nope}} at byte 0 (registered: date of plugin facts, model)`
	if err.Error() != want {
		t.Fatalf("err = %q\nwant  %q", err, want)
	}
}
