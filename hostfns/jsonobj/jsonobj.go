// Package jsonobj reads a JSON object's top-level members without
// reflection and, once warm, without allocating.
//
// It exists for the hot path of a tool call: a Go guest compiled to Wasm
// spends tens of microseconds in encoding/json's reflective decoder for
// arguments that a direct scan reads in well under one. Parse validates the
// whole document as strictly as encoding/json does (the same grammar, the
// same nesting limit) and records where each top-level member's key and
// value are; values are converted only when asked for.
//
// Differences from encoding/json, on purpose: keys match exactly, not case
// insensitively; when a key appears twice, Lookup finds the last one, as
// Unmarshal keeps the last. Invalid UTF-8 inside strings is accepted and
// replaced with U+FFFD when the string is decoded, as encoding/json does.
//
// Canonical writes the one form of a document that every reader takes the
// same way (no key twice, or twice but for case; numbers a float64 holds;
// shallow nesting; one spelling per string): the host gives it, for a tool
// call's arguments, to the hooks and the tool alike.
package jsonobj

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting Parse accepts, encoding/json's limit.
const MaxDepth = 10000

// Kind is the JSON type of a value.
type Kind uint8

const (
	Invalid Kind = iota
	Null
	Bool
	Number
	String
	Array
	Object
)

var kindNames = [...]string{"invalid", "null", "boolean", "number", "string", "array", "object"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// ErrSyntax is wrapped by every error Parse returns.
var ErrSyntax = errors.New("invalid JSON")

// ErrType is wrapped by the conversions' errors when a value is not of the
// asked kind (or, for Int, not an integer that fits).
var ErrType = errors.New("wrong JSON type")

// SyntaxError is a Parse failure: what was wrong, at which byte offset.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.Offset, e.Msg)
}

func (e *SyntaxError) Unwrap() error { return ErrSyntax }

// Value is one member's value: its raw bytes and its kind. It points into
// the parsed document and is valid as long as the document's bytes are.
type Value struct {
	raw     []byte
	kind    Kind
	escaped bool // a string holding backslash escapes or bytes >= 0x80
}

// Kind is the value's JSON type.
func (v Value) Kind() Kind { return v.kind }

// Raw is the value as it appears in the document.
func (v Value) Raw() []byte { return v.raw }

type member struct {
	key     []byte // raw, without quotes
	escaped bool
	val     Value
}

// Obj is a parsed JSON object. The zero Obj is ready for Parse, and
// reusing one keeps Parse from allocating.
type Obj struct {
	members []member
	scratch []byte
}

// Parse validates doc, which must be one JSON object with optional
// surrounding whitespace, and records its top-level members. On error the
// Obj is empty.
func (o *Obj) Parse(doc []byte) error {
	o.members = o.members[:0]
	p := parser{b: doc}
	p.skipSpace()
	if p.i >= len(p.b) {
		return p.fail("empty document; want a JSON object")
	}
	if p.b[p.i] != '{' {
		if err := p.value(0); err != nil {
			return err
		}
		return &SyntaxError{Offset: 0, Msg: "want a JSON object, found " + p.last.String()}
	}
	if err := p.object(0, o); err != nil {
		o.members = o.members[:0]
		return err
	}
	p.skipSpace()
	if p.i < len(p.b) {
		o.members = o.members[:0]
		return p.fail("data after the JSON object")
	}
	return nil
}

// Len is the number of top-level members, duplicates included.
func (o *Obj) Len() int { return len(o.members) }

// Lookup returns the value of the last member named key.
func (o *Obj) Lookup(key string) (Value, bool) {
	for i := len(o.members) - 1; i >= 0; i-- {
		m := &o.members[i]
		if !m.escaped {
			if string(m.key) == key {
				return m.val, true
			}
			continue
		}
		o.scratch = appendUnquoted(o.scratch[:0], m.key)
		if string(o.scratch) == key {
			return m.val, true
		}
	}
	return Value{}, false
}

// Key returns member i's key, decoded, appended to dst.
func (o *Obj) Key(dst []byte, i int) []byte {
	m := &o.members[i]
	if !m.escaped {
		return append(dst, m.key...)
	}
	return appendUnquoted(dst, m.key)
}

// Value returns member i's value.
func (o *Obj) Value(i int) Value { return o.members[i].val }

// Only checks that every member's key is one of keys, and names the first
// that is not.
func (o *Obj) Only(keys ...string) error {
	for i := range o.members {
		k := o.Key(o.scratch[:0], i)
		o.scratch = k
		found := false
		for _, want := range keys {
			if string(k) == want {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("unknown field %q", k)
		}
	}
	return nil
}

// verbatim reports whether a string body decodes to itself: no escapes,
// and valid UTF-8.
func verbatim(s []byte, escaped bool) bool {
	return !escaped || bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s)
}

func typeErr(v Value, want string) error {
	return fmt.Errorf("%w: want %s, found %s", ErrType, want, v.kind)
}

// AppendText appends the decoded string to dst. Invalid UTF-8 and lone
// surrogates become U+FFFD.
func (v Value) AppendText(dst []byte) ([]byte, error) {
	if v.kind != String {
		return dst, typeErr(v, "a string")
	}
	s := v.raw[1 : len(v.raw)-1]
	if verbatim(s, v.escaped) {
		return append(dst, s...), nil
	}
	return appendUnquoted(dst, s), nil
}

// Text returns the decoded string. It allocates; AppendText and Verbatim
// do not have to.
func (v Value) Text() (string, error) {
	if v.kind != String {
		return "", typeErr(v, "a string")
	}
	b, _ := v.AppendText(nil)
	return string(b), nil
}

// Verbatim returns a string's body as it appears in the document when it
// decodes to itself (no escapes, valid UTF-8), so a reader can use it
// without copying; ok is false otherwise, and for values that are not
// strings.
func (v Value) Verbatim() (body []byte, ok bool) {
	if v.kind != String {
		return nil, false
	}
	s := v.raw[1 : len(v.raw)-1]
	if !verbatim(s, v.escaped) {
		return nil, false
	}
	return s[:len(s):len(s)], true
}

// Bool returns a boolean value.
func (v Value) Bool() (bool, error) {
	if v.kind != Bool {
		return false, typeErr(v, "a boolean")
	}
	return v.raw[0] == 't', nil
}

// Int returns a number that is an integer fitting in int64, as
// encoding/json decodes into an int64: no fraction, no exponent.
func (v Value) Int() (int64, error) {
	if v.kind != Number {
		return 0, typeErr(v, "an integer")
	}
	n, err := strconv.ParseInt(string(v.raw), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s is not an integer that fits in 64 bits", ErrType, v.raw)
	}
	return n, nil
}

// Float returns a number as a float64.
func (v Value) Float() (float64, error) {
	if v.kind != Number {
		return 0, typeErr(v, "a number")
	}
	f, err := strconv.ParseFloat(string(v.raw), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%w: %s does not fit in a float64", ErrType, v.raw)
	}
	return f, nil
}

type parser struct {
	b    []byte
	i    int
	last Kind
	esc  bool // the last string scanned needs decoding
}

func (p *parser) fail(msg string) error { return &SyntaxError{Offset: p.i, Msg: msg} }

func (p *parser) failChar(context string) error {
	if p.i >= len(p.b) {
		return p.fail("unexpected end of input " + context)
	}
	return p.fail(fmt.Sprintf("unexpected %s %s", quoteChar(p.b[p.i]), context))
}

func quoteChar(c byte) string {
	if c == '\'' {
		return `'\''`
	}
	if c == '"' {
		return `'"'`
	}
	return strconv.QuoteRuneToASCII(rune(c))
}

func (p *parser) skipSpace() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// value scans one value at p.i (whitespace already skipped).
func (p *parser) value(depth int) error {
	if p.i >= len(p.b) {
		return p.fail("unexpected end of input, want a value")
	}
	switch c := p.b[p.i]; {
	case c == '"':
		p.last = String
		return p.str()
	case c == '{':
		p.last = Object
		return p.object(depth, nil)
	case c == '[':
		p.last = Array
		return p.array(depth)
	case c == '-' || c >= '0' && c <= '9':
		p.last = Number
		return p.number()
	case c == 't':
		p.last = Bool
		return p.literal("true")
	case c == 'f':
		p.last = Bool
		return p.literal("false")
	case c == 'n':
		p.last = Null
		return p.literal("null")
	}
	return p.failChar("looking for the beginning of a value")
}

func (p *parser) literal(lit string) error {
	if len(p.b)-p.i < len(lit) || string(p.b[p.i:p.i+len(lit)]) != lit {
		for j := 0; j < len(lit); j++ {
			if p.i+j >= len(p.b) || p.b[p.i+j] != lit[j] {
				p.i += j
				return p.failChar("in literal " + lit)
			}
		}
	}
	p.i += len(lit)
	return nil
}

// object scans an object at p.i; into, if not nil, receives its members.
func (p *parser) object(depth int, into *Obj) error {
	if depth++; depth > MaxDepth {
		return p.fail("exceeded max depth")
	}
	p.i++ // {
	p.skipSpace()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return nil
	}
	for {
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return p.failChar("looking for the beginning of an object key string")
		}
		k0 := p.i
		if err := p.str(); err != nil {
			return err
		}
		key, kesc := p.b[k0+1:p.i-1], p.esc
		p.skipSpace()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return p.failChar("after object key")
		}
		p.i++
		p.skipSpace()
		v0 := p.i
		if err := p.value(depth); err != nil {
			return err
		}
		if into != nil {
			into.members = append(into.members, member{key: key, escaped: kesc,
				val: Value{raw: p.b[v0:p.i], kind: p.last, escaped: p.last == String && p.esc}})
		}
		p.skipSpace()
		if p.i >= len(p.b) {
			return p.fail("unexpected end of input after object key:value pair")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
			p.skipSpace()
		case '}':
			p.i++
			p.last = Object
			return nil
		default:
			return p.failChar("after object key:value pair")
		}
	}
}

func (p *parser) array(depth int) error {
	if depth++; depth > MaxDepth {
		return p.fail("exceeded max depth")
	}
	p.i++ // [
	p.skipSpace()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return nil
	}
	for {
		if err := p.value(depth); err != nil {
			return err
		}
		p.skipSpace()
		if p.i >= len(p.b) {
			return p.fail("unexpected end of input after array element")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
			p.skipSpace()
		case ']':
			p.i++
			p.last = Array
			return nil
		default:
			return p.failChar("after array element")
		}
	}
}

func (p *parser) number() error {
	b, i := p.b, p.i
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		}
	default:
		p.i = i
		return p.failChar("in numeric literal")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			p.i = i
			return p.failChar("after decimal point in numeric literal")
		}
		for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			p.i = i
			return p.failChar("in exponent of numeric literal")
		}
		for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		}
	}
	p.i = i
	return nil
}

// SWAR constants: a byte-wise "has a byte less than n / equal to c" test
// over eight bytes at once.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// The scans below go through a string in windows of 16 bytes (two words)
// and step over a two-byte escape without leaving their loop. They are
// shaped for Go's Wasm target, where it matters most: there, each taken
// branch goes through a dispatch at the top of its function (a br_table),
// so a window has no branch but its loop's and finds its first special
// byte without one (two trailing-zero counts). Measured in Wasm (wazero),
// this scans a 1 KiB string with 64 escapes in half the time of eight
// bytes at a time with an inner 32-byte loop, and decodes it in 40% of
// the time of finding each run and appending it; windows of four words
// were slower than two.

// special has the high bit of each byte of x set that is a quote, a
// backslash or a control character, and maybe of bytes after such a byte;
// it is zero when there is none. The lowest byte flagged is always a real
// one: a false flag needs a borrow from a lower byte, and only a flagged
// byte lends one. Bytes outside ASCII are not flagged (the "&^ x" drops
// them, and they lend no borrow).
func special(x uint64) uint64 {
	q := x ^ (ones * '"')
	s := x ^ (ones * '\\')
	return ((x - ones*0x20) | (q - ones) | (s - ones)) &^ x & highs
}

// specialOrHigh is special with the bytes outside ASCII flagged too.
func specialOrHigh(x uint64) uint64 {
	q := x ^ (ones * '"')
	s := x ^ (ones * '\\')
	return ((x - ones*0x20) | (q - ones) | (s - ones) | x) & highs
}

// backslashOrHigh flags, as special does, the backslashes and the bytes
// outside ASCII of x: the bytes a decoder cannot copy as they are.
func backslashOrHigh(x uint64) uint64 {
	return ((x ^ (ones * '\\')) - ones | x) & highs
}

// first16 returns the index of the first flagged byte of a 16-byte
// window, given its two words' flags (not both zero), without a branch:
// the second word's count is added only when the first's is 64.
func first16(m0, m1 uint64) int {
	t0, t1 := bits.TrailingZeros64(m0), bits.TrailingZeros64(m1)
	return (t0 + t1&-(t0>>6)) >> 3
}

// notOneByteEscape is zero for the bytes that may follow a backslash to
// make a two-byte escape (all of JSON's escapes but \u), one for the rest.
var notOneByteEscape = func() (t [256]byte) {
	for i := range t {
		t[i] = 1
	}
	for _, c := range `"\/bfnrt` {
		t[c] = 0
	}
	return t
}()

// str scans a string at p.i (the opening quote), leaving p.i after the
// closing quote and p.esc set if the string needs decoding (escapes, or
// bytes outside ASCII whose UTF-8 must be checked).
func (p *parser) str() error {
	b := p.b
	i := p.i + 1
	esc := false
	for {
		// Until the string is known to need decoding, bytes outside
		// ASCII stop the scan as well. After, they no longer matter, and
		// two-byte escapes are stepped over in a loop over 16-byte
		// windows (17 in the document: an escape's second byte may follow
		// the window).
		if !esc {
			// 32 at a time: the first special byte ends this loop, and
			// the one below finds it.
			for i+32 <= len(b) && specialOrHigh(load64(b, i))|specialOrHigh(load64(b, i+8))|specialOrHigh(load64(b, i+16))|specialOrHigh(load64(b, i+24)) == 0 {
				i += 32
			}
		} else {
			for i+17 <= len(b) {
				m0, m1 := special(load64(b, i)), special(load64(b, i+8))
				if m0|m1 == 0 {
					i += 16
					continue
				}
				i += first16(m0, m1)
				if uint(b[i])^'\\'|uint(notOneByteEscape[b[i+1]]) != 0 {
					break // a quote, a control character, \u or a bad escape
				}
				i += 2
			}
		}
		// Eight bytes at a time near the end.
		for i+8 <= len(b) {
			if m := specialOrHigh(load64(b, i)); m != 0 {
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		if i >= len(b) {
			p.i = i
			return p.fail("unexpected end of input in string literal")
		}
		c := b[i]
		switch {
		case c == '"':
			p.i, p.esc = i+1, esc
			return nil
		case c == '\\':
			esc = true
			i++
			if i >= len(b) {
				p.i = i
				return p.fail("unexpected end of input in string escape code")
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				i++
				for j := 0; j < 4; j++ {
					if i >= len(b) || unhex(b[i]) < 0 {
						p.i = i
						return p.failChar("in \\u hexadecimal character escape")
					}
					i++
				}
			default:
				p.i = i
				return p.failChar("in string escape code")
			}
		case c < 0x20:
			p.i = i
			return p.failChar("in string literal")
		case c >= utf8.RuneSelf:
			esc = true
			i++
		default:
			i++
		}
	}
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func hex4(s []byte) rune {
	return rune(unhex(s[0])<<12 | unhex(s[1])<<8 | unhex(s[2])<<4 | unhex(s[3]))
}

// unescape maps the byte after a backslash to the byte a two-byte escape
// stands for; it is zero for 'u' and for bytes no escape starts with.
var unescape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// room returns b resliced to its capacity, reallocated first (keeping
// b[:n]) unless it has at least free bytes after the first n.
func room(b []byte, n, free int) []byte {
	if cap(b)-n >= free {
		return b[:cap(b)]
	}
	nb := make([]byte, max(n+free, 2*cap(b)))
	copy(nb, b[:n])
	return nb
}

// appendUnquoted decodes the body of a string Parse has validated,
// replacing invalid UTF-8 and lone surrogates with U+FFFD as
// encoding/json does.
//
// Plain bytes are copied by whole windows: a window is stored to the
// output before it is looked at, and the output then advances only past
// its plain bytes, so the run between two escapes costs loads and stores,
// not a byte loop or a call to copy it. A store may write past what is
// decoded so far; what comes next overwrites it. So that nothing is left
// written past the end of the result, in dst's spare capacity, 16-byte
// stores are used while at least 96 bytes of input remain, which decode
// to at least 16 (the shortest decoding is \u0041's, 6 bytes to 1), and
// 8-byte stores while at least 48 remain; the rest is copied run by run.
//
// Invariant: the output has room for as many bytes as remain of the input
// (only an invalid byte decodes longer, to U+FFFD, and makes more room).
func appendUnquoted(dst, s []byte) []byte {
	o := len(dst)
	d := room(dst, o, len(s))
	i := 0
	for i < len(s) {
		for len(s)-i >= 96 {
			x0, x1 := load64(s, i), load64(s, i+8)
			store64(d, o, x0)
			store64(d, o+8, x1)
			m0, m1 := backslashOrHigh(x0), backslashOrHigh(x1)
			if m0|m1 == 0 {
				i += 16
				o += 16
				continue
			}
			k := first16(m0, m1)
			i += k
			o += k
			if uint(s[i])^'\\'|uint(notOneByteEscape[s[i+1]]) != 0 {
				break // outside ASCII, or \u
			}
			d[o] = unescape[s[i+1]]
			o++
			i += 2
		}
		if len(s)-i >= 48 {
			x := load64(s, i)
			store64(d, o, x)
			m := backslashOrHigh(x)
			if m == 0 {
				i += 8
				o += 8
				continue
			}
			k := bits.TrailingZeros64(m) / 8
			i += k
			o += k
		} else {
			j := plainRun(s, i)
			o += copy(d[o:], s[i:j])
			if i = j; i >= len(s) {
				break
			}
		}
		// s[i] is a backslash or a byte outside ASCII.
		if s[i] == '\\' {
			if c := unescape[s[i+1]]; c != 0 {
				d[o] = c
				o++
				i += 2
				continue
			}
			// \uXXXX, maybe the first half of a surrogate pair.
			r := hex4(s[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				pair := utf8.RuneError
				if len(s)-i >= 6 && s[i] == '\\' && s[i+1] == 'u' {
					if d := utf16.DecodeRune(r, hex4(s[i+2:])); d != utf8.RuneError {
						pair = d
						i += 6
					}
				}
				r = pair
			}
			o += utf8.EncodeRune(d[o:], r)
			continue
		}
		// Outside ASCII: copy a valid sequence, replace an invalid byte.
		r, n := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && n == 1 {
			d = room(d, o, len(s)-i+2)
			o += copy(d[o:], "\uFFFD")
		} else {
			o += copy(d[o:], s[i:i+n])
		}
		i += n
	}
	return d[:o]
}

// plainRun returns the index of the first byte at or after i that is a
// backslash or outside ASCII, or len(s). Eight bytes are tested at a time.
func plainRun(s []byte, i int) int {
	for i+8 <= len(s) {
		if m := backslashOrHigh(load64(s, i)); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
		i += 8
	}
	for i < len(s) && s[i] != '\\' && s[i] < utf8.RuneSelf {
		i++
	}
	return i
}

const hexDigits = "0123456789abcdef"

// quoteEscape maps the ASCII bytes AppendQuote escapes by letter to that
// letter; zero for the rest.
var quoteEscape = [256]byte{'"': '"', '\\': '\\', '\n': 'n', '\r': 'r', '\t': 't'}

// AppendQuote appends s to dst as a JSON string. Invalid UTF-8 becomes
// U+FFFD; control characters, quotes and backslashes are escaped (\n, \r
// and \t by letter, the other controls as \u00XX), and nothing else is:
// encoding/json also escapes U+2028, U+2029 and, by default, <, > and &,
// and writes \b and \f by letter. Both decode to the same string.
//
// As appendUnquoted, it stores a window before looking at it and advances
// past its plain bytes; quoting never shortens, so those stores stay
// within the result. Invariant: the output has room for as many bytes as
// remain of the input, and the closing quote.
func AppendQuote(dst []byte, s string) []byte {
	o := len(dst)
	d := room(dst, o, len(s)+2)
	d[o] = '"'
	o++
	i := 0
	for i < len(s) {
		for len(s)-i >= 16 {
			x0, x1 := loadString64(s, i), loadString64(s, i+8)
			store64(d, o, x0)
			store64(d, o+8, x1)
			m0, m1 := specialOrHigh(x0), specialOrHigh(x1)
			if m0|m1 == 0 {
				i += 16
				o += 16
				continue
			}
			k := first16(m0, m1)
			i += k
			o += k
			// A quote, a backslash, \n, \r or \t: escape it here, if
			// there is room. Anything else: below.
			e := quoteEscape[s[i]]
			if e == 0 || cap(d)-o < len(s)-i+2 {
				break
			}
			d[o] = '\\'
			d[o+1] = e
			o += 2
			i++
		}
		if i >= len(s) {
			break
		}
		if len(s)-i >= 8 {
			x := loadString64(s, i)
			store64(d, o, x)
			m := specialOrHigh(x)
			if m == 0 {
				i += 8
				o += 8
				continue
			}
			k := bits.TrailingZeros64(m) / 8
			i += k
			o += k
		} else if c := s[i]; c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			d[o] = c
			o++
			i++
			continue
		}
		// s[i] needs a look: escape it, check its UTF-8, or replace it.
		c := s[i]
		if c < utf8.RuneSelf {
			d = room(d, o, len(s)-i+6)
			if e := quoteEscape[c]; e != 0 {
				d[o], d[o+1] = '\\', e
				o += 2
			} else {
				d[o], d[o+1], d[o+2], d[o+3], d[o+4], d[o+5] = '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf]
				o += 6
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			d = room(d, o, len(s)-i+3)
			o += copy(d[o:], "\uFFFD")
		} else {
			o += copy(d[o:], s[i:i+n])
		}
		i += n
	}
	d[o] = '"'
	return d[:o+1]
}
