package jsonobj

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestCanonical(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{}`, `{}`},
		{" \n{ \"a\" : 1 , \"b\":[ true,null , \"x\" ] }\t", `{"a":1,"b":[true,null,"x"]}`},
		{`{"command":"r\u006d -rf /"}`, `{"command":"rm -rf /"}`},
		{`{"k":"\/\b\f"}`, `{"k":"/\u0008\u000c"}`},
		{`{"a\u0062":"\ud800"}`, "{\"ab\":\"\uFFFD\"}"},
		{"{\"a\":\"\xff\"}", "{\"a\":\"\uFFFD\"}"},
		{`{"n":-0.5e-3,"o":{"x":{"y":[]}}}`, `{"n":-0.5e-3,"o":{"x":{"y":[]}}}`},
		{`{"a":{"k":1},"b":{"k":2}}`, `{"a":{"k":1},"b":{"k":2}}`}, // the same key in two objects
		{`{"a":"<&>\u2028"}`, "{\"a\":\"<&>\u2028\"}"},
		{` [1, "\u0041"] `, `[1,"A"]`},
		{`"s"`, `"s"`},
		{`-1.5`, `-1.5`},
	} {
		got, err := Canonical(nil, []byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestCanonicalRefuses(t *testing.T) {
	deep := strings.Repeat(`{"a":`, CanonicalMaxDepth) + "1" + strings.Repeat("}", CanonicalMaxDepth)
	if _, err := Canonical(nil, []byte(deep)); err != nil {
		t.Fatalf("nesting of exactly %d refused: %v", CanonicalMaxDepth, err)
	}
	for _, c := range []struct {
		in, want string
		sentinel error
	}{
		{`{"command":"x","Command":"y"}`, `keys "command" and "Command" differ only in case`, ErrNotCanonical},
		{`{"a":1,"a":1}`, `duplicate key "a"`, ErrNotCanonical},
		{`{"a":1,"\u0061":1}`, `duplicate key "a"`, ErrNotCanonical},
		{`{"sh":1,"ſh":2}`, `differ only in case`, ErrNotCanonical},
		{"{\"k\":1,\"\u212a\":2}", `differ only in case`, ErrNotCanonical},
		{`{"x":[{"a":1,"A":2}]}`, `differ only in case`, ErrNotCanonical},
		{`{"pad":1e400}`, `does not fit in a float64`, ErrNotCanonical},
		{`{"pad":[-1e309]}`, `does not fit in a float64`, ErrNotCanonical},
		{"{\"a\":" + strings.Repeat("[", CanonicalMaxDepth) + strings.Repeat("]", CanonicalMaxDepth) + "}", "nested deeper than 64", ErrNotCanonical},
		{``, `empty document`, ErrSyntax},
		{`{"a":1} {}`, `data after the JSON value`, ErrSyntax},
		{`{"a":01}`, `after object key:value pair`, ErrSyntax},
		{`{"a":1,}`, `beginning of an object key`, ErrSyntax},
		{`{"a":[1,]}`, `beginning of a value`, ErrSyntax},
	} {
		_, err := Canonical(nil, []byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, c.sentinel) {
			t.Errorf("Canonical(%.60q): %v; want an error %q wrapping %v", c.in, err, c.want, c.sentinel)
		}
	}
}

// FuzzCanonical: whatever Canonical accepts, its output is canonical
// (Canonical of it is itself), and encoding/json reads it as jsonobj does:
// the same members with the same values, with no key that encoding/json's
// case-insensitive matching could take for another.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{}`, `{"command":"echo","Command":"x"}`, `{"command":"ls","pad":1e400}`,
		`{"a":[1,2,{"b":"\u00e9"}]}`, "{\"a\":\"\xff\\ud800\"}", `{"ſ":1,"s":2}`, `{"n":1.5e308}`, `{"a":"\u2028<>&"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		out, err := Canonical(nil, doc)
		if err != nil {
			if json.Valid(doc) && errors.Is(err, ErrSyntax) {
				t.Fatalf("Canonical refused JSON %q as a syntax error: %v", doc, err)
			}
			return
		}
		again, err := Canonical(nil, out)
		if err != nil || string(again) != string(out) {
			t.Fatalf("not a fixed point: %q -> %q -> %q, %v", doc, out, again, err)
		}
		var viaJSON map[string]any
		var o Obj
		if o.Parse(out) != nil {
			// Not an object: encoding/json reads the same value.
			var a, b any
			if err := json.Unmarshal(doc, &a); err != nil {
				t.Fatalf("encoding/json refuses %q, which Canonical takes: %v", doc, err)
			}
			if err := json.Unmarshal(out, &b); err != nil || !reflect.DeepEqual(a, b) {
				t.Fatalf("canonical %q of %q reads %v, not %v (%v)", out, doc, b, a, err)
			}
			return
		}
		if err := json.Unmarshal(out, &viaJSON); err != nil {
			t.Fatalf("encoding/json refuses canonical %q: %v", out, err)
		}
		if o.Len() != len(viaJSON) {
			t.Fatalf("%q: jsonobj sees %d members, encoding/json %d", out, o.Len(), len(viaJSON))
		}
		for i := 0; i < o.Len(); i++ {
			k := string(o.Key(nil, i))
			var v any
			if err := json.Unmarshal(o.Value(i).Raw(), &v); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(viaJSON[k], v) {
				t.Fatalf("%q: member %q is %v to jsonobj, %v to encoding/json", out, k, v, viaJSON[k])
			}
			// A struct field decoded case-insensitively finds this member
			// and no other.
			for j := 0; j < o.Len(); j++ {
				if j != i && strings.EqualFold(k, string(o.Key(nil, j))) {
					t.Fatalf("%q: keys %q and %q fold together", out, k, o.Key(nil, j))
				}
			}
		}
	})
}
