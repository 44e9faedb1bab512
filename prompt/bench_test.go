package prompt

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"text/template"
)

// benchPrompt builds a prompt of about size bytes with refs references
// spread evenly over 10 variables, and the same content as a text/template.
func benchPrompt(size, refs int) (text, tmpl string, vars map[string]Value, data map[string]string) {
	vars = map[string]Value{}
	data = map[string]string{}
	for i := range 10 {
		name := fmt.Sprintf("var_%d", i)
		vars[name] = Value{Text: fmt.Sprintf("value-%d", i), OK: true}
		data[name] = vars[name].Text
	}
	filler := strings.Repeat("lorem ipsum dolor sit amet, ", size/refs/28+1)[:size/refs]
	var b, t strings.Builder
	for i := range refs {
		b.WriteString(filler)
		t.WriteString(filler)
		fmt.Fprintf(&b, "{{var_%d}}", i%10)
		fmt.Fprintf(&t, "{{.var_%d}}", i%10)
	}
	return b.String(), t.String(), vars, data
}

// BenchmarkRender renders a 1 MB prompt with 10k references (and 10 MB with
// 100k, for linearity) beside text/template rendering the same content.
// Compare ns/op: dsh render must be at or under 2 ms at 1 MB, no slower
// than text/template, and about 10x at 10 MB.
func BenchmarkRender(b *testing.B) {
	for _, sz := range []struct {
		name       string
		size, refs int
	}{{"1MB", 1 << 20, 10_000}, {"10MB", 10 << 20, 100_000}} {
		text, tmplText, vars, data := benchPrompt(sz.size, sz.refs)
		a := &Assembly{Sections: []AssembledSection{{Name: "bench", Text: text}}, Variables: vars}
		b.Run("dsh/"+sz.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Render(a); err != nil {
					b.Fatal(err)
				}
			}
		})
		tm := template.Must(template.New("bench").Option("missingkey=error").Parse(tmplText))
		b.Run("text_template/"+sz.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			var sb strings.Builder
			for b.Loop() {
				sb.Reset()
				sb.Grow(len(text))
				if err := tm.Execute(&sb, data); err != nil {
					b.Fatal(err)
				}
			}
			_ = io.Discard
		})
	}
}
