package jsonobj

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// check compares Parse with encoding/json on doc: the same verdict, the
// same members, and the same decoded values.
func check(t *testing.T, doc []byte) {
	t.Helper()
	var o Obj
	err := o.Parse(doc)
	var want map[string]json.RawMessage
	wantErr := json.Unmarshal(doc, &want)
	if wantErr == nil && want == nil {
		wantErr = errors.New("null is not an object") // Unmarshal accepts null into a map
	}
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("Parse(%q) = %v; encoding/json: %v", doc, err, wantErr)
	}
	if err != nil {
		if !errors.Is(err, ErrSyntax) {
			t.Fatalf("Parse(%q) error %v does not wrap ErrSyntax", doc, err)
		}
		return
	}
	keys := map[string]bool{}
	for i := 0; i < o.Len(); i++ {
		keys[string(o.Key(nil, i))] = true
	}
	if len(keys) != len(want) {
		t.Fatalf("Parse(%q): keys %v, encoding/json %d keys", doc, keys, len(want))
	}
	for k, raw := range want {
		v, ok := o.Lookup(k)
		if !ok {
			t.Fatalf("Parse(%q): no key %q", doc, k)
		}
		if !bytes.Equal(v.Raw(), raw) {
			t.Fatalf("Parse(%q)[%q] = %s, encoding/json %s", doc, k, v.Raw(), raw)
		}
		checkValue(t, v)
	}
}

func checkValue(t *testing.T, v Value) {
	t.Helper()
	var s string
	sErr := json.Unmarshal(v.Raw(), &s)
	if v.Kind() == Null {
		sErr = errors.New("null") // Unmarshal leaves s alone; Text refuses
	}
	got, err := v.Text()
	if (err == nil) != (sErr == nil) || err == nil && got != s {
		t.Fatalf("Text(%s) = %q, %v; encoding/json %q, %v", v.Raw(), got, err, s, sErr)
	}
	if err == nil {
		app, _ := v.AppendText([]byte("x"))
		if string(app) != "x"+s {
			t.Fatalf("AppendText(%s) = %q; want %q", v.Raw(), app, s)
		}
		if body, ok := v.Verbatim(); ok && string(body) != s {
			t.Fatalf("Verbatim(%s) = %q; want %q", v.Raw(), body, s)
		}
	}
	if v.Kind() == Null {
		return
	}
	var n int64
	nErr := json.Unmarshal(v.Raw(), &n)
	gotN, err := v.Int()
	if (err == nil) != (nErr == nil) || gotN != n {
		t.Fatalf("Int(%s) = %d, %v; encoding/json %d, %v", v.Raw(), gotN, err, n, nErr)
	}
	var f float64
	fErr := json.Unmarshal(v.Raw(), &f)
	gotF, err := v.Float()
	if (err == nil) != (fErr == nil) || gotF != f {
		t.Fatalf("Float(%s) = %v, %v; encoding/json %v, %v", v.Raw(), gotF, err, f, fErr)
	}
	var bl bool
	bErr := json.Unmarshal(v.Raw(), &bl)
	gotB, err := v.Bool()
	if (err == nil) != (bErr == nil) || gotB != bl {
		t.Fatalf("Bool(%s) = %v, %v; encoding/json %v, %v", v.Raw(), gotB, err, bl, bErr)
	}
}

var seeds = []string{
	`{}`, ` { } `, `{"a":1}`, `{"a":1,"a":2}`, `{"text":"hello"}`,
	`{"a":"\u00e9\ud83d\ude00\ud800x\udc00\u0041"}`, `{"a":"\ud800\u0041"}`, `{"a":"\ud83d\ude00"}`,
	`{"a":"tab\there","b":"\"\\\/\b\f\n\r\t"}`, "{\"a\":\"\xff\xfe bad utf8\"}", "{\"\xffk\":1}",
	`{"a\u0062":true,"c":false,"d":null}`, `{"n":-0.5e+10,"m":0,"o":-0,"p":12345678901234567890}`,
	`{"x":[1,[2,[3,{"y":{}}]],"s",null,true]}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":-}`,
	`{"a":"unterminated}`, `{"a" 1}`, `{"a":1,}`, `{,}`, `{"a":1}x`, `[1]`, `"s"`, `null`, `1`, ``, ` `,
	`{"a":tru}`, `{"a":nul}`, "{\"a\":\"ctl\x01\"}", `{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12G4"}`,
	`{"a":{"b":[}}`, `{"a":[1 2]}`, `{"long":"` + strings.Repeat("abcdefgh", 40) + `\n` + strings.Repeat("é", 9) + `"}`,
	`{"k":"12345678\"12345678"}`, `{"k":"1234567\\"}`, `{"i":9223372036854775807,"j":9223372036854775808,"f":1e400}`,
}

func TestAgainstEncodingJSON(t *testing.T) {
	for _, s := range seeds {
		check(t, []byte(s))
	}
}

func FuzzAgainstEncodingJSON(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) { check(t, doc) })
}

func TestMaxDepth(t *testing.T) {
	deep := func(n int) []byte {
		return []byte(`{"a":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`)
	}
	for _, n := range []int{MaxDepth, MaxDepth + 1} {
		check(t, deep(n))
	}
	var o Obj
	if err := o.Parse(deep(MaxDepth + 1)); err == nil || !strings.Contains(err.Error(), "max depth") {
		t.Fatalf("depth %d: %v", MaxDepth+1, err)
	}
}

func TestErrorsSayWhereAndWhat(t *testing.T) {
	for doc, want := range map[string]string{
		`{"a":1,}`:             `invalid JSON at byte 7: unexpected '}' looking for the beginning of an object key string`,
		`{"a":"x`:              `invalid JSON at byte 7: unexpected end of input in string literal`,
		"{\"a\":\"\x01\"}":     `invalid JSON at byte 6: unexpected '\x01' in string literal`,
		`{"a":1} {}`:           `invalid JSON at byte 8: data after the JSON object`,
		`[1]`:                  `invalid JSON at byte 0: want a JSON object, found array`,
		``:                     `invalid JSON at byte 0: empty document; want a JSON object`,
		`{"a":"\q"}`:           `invalid JSON at byte 7: unexpected 'q' in string escape code`,
		`{"a":-x}`:             `invalid JSON at byte 6: unexpected 'x' in numeric literal`,
		`{"a":fals}`:           `invalid JSON at byte 9: unexpected '}' in literal false`,
		`{"a":1 "b":2}`:        `invalid JSON at byte 7: unexpected '"' after object key:value pair`,
		`{"text":"ok","n":1e}`: `invalid JSON at byte 19: unexpected '}' in exponent of numeric literal`,
	} {
		var o Obj
		err := o.Parse([]byte(doc))
		if err == nil || err.Error() != want {
			t.Errorf("Parse(%q) = %v\nwant %s", doc, err, want)
		}
	}
}

func TestConversions(t *testing.T) {
	var o Obj
	if err := o.Parse([]byte(`{"s":"x","n":3,"b":true,"z":null}`)); err != nil {
		t.Fatal(err)
	}
	v, _ := o.Lookup("n")
	if _, err := v.Text(); !errors.Is(err, ErrType) || err.Error() != "wrong JSON type: want a string, found number" {
		t.Fatalf("Text of a number: %v", err)
	}
	if err := o.Only("s", "n", "b"); err == nil || err.Error() != `unknown field "z"` {
		t.Fatalf("Only: %v", err)
	}
	if err := o.Only("s", "n", "b", "z"); err != nil {
		t.Fatalf("Only: %v", err)
	}
	if _, ok := o.Lookup("S"); ok {
		t.Fatal("Lookup matched a key case-insensitively")
	}
}

func TestParseDoesNotAllocateWhenWarm(t *testing.T) {
	doc := []byte(`{"text":"` + strings.Repeat("abcdefgh", 128) + `","n":42,"flag":true}`)
	var o Obj
	var scratch []byte
	allocs := testing.AllocsPerRun(100, func() {
		if err := o.Parse(doc); err != nil {
			t.Fatal(err)
		}
		v, _ := o.Lookup("text")
		b, ok := v.Verbatim()
		if !ok || len(b) != 1024 {
			t.Fatal("no verbatim text")
		}
		scratch, _ = v.AppendText(scratch[:0])
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per warm Parse+Lookup+View", allocs)
	}
}

func BenchmarkParse1KiB(b *testing.B) {
	doc := []byte(`{"text":"` + strings.Repeat("abcdefgh", 128) + `"}`)
	b.Run("jsonobj", func(b *testing.B) {
		var o Obj
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			if err := o.Parse(doc); err != nil {
				b.Fatal(err)
			}
			v, _ := o.Lookup("text")
			if _, ok := v.Verbatim(); !ok {
				b.Fatal("no verbatim text")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			var a struct {
				Text string `json:"text"`
			}
			if err := json.Unmarshal(doc, &a); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func FuzzAppendQuote(f *testing.F) {
	for _, s := range []string{"", "plain", "quote\" back\\ nl\n tab\t ctl\x01\x1f del\x7f", "é😀", "bad\xffutf8", "\xf5\xf9", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := AppendQuote([]byte("x"), s)
		if q[0] != 'x' {
			t.Fatal("prefix lost")
		}
		var got string
		if err := json.Unmarshal(q[1:], &got); err != nil {
			t.Fatalf("AppendQuote(%q) = %s: %v", s, q[1:], err)
		}
		// encoding/json replaces each invalid byte with U+FFFD.
		ref, _ := json.Marshal(s)
		var want string
		json.Unmarshal(ref, &want)
		if got != want {
			t.Fatalf("AppendQuote(%q) decodes to %q, want %q", s, got, want)
		}
		var o Obj
		doc := append(append([]byte(`{"k":`), q[1:]...), '}')
		if err := o.Parse(doc); err != nil {
			t.Fatal(err)
		}
		v, _ := o.Lookup("k")
		if text, _ := v.Text(); text != want {
			t.Fatalf("round trip of %q through Parse: %q", s, text)
		}
	})
}

// TestScanFindsEverySpecialByte puts each kind of byte the word-at-a-time
// string scan must stop at in every position of long strings.
func TestScanFindsEverySpecialByte(t *testing.T) {
	for _, special := range []string{`"`, `\n`, "\x01", "\x1f", "é", "\xff", `\"`, `\u00e9`} {
		for n := 60; n <= 80; n += 20 {
			for pos := 0; pos < n; pos++ {
				body := strings.Repeat("a", pos) + special + strings.Repeat("b", n-pos)
				check(t, []byte(`{"k":"`+body+`","z":1}`))
			}
		}
	}
}

// BenchmarkParseEscaped1KiB decodes 1 KiB with 64 escapes in it, beside
// the same 1 KiB without any: the bulk copy between escapes should keep
// the two close.
func BenchmarkParseEscaped1KiB(b *testing.B) {
	plain := strings.Repeat("abcdefghijklmno", 64) + strings.Repeat("x", 64)
	escaped := strings.Repeat(`abcdefghijklmno\n`, 32) + strings.Repeat(`abcdefghijklmno\"`, 32)
	for _, c := range []struct{ name, body string }{{"plain", plain}, {"escaped", escaped}} {
		doc := []byte(`{"text":"` + c.body + `"}`)
		b.Run(c.name, func(b *testing.B) {
			var o Obj
			var scratch []byte
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				if err := o.Parse(doc); err != nil {
					b.Fatal(err)
				}
				v, _ := o.Lookup("text")
				var err error
				if scratch, err = v.AppendText(scratch[:0]); err != nil || len(scratch) != 1024 {
					b.Fatalf("%d bytes, %v", len(scratch), err)
				}
			}
		})
	}
}
