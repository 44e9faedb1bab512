package prompt

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Render turns an assembly into prompt text. Each section's text is
// interpolated, sections whose text is empty after interpolation are
// dropped, and the rest are joined with one blank line ("\n\n").
//
// Interpolation is strict. A complete group is "{{", then one or more
// characters other than '{' and '}', then "}}" — or "{{}}". For each "{{"
// in the text, left to right:
//
//   - A complete group whose content matches [a-z][a-z0-9_]* is a
//     reference. It is replaced by the variable's value; the value is never
//     scanned again. A name no variable is registered under fails with
//     ErrUnknownVariable (the error lists the registered names; nothing
//     but registered names is ever found, so {{constructor}} is unknown).
//     A registered variable without a value fails with ErrNoValue.
//   - A complete group with any other content ({{ model }}, {{Model}},
//     {{}}) fails with ErrMalformedReference.
//   - A "{{" that does not open a complete group fails with
//     ErrUnbalancedBraces if "}}" occurs anywhere after it in the section,
//     even as the close of a later group ({{{model}}}, {{a{b}}).
//   - Otherwise the "{{" is prose, and it and the rest of the section pass
//     through unchanged.
//
// A "}}" with no "{{" before it is ordinary text. Every error is a
// *RenderError naming the section.
func Render(a *Assembly) (string, error) { return RenderLimit(a, 0) }

// RenderLimit is Render with a bound on the rendered prompt's length:
// past limit bytes (<= 0: no bound) it stops, before writing more, with a
// *QuotaError. Variables interpolated many times can make a prompt much
// longer than the text it was assembled from; this keeps that bounded.
func RenderLimit(a *Assembly, limit int64) (string, error) {
	var b strings.Builder
	size := 0
	for _, s := range a.Sections {
		size += len(s.Text) + 2
	}
	b.Grow(size)
	first := true
	for i := range a.Sections {
		s := &a.Sections[i]
		mark := b.Len()
		if !first {
			b.WriteString("\n\n")
		}
		start := b.Len()
		if err := renderSection(&b, s.Name, s.Text, a.Variables, limit); err != nil {
			if re, ok := err.(*RenderError); ok {
				re.Owner = s.Owner
			}
			return "", err
		}
		if b.Len() == start {
			// Empty after interpolation: drop it and its separator.
			out := b.String()[:mark]
			b.Reset()
			b.Grow(size)
			b.WriteString(out)
			continue
		}
		first = false
	}
	return b.String(), nil
}

// RenderText interpolates one text as a section called name.
func RenderText(name, text string, vars map[string]Value) (string, error) {
	var b strings.Builder
	b.Grow(len(text))
	if err := renderSection(&b, name, text, vars, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

func renderSection(b *strings.Builder, section, text string, vars map[string]Value, limit int64) error {
	over := func(n int) error {
		if limit > 0 && int64(b.Len()+n) > limit {
			return &QuotaError{Quota: "whole-prompt quota, rendered (section " + strconv.Quote(section) + ")", Limit: limit, Want: int64(b.Len() + n)}
		}
		return nil
	}
	// A "}}" exists at or after position p iff lastClose >= p.
	lastClose := strings.LastIndex(text, "}}")
	pos := 0 // text[:pos] has been written
	for {
		k := strings.Index(text[pos:], "{{")
		if k < 0 {
			if err := over(len(text) - pos); err != nil {
				return err
			}
			b.WriteString(text[pos:])
			return nil
		}
		i := pos + k
		// Find the end of the run of non-brace characters after "{{".
		j := i + 2
		for j < len(text) && text[j] != '{' && text[j] != '}' {
			j++
		}
		if j+1 < len(text) && text[j] == '}' && text[j+1] == '}' {
			name := text[i+2 : j]
			if !validVariableName(name) {
				return renderErr(section, ErrMalformedReference, text, i, j+2, nil)
			}
			v, ok := vars[name]
			if !ok {
				return renderErr(section, ErrUnknownVariable, text, i, j+2, vars)
			}
			if !v.OK {
				return renderErr(section, ErrNoValue, text, i, j+2, nil)
			}
			if err := over(i - pos + len(v.Text)); err != nil {
				return err
			}
			b.WriteString(text[pos:i])
			b.WriteString(v.Text)
			pos = j + 2
			continue
		}
		if lastClose >= i+2 {
			end := i + 2 + strings.Index(text[i+2:], "}}") + 2
			return renderErr(section, ErrUnbalancedBraces, text, i, end, nil)
		}
		// A lone "{{": no "}}" follows, so no later group can complete.
		if err := over(len(text) - pos); err != nil {
			return err
		}
		b.WriteString(text[pos:])
		return nil
	}
}

func renderErr(section string, sentinel error, text string, i, end int, vars map[string]Value) error {
	ref := text[i:end]
	const maxRef = 80
	if len(ref) > maxRef {
		n := maxRef
		for n > 0 && !utf8.RuneStart(ref[n]) {
			n--
		}
		ref = ref[:n] + "…"
	}
	e := &RenderError{Section: section, Err: sentinel, Ref: ref, Offset: i}
	if vars != nil {
		e.Known = make([]string, 0, len(vars))
		for k, v := range vars {
			e.Known = append(e.Known, k)
			if v.Owner != "" {
				if e.Owners == nil {
					e.Owners = map[string]string{}
				}
				e.Owners[k] = v.Owner
			}
		}
		slices.Sort(e.Known)
	}
	return e
}

// String is a debugging aid.
func (v Value) String() string {
	if !v.OK {
		return "<no value>"
	}
	return fmt.Sprintf("%q", v.Text)
}
