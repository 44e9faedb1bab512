package jsonobj

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// CanonicalMaxDepth is the deepest nesting Canonical accepts: far more than
// any tool's arguments need, and shallow enough that a hook program written
// in any language parses it (a recursive parser that runs out of stack on
// deep nesting would fail the hook, and a failing hook does not block).
const CanonicalMaxDepth = 64

// ErrNotCanonical is wrapped by the errors Canonical returns for a valid
// JSON document it refuses (a duplicate key, keys that differ only in
// case, a number that does not fit, nesting too deep).
var ErrNotCanonical = errors.New("not canonical JSON")

// CanonicalError is a document Canonical refuses: what, at which byte
// offset. It unwraps to ErrNotCanonical, or to ErrSyntax when the document
// is not JSON at all.
type CanonicalError struct {
	Offset int
	Msg    string
	syntax bool
}

func (e *CanonicalError) Error() string {
	return fmt.Sprintf("at byte %d: %s", e.Offset, e.Msg)
}

func (e *CanonicalError) Unwrap() error {
	if e.syntax {
		return ErrSyntax
	}
	return ErrNotCanonical
}

// Canonical appends to dst the canonical form of doc, one JSON value
// (tool arguments are an object, but which value a tool takes is the
// tool's to say), or refuses it. The canonical form is the one text every JSON reader takes
// to mean the same thing:
//
//   - doc is one JSON value (the grammar Parse accepts, surrounding
//     whitespace allowed), nested at most CanonicalMaxDepth deep;
//   - no object, at any depth, has two keys that are equal, or equal under
//     Unicode simple case folding ("Command" and "command", "ſ" and "s",
//     the Kelvin sign and "k"): encoding/json and many hook programs match
//     keys that way, while the tools match them exactly;
//   - every number is finite as a float64 (1e400 is refused);
//
// and it is written compactly (no whitespace), members in their order,
// numbers and literals as written, every string and key quoted by
// AppendQuote: invalid UTF-8 and lone surrogates become U+FFFD, and only
// quotes, backslashes and control characters are escaped, so the same
// string always has the same bytes ("\u0072m" is written "rm").
//
// Canonical allocates; it is for the host, once per tool call.
func Canonical(dst, doc []byte) ([]byte, error) {
	c := canon{p: parser{b: doc}, out: dst}
	c.p.skipSpace()
	if c.p.i >= len(doc) {
		return dst, c.syntax("empty document; want a JSON value")
	}
	if err := c.value(0); err != nil {
		return dst, err
	}
	c.p.skipSpace()
	if c.p.i < len(doc) {
		return dst, c.syntax("data after the JSON value")
	}
	return c.out, nil
}

type canon struct {
	p   parser
	out []byte
	str []byte // scratch: a decoded string
}

func (c *canon) syntax(msg string) error {
	return &CanonicalError{Offset: c.p.i, Msg: msg, syntax: true}
}

func (c *canon) refuse(off int, format string, args ...any) error {
	return &CanonicalError{Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// wrap turns a parser error into a CanonicalError.
func (c *canon) wrap(err error) error {
	var se *SyntaxError
	if errors.As(err, &se) {
		return &CanonicalError{Offset: se.Offset, Msg: se.Msg, syntax: true}
	}
	return err
}

// value writes the value at c.p.i (whitespace skipped) in canonical form.
func (c *canon) value(depth int) error {
	p := &c.p
	if p.i >= len(p.b) {
		return c.syntax("unexpected end of input, want a value")
	}
	switch b := p.b[p.i]; {
	case b == '"':
		s, err := c.string()
		if err != nil {
			return err
		}
		c.out = AppendQuote(c.out, s)
		return nil
	case b == '{':
		return c.object(depth + 1)
	case b == '[':
		return c.array(depth + 1)
	case b == '-' || b >= '0' && b <= '9':
		start := p.i
		if err := p.number(); err != nil {
			return c.wrap(err)
		}
		num := p.b[start:p.i]
		f, err := strconv.ParseFloat(string(num), 64)
		if err != nil || math.IsInf(f, 0) {
			return c.refuse(start, "the number %.40s does not fit in a float64", num)
		}
		c.out = append(c.out, num...)
		return nil
	}
	start := p.i
	if err := p.value(depth); err != nil {
		return c.wrap(err)
	}
	c.out = append(c.out, p.b[start:p.i]...) // true, false, null
	return nil
}

// string scans a string at c.p.i and returns it decoded.
func (c *canon) string() (string, error) {
	p := &c.p
	start := p.i
	if err := p.str(); err != nil {
		return "", c.wrap(err)
	}
	body := p.b[start+1 : p.i-1]
	if !p.esc {
		return string(body), nil
	}
	c.str = appendUnquoted(c.str[:0], body)
	return string(c.str), nil
}

func (c *canon) object(depth int) error {
	p := &c.p
	if depth > CanonicalMaxDepth {
		return c.refuse(p.i, "nested deeper than %d", CanonicalMaxDepth)
	}
	p.i++ // {
	c.out = append(c.out, '{')
	p.skipSpace()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		c.out = append(c.out, '}')
		return nil
	}
	seen := map[string]string{} // folded key -> key
	for n := 0; ; n++ {
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return c.wrap(p.failChar("looking for the beginning of an object key string"))
		}
		at := p.i
		key, err := c.string()
		if err != nil {
			return err
		}
		f := foldKey(key)
		if prev, dup := seen[f]; dup {
			if prev == key {
				return c.refuse(at, "duplicate key %q", key)
			}
			return c.refuse(at, "keys %q and %q differ only in case", prev, key)
		}
		seen[f] = key
		if n > 0 {
			c.out = append(c.out, ',')
		}
		c.out = AppendQuote(c.out, key)
		c.out = append(c.out, ':')
		p.skipSpace()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return c.wrap(p.failChar("after object key"))
		}
		p.i++
		p.skipSpace()
		if err := c.value(depth); err != nil {
			return err
		}
		p.skipSpace()
		if p.i >= len(p.b) {
			return c.syntax("unexpected end of input after object key:value pair")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
			p.skipSpace()
		case '}':
			p.i++
			c.out = append(c.out, '}')
			return nil
		default:
			return c.wrap(p.failChar("after object key:value pair"))
		}
	}
}

func (c *canon) array(depth int) error {
	p := &c.p
	if depth > CanonicalMaxDepth {
		return c.refuse(p.i, "nested deeper than %d", CanonicalMaxDepth)
	}
	p.i++ // [
	c.out = append(c.out, '[')
	p.skipSpace()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		c.out = append(c.out, ']')
		return nil
	}
	for n := 0; ; n++ {
		if n > 0 {
			c.out = append(c.out, ',')
		}
		if err := c.value(depth); err != nil {
			return err
		}
		p.skipSpace()
		if p.i >= len(p.b) {
			return c.syntax("unexpected end of input after array element")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
			p.skipSpace()
		case ']':
			p.i++
			c.out = append(c.out, ']')
			return nil
		default:
			return c.wrap(p.failChar("after array element"))
		}
	}
}

// foldKey maps s to one representative of its class under Unicode simple
// case folding (strings.EqualFold): each rune becomes the lower case of
// the smallest rune of its folding orbit (for ASCII, its lower case). Two
// keys are EqualFold exactly when their foldKeys are equal.
func foldKey(s string) string {
	ascii, upper := true, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		ascii = ascii && c < utf8.RuneSelf
		upper = upper || 'A' <= c && c <= 'Z'
	}
	if ascii && !upper {
		return s
	}
	b := make([]byte, 0, len(s))
	for _, r := range s {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b = utf8.AppendRune(b, unicode.ToLower(m))
	}
	return string(b)
}
