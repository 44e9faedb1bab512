package prompt

import (
	"errors"
	"strings"
	"testing"
)

func vars(kv ...string) map[string]Value {
	m := map[string]Value{}
	for _, s := range kv {
		name, val, ok := strings.Cut(s, "=")
		m[name] = Value{Text: val, OK: ok}
	}
	return m
}

func TestRenderText(t *testing.T) {
	v := vars("model=deepseek-chat", "cwd=/w", "empty=", "unset", "a_1=A")
	tests := []struct {
		name, text, want string
		err              error
	}{
		{"plain", "no references", "no references", nil},
		{"one reference", "Running {{model}}.", "Running deepseek-chat.", nil},
		{"adjacent references", "{{model}}{{cwd}}", "deepseek-chat/w", nil},
		{"digits and underscore", "{{a_1}}", "A", nil},
		{"empty value is a value", "[{{empty}}]", "[]", nil},
		{"unknown", "{{modle}}", "", ErrUnknownVariable},
		{"constructor is unknown", "{{constructor}}", "", ErrUnknownVariable},
		{"proto is unknown", "{{__proto__}}", "", ErrMalformedReference},
		{"hasOwnProperty is malformed", "{{hasOwnProperty}}", "", ErrMalformedReference},
		{"registered without value", "at {{unset}}", "", ErrNoValue},
		{"spaces inside", "{{ model }}", "", ErrMalformedReference},
		{"empty group", "{{}}", "", ErrMalformedReference},
		{"capital", "{{Model}}", "", ErrMalformedReference},
		{"leading digit", "{{1x}}", "", ErrMalformedReference},
		{"dash", "{{a-b}}", "", ErrMalformedReference},
		{"triple braces", "{{{model}}}", "", ErrUnbalancedBraces},
		{"inner open brace", "{{a{b}}", "", ErrUnbalancedBraces},
		{"open before a later group", "x {{ y {{model}}", "", ErrUnbalancedBraces},
		{"single close inside", "{{a}b}}", "", ErrUnbalancedBraces},
		{"lone open passes", "a {{ b", "a {{ b", nil},
		{"lone open at end", "end {{", "end {{", nil},
		{"lone open after a reference", "{{model}} then {{ b", "deepseek-chat then {{ b", nil},
		{"open with single close after", "{{x}", "{{x}", nil},
		{"triple open no close", "{{{", "{{{", nil},
		{"stray close is text", "a }} b", "a }} b", nil},
		{"stray close after group", "{{model}} }}", "deepseek-chat }}", nil},
		{"single braces are text", "{x} {model}", "{x} {model}", nil},
		{"unicode around", "é{{model}}ü", "édeepseek-chatü", nil},
		{"newline inside group", "{{mo\ndel}}", "", ErrMalformedReference},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RenderText("sec", tc.text, v)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("RenderText(%q) error = %v, want %v", tc.text, err, tc.err)
				}
				var re *RenderError
				if !errors.As(err, &re) || re.Section != "sec" || !strings.Contains(err.Error(), `"sec"`) {
					t.Fatalf("error %v does not name the section", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("RenderText(%q) = %q, %v; want %q", tc.text, got, err, tc.want)
			}
		})
	}
}

func TestRenderValuesAreNotRescanned(t *testing.T) {
	v := vars("a={{b}}", "b=B", "c={{", "d=}}")
	got, err := RenderText("s", "{{a}} {{c}}{{d}}", v)
	if err != nil || got != "{{b}} {{}}" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestRenderUnknownListsRegistered(t *testing.T) {
	_, err := RenderText("persona", "Hi {{modle}}", vars("model=m", "cwd"))
	var re *RenderError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v", err)
	}
	if re.Ref != "{{modle}}" || re.Offset != 3 || strings.Join(re.Known, ",") != "cwd,model" {
		t.Fatalf("RenderError = %+v", re)
	}
	if want := `render section "persona": unknown variable {{modle}} at byte 3 (registered: cwd, model)`; err.Error() != want {
		t.Fatalf("message = %q, want %q", err.Error(), want)
	}
	_, err = RenderText("s", "{{x}}", nil)
	if !strings.Contains(err.Error(), "no variables are registered") {
		t.Fatalf("message = %q", err)
	}
}

func TestRenderErrorOffsetAfterSubstitution(t *testing.T) {
	_, err := RenderText("s", "{{model}} and {{bad}}", vars("model=a-much-longer-value"))
	var re *RenderError
	if !errors.As(err, &re) || re.Offset != 14 {
		t.Fatalf("err = %#v", err)
	}
}

func TestRenderSections(t *testing.T) {
	a := &Assembly{
		Sections: []AssembledSection{
			{Name: "a", Text: "first {{model}}"},
			{Name: "empty", Text: ""},
			{Name: "empty-after", Text: "{{blank}}"},
			{Name: "b", Text: "second"},
		},
		Variables: vars("model=m", "blank="),
	}
	got, err := Render(a)
	if err != nil || got != "first m\n\nsecond" {
		t.Fatalf("Render = %q, %v", got, err)
	}
	a.Sections = []AssembledSection{{Name: "only-empty"}}
	if got, err := Render(a); err != nil || got != "" {
		t.Fatalf("Render = %q, %v", got, err)
	}
	a.Sections = []AssembledSection{{Name: "ok", Text: "x"}, {Name: "broken", Text: "{{nope}}"}}
	_, err = Render(a)
	var re *RenderError
	if !errors.As(err, &re) || re.Section != "broken" {
		t.Fatalf("err = %v", err)
	}
}
