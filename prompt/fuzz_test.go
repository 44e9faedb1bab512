package prompt

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

// referenceRender is a deliberately naive second implementation of the
// rendering rules, written from the rules rather than from Render: regular
// expressions, byte-at-a-time, quadratic.
var (
	groupRE = regexp.MustCompile(`^\{\{([^{}]*)\}\}`)
	nameRE  = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
)

func referenceRender(text string, vars map[string]Value) (string, error) {
	var out strings.Builder
	for i := 0; i < len(text); {
		if !strings.HasPrefix(text[i:], "{{") {
			out.WriteByte(text[i])
			i++
			continue
		}
		if m := groupRE.FindStringSubmatch(text[i:]); m != nil {
			name := m[1]
			if !nameRE.MatchString(name) {
				return "", ErrMalformedReference
			}
			v, ok := vars[name]
			if !ok {
				return "", ErrUnknownVariable
			}
			if !v.OK {
				return "", ErrNoValue
			}
			out.WriteString(v.Text)
			i += len(m[0])
			continue
		}
		if strings.Contains(text[i+2:], "}}") {
			return "", ErrUnbalancedBraces
		}
		out.WriteString(text[i:])
		break
	}
	return out.String(), nil
}

var renderSentinels = []error{ErrMalformedReference, ErrUnknownVariable, ErrNoValue, ErrUnbalancedBraces}

// parseFuzzVars turns "a=1;b;C=x" into variables; names are not validated,
// so malformed names reach the renderer as a hostile hook might put them.
func parseFuzzVars(spec string) map[string]Value {
	m := map[string]Value{}
	for _, kv := range strings.Split(spec, ";") {
		if kv == "" {
			continue
		}
		name, val, ok := strings.Cut(kv, "=")
		m[name] = Value{Text: val, OK: ok}
	}
	return m
}

var refNameRE = regexp.MustCompile(`\{\{([a-z][a-z0-9_]*)\}\}`)

func FuzzRender(f *testing.F) {
	for _, s := range []string{
		"Running {{model}}.", "{{ model }}", "{{}}", "{{Model}}", "{{{model}}}", "{{a{b}}",
		"x {{ y {{model}}", "a {{ b", "}} {{model}}", "{{constructor}}", "{{__proto__}}",
		"{{model}}{{cwd}}{{", "{{x}", "{{a}b}}", "é{{model}}\x00{{cwd}}", "{{a}}{{}}", "{{a}} {{ b }}",
	} {
		f.Add(s, "model=deepseek-chat;cwd;x={{model}};y={{")
	}
	f.Fuzz(func(t *testing.T, text, spec string) {
		vars := parseFuzzVars(spec)
		got, err := RenderText("fuzz", text, vars)
		want, wantErr := referenceRender(text, vars)
		// The registration-time check agrees with Render: with every
		// well-formed name in the text defined, Render fails exactly when
		// References does, with the same error, and References finds
		// exactly what such a render needs.
		refs, refErr := References("fuzz", text)
		all := map[string]Value{}
		for _, m := range refNameRE.FindAllStringSubmatch(text, -1) {
			all[m[1]] = Value{Text: "v", OK: true}
		}
		_, allErr := RenderText("fuzz", text, all)
		if (refErr == nil) != (allErr == nil) || refErr != nil && refErr.Error() != allErr.Error() {
			t.Fatalf("text %q: References err = %v, Render err with every name defined = %v", text, refErr, allErr)
		}
		if refErr == nil {
			only := map[string]Value{}
			for _, r := range refs {
				only[r] = Value{Text: "v", OK: true}
			}
			if _, err := RenderText("fuzz", text, only); err != nil {
				t.Fatalf("text %q: with only the references %q defined, Render fails: %v", text, refs, err)
			}
		}
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("text %q vars %q: Render err = %v, reference err = %v", text, spec, err, wantErr)
		}
		if err != nil {
			if !errors.Is(err, wantErr) {
				t.Fatalf("text %q: Render fails with %v, reference with %v", text, err, wantErr)
			}
			var re *RenderError
			if !errors.As(err, &re) || re.Section != "fuzz" {
				t.Fatalf("error %v is not a RenderError naming the section", err)
			}
			for _, s := range renderSentinels {
				if s != wantErr && errors.Is(err, s) {
					t.Fatalf("error %v matches two rules", err)
				}
			}
			return
		}
		if got != want {
			t.Fatalf("text %q: Render = %q, reference = %q", text, got, want)
		}
		// Values are never re-scanned: a text that is exactly one
		// reference renders to the value verbatim, whatever it holds.
		for name, v := range vars {
			if !v.OK || !nameRE.MatchString(name) {
				continue
			}
			out, err := RenderText("fuzz", "{{"+name+"}}", vars)
			if err != nil || out != v.Text {
				t.Fatalf("value of %q re-scanned or altered: %q, %v", name, out, err)
			}
		}
	})
}
