package jsonobj

// Tests of the string fast paths (the 16-byte windows of Parse's scan,
// appendUnquoted's stores ahead, AppendQuote's) against encoding/json and
// a byte-at-a-time reference, at every position around the windows'
// edges and the decoder's 48- and 96-byte thresholds.

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// pieces are what random string bodies are made of: plain ASCII, every
// kind of escape (valid or not), control characters, bytes outside ASCII
// valid and invalid (a lone continuation byte, a truncated sequence, an
// encoded surrogate, an overlong form), and the quote.
var pieces = []string{
	"a", "b", "xyz", "0123456789abcdef", " ", "\x7f",
	`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`,
	`\u0041`, `\u00e9`, `\u20ac`, `\ud83d\ude00`, `\ud800`, `\udc00`, `\ud800\u0041`, `\ud83d\ud83d\ude00`, `\uDBFF\uDFFF`, `\u0000`, `\u001f`,
	"é", "€", "😀", "\xff", "\x80", "\xe2\x82", "\xed\xa0\x80", "\xc0\xaf", "\xf4\x90\x80\x80", "\uFFFD",
	// Invalid in a JSON string: Parse must refuse as encoding/json does.
	"\x01", "\x1f", "\n", `\x`, `\u12G4`, `"`, `\`,
}

func randomBody(r *rand.Rand, n int, valid bool) string {
	var b strings.Builder
	for b.Len() < n {
		p := pieces[r.IntN(len(pieces))]
		if valid && (p == "\x01" || p == "\x1f" || p == "\n" || p == `\x` || p == `\u12G4` || p == `"` || p == `\`) {
			continue
		}
		// Mostly plain runs of varying length, so the windows see both.
		if r.IntN(3) > 0 {
			p = strings.Repeat("q", r.IntN(40))
		}
		b.WriteString(p)
	}
	return b.String()
}

// TestRandomStringsAgainstEncodingJSON parses and decodes random bodies,
// valid and not, at every offset a window can start from.
func TestRandomStringsAgainstEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 3))
	for trial := 0; trial < 4000; trial++ {
		body := randomBody(r, r.IntN(400), trial%4 != 0)
		pad := strings.Repeat(" ", r.IntN(17))
		check(t, []byte(`{`+pad+`"k":"`+body+`","z":"`+body+`"}`))
	}
}

// TestEscapeAtEveryPosition puts each kind of escape and special byte at
// every position of bodies around the windows' sizes and the decoder's
// thresholds, with plain text or more escapes around it.
func TestEscapeAtEveryPosition(t *testing.T) {
	specials := []string{`\"`, `\n`, `\\`, `\u00e9`, `\ud83d\ude00`, `\ud800`, "é", "\xff", "\x01", `"`, `\q`}
	for _, sp := range specials {
		for _, n := range []int{15, 16, 17, 31, 32, 33, 47, 48, 49, 95, 96, 97, 100, 130} {
			for pos := 0; pos <= n; pos++ {
				for _, fill := range []string{"a", `\n`} {
					body := strings.Repeat(fill, pos) + sp + strings.Repeat("b", n-pos)
					check(t, []byte(`{"k":"`+body+`"}`))
				}
			}
		}
	}
}

// TestDecodeLeavesSpareCapacityAlone checks that decoding and quoting
// write nothing past the end of their result into dst's spare capacity,
// although they store whole words ahead.
func TestDecodeLeavesSpareCapacityAlone(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	buf := make([]byte, 4096)
	for trial := 0; trial < 2000; trial++ {
		body := randomBody(r, r.IntN(300), true)
		if trial%2 == 0 { // the shortest decoding: 6 bytes to 1
			body = strings.Repeat(`\u0041`, r.IntN(60)) + body
		}
		doc := []byte(`{"k":"` + body + `"}`)
		var o Obj
		if err := o.Parse(doc); err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		v, _ := o.Lookup("k")
		for i := range buf {
			buf[i] = 0xA5
		}
		prefix := r.IntN(20)
		got, err := v.AppendText(buf[:prefix])
		if err != nil {
			t.Fatal(err)
		}
		if &got[0] != &buf[0] {
			t.Fatalf("%q: AppendText reallocated a buffer with room", body)
		}
		for i := len(got); i < len(buf); i++ {
			if buf[i] != 0xA5 {
				t.Fatalf("%q: AppendText wrote byte %d past its result's end %d", body, i, len(got))
			}
		}
		text := string(got[prefix:])
		for i := range buf {
			buf[i] = 0xA5
		}
		q := AppendQuote(buf[:prefix], text)
		for i := len(q); i < len(buf); i++ {
			if buf[i] != 0xA5 {
				t.Fatalf("%q: AppendQuote wrote byte %d past its result's end %d", text, i, len(q))
			}
		}
	}
}

// appendQuoteRef is AppendQuote a byte at a time: the reference its
// output must equal byte for byte.
func appendQuoteRef(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, "\uFFFD"...)
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return append(dst, '"')
}

// encodingJSONQuote is encoding/json's quoting without HTML escaping,
// turned into AppendQuote's spelling where the two differ on purpose:
// \b and \f as \u0008 and \u000c, U+2028 and U+2029 unescaped, and an
// invalid byte's U+FFFD as the character rather than \ufffd (encoding/json
// writes a valid U+FFFD in the input as the character too).
func encodingJSONQuote(t *testing.T, s string) []byte {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(s); err != nil {
		t.Fatal(err)
	}
	in := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	var out []byte
	for i := 0; i < len(in); i++ {
		if in[i] != '\\' {
			out = append(out, in[i])
			continue
		}
		switch e := in[i+1]; {
		case e == 'b':
			out = append(out, `\u0008`...)
		case e == 'f':
			out = append(out, `\u000c`...)
		case e == 'u' && string(in[i+2:i+6]) == "2028":
			out = append(out, "\u2028"...)
			i += 4
		case e == 'u' && string(in[i+2:i+6]) == "2029":
			out = append(out, "\u2029"...)
			i += 4
		case e == 'u' && string(in[i+2:i+6]) == "fffd":
			out = append(out, "\uFFFD"...)
			i += 4
		default:
			out = append(out, in[i:i+2]...)
		}
		i++
	}
	return out
}

func checkQuote(t *testing.T, s string) {
	t.Helper()
	got := AppendQuote([]byte("x"), s)
	if want := appendQuoteRef([]byte("x"), s); !bytes.Equal(got, want) {
		t.Fatalf("AppendQuote(%q) = %s, byte-at-a-time %s", s, got, want)
	}
	if want := encodingJSONQuote(t, s); !bytes.Equal(got[1:], want) {
		t.Fatalf("AppendQuote(%q) = %s, encoding/json %s", s, got[1:], want)
	}
}

func TestAppendQuoteAgainstReferences(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 11))
	raw := []string{"a", "bcdefgh", `"`, `\`, "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "\x7f", "é", "€", "😀",
		"\u2028", "\u2029", "\uFFFD", "\xff", "\x80", "\xe2\x82", "\xed\xa0\x80", "<>&"}
	for trial := 0; trial < 4000; trial++ {
		var b strings.Builder
		for n := r.IntN(300); b.Len() < n; {
			if r.IntN(3) > 0 {
				b.WriteString(strings.Repeat("p", r.IntN(40)))
			} else {
				b.WriteString(raw[r.IntN(len(raw))])
			}
		}
		checkQuote(t, b.String())
	}
	for _, sp := range raw {
		for n := 0; n <= 70; n++ {
			for pos := 0; pos <= n; pos++ {
				checkQuote(t, strings.Repeat("a", pos)+sp+strings.Repeat("b", n-pos))
			}
		}
	}
}

func FuzzAppendQuoteBytes(f *testing.F) {
	for _, s := range []string{"", "plain", "quote\" back\\ nl\n tab\t ctl\x01\x1f del\x7f \b\f", "é😀\u2028", "bad\xffutf8",
		strings.Repeat("0123456789abcdef", 5) + "\"" + strings.Repeat("x", 40) + "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkQuote(t, s) })
}

// FuzzStringBody parses and decodes an arbitrary string body, at two
// offsets, against encoding/json.
func FuzzStringBody(f *testing.F) {
	for _, s := range []string{"", `abc\n`, strings.Repeat(`abcdefghijklmno\"`, 8), strings.Repeat(`\u0041`, 20) + `\ud83d\ude00é`,
		strings.Repeat("x", 90) + `\ud800` + strings.Repeat("y", 20) + "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		check(t, []byte(`{"k":"`+string(body)+`"}`))
		check(t, []byte(`{"kk":1,"k":"`+string(body)+`"}`))
	})
}

// BenchmarkAppendQuote1KiB quotes 1 KiB without and with 64 characters
// to escape, as the community guest quotes its echoed result.
func BenchmarkAppendQuote1KiB(b *testing.B) {
	plain := strings.Repeat("abcdefghijklmnop", 64)
	escaped := strings.Repeat("abcdefghijklmno\n", 32) + strings.Repeat("abcdefghijklmno\"", 32)
	for _, c := range []struct {
		name, s string
		escapes int
	}{{"plain", plain, 0}, {"escaped", escaped, 64}} {
		b.Run(c.name, func(b *testing.B) {
			var out []byte
			b.SetBytes(int64(len(c.s)))
			for b.Loop() {
				out = AppendQuote(out[:0], c.s)
			}
			if len(out) != len(c.s)+2+c.escapes {
				b.Fatalf("%d bytes", len(out))
			}
		})
	}
}
