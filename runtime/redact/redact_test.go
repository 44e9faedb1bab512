package redact_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/runtime/redact"
)

const key = "sk-live-0123456789abcdef"

// Every spelling of a secret that an error or a log carries is redacted:
// as is, JSON- and Go-escaped, URL-encoded, and a fragment an excerpt cut.
func TestStringRedactsEverySpelling(t *testing.T) {
	odd := `pa"ss/w<r>d 1\x` // a password with characters every encoding changes
	r := redact.New(key, odd)
	jsonOdd, _ := json.Marshal(odd)
	cases := map[string]string{
		"raw":              "Authorization: Bearer " + key + " rejected",
		"json":             `{"error":{"message":"bad header \"Bearer ` + key + `\""}}`,
		"json escaped":     "body: " + string(jsonOdd),
		"json slash":       "body: " + strings.ReplaceAll(string(jsonOdd), "/", `\/`),
		"go quoted":        "err=" + strings.TrimSuffix(strings.TrimPrefix(jsonString(odd), `"`), `"`),
		"query":            "GET /?key=" + url.QueryEscape(odd),
		"path":             "postgres://u:" + url.PathEscape(odd) + "@db/x",
		"cut at the end":   "model API error 401: {\"auth\":\"Bearer " + key[:12] + "…",
		"cut at the start": key[9:] + " was the rest",
		"cut after dots":   "…" + key[5:] + " tail",
	}
	for name, in := range cases {
		out := r.String(in)
		for _, leak := range []string{key, key[:12], key[9:], odd, url.QueryEscape(odd), string(jsonOdd[1 : len(jsonOdd)-1])} {
			if strings.Contains(out, leak) {
				t.Errorf("%s: %q still holds %q", name, out, leak)
			}
		}
		if !strings.Contains(out, redact.Marker) {
			t.Errorf("%s: %q has no %s", name, out, redact.Marker)
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Short values are not secrets a redactor can keep: an empty variable or
// a four-letter token would redact ordinary text everywhere. A short
// fragment of a real secret is left too, and so is text that merely ends
// or starts as a secret does (a DSN's scheme), unless an ellipsis says
// it was cut.
func TestShortValuesAreIgnored(t *testing.T) {
	if r := redact.New("", "abc", "1234567"); !r.Empty() {
		t.Fatal("a redactor of values shorter than MinLen redacts something")
	}
	r := redact.New("", "a", key)
	in := "a plain sentence, abc, and sk-live (7 bytes of the key)"
	if got := r.String(in); got != in {
		t.Errorf("String(%q) = %q, want it unchanged", in, got)
	}
	dsn := redact.New("postgres://dsh:hunter2-long@db.internal:5432/dsh")
	for _, in := range []string{"the store is postgres", "postgres://dsh:hunter2 was", "db.internal:5432/dsh is down"} {
		if got := dsn.String(in); got != in {
			t.Errorf("String(%q) = %q, want it unchanged", in, got)
		}
	}
	if got := dsn.String("connect to postgres://dsh:hunter2-lo…"); strings.Contains(got, "hunter2") {
		t.Errorf("a DSN cut before an ellipsis: %q", got)
	}
	var nilR *redact.Redactor
	if got := nilR.String(key); got != key {
		t.Errorf("a nil redactor changed %q to %q", key, got)
	}
}

// JSON redacts the decoded text of every string, so an escape hides
// nothing, and the result is still JSON.
func TestJSONRedactsDecodedStrings(t *testing.T) {
	r := redact.New(key)
	var esc strings.Builder
	for _, c := range key {
		esc.WriteString(`\u00` + strings.ToLower(string("0123456789abcdef"[c>>4])+string("0123456789abcdef"[c&15])))
	}
	in := []byte(`{"message":"` + esc.String() + `","` + key + `":1,"n":[1,"x"]}`)
	out := r.JSON(in)
	if !json.Valid(out) {
		t.Fatalf("JSON(%s) = %s, not JSON", in, out)
	}
	var v map[string]any
	json.Unmarshal(out, &v)
	if s, _ := json.Marshal(v); bytes.Contains(s, []byte(key)) || !bytes.Contains(out, []byte(redact.Marker)) {
		t.Errorf("JSON(%s) = %s", in, out)
	}
	plain := []byte(`{"text":"nothing here"}`)
	if got := r.JSON(plain); &got[0] != &plain[0] {
		t.Error("JSON copied a value that holds no secret")
	}
}

// Error keeps the chain (errors.Is) and redacts the text.
func TestErrorKeepsTheChain(t *testing.T) {
	sentinel := errors.New("sentinel")
	r := redact.New(key)
	err := r.Error(errors.Join(sentinel, errors.New("401: Bearer "+key)))
	if !errors.Is(err, sentinel) || strings.Contains(err.Error(), key) || !redact.IsRedacted(err) {
		t.Errorf("Error = %v", err)
	}
	plain := errors.New("nothing")
	if r.Error(plain) != plain {
		t.Error("Error wrapped an error that holds no secret")
	}
}

// A secret split across writes is still found: the Writer holds back a
// tail that may begin one; Flush redacts a fragment left at the end.
func TestWriterAcrossWrites(t *testing.T) {
	r := redact.New(key)
	var out bytes.Buffer
	w := r.Writer(&out)
	text := "line one\nthe key is " + key + " and again " + key + "\n"
	for i := 0; i < len(text); i += 5 {
		io.WriteString(w, text[i:min(i+5, len(text))])
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "line one\nthe key is [redacted] and again [redacted]\n"
	if out.String() != want {
		t.Errorf("written %q, want %q", out.String(), want)
	}
	out.Reset()
	io.WriteString(w, "cut: "+key[:13])
	w.Flush()
	if got := out.String(); strings.Contains(got, key[:13]) || !strings.Contains(got, redact.Marker) {
		t.Errorf("a cut key at the end was written as %q", got)
	}
	// Text that cannot begin a secret is written at once.
	out.Reset()
	io.WriteString(w, "a log line\n")
	if out.String() != "a log line\n" {
		t.Errorf("a plain line was held back: %q", out.String())
	}
}

// The slog handler redacts messages, strings, errors and groups.
func TestHandler(t *testing.T) {
	r := redact.New(key)
	var out bytes.Buffer
	log := slog.New(r.Handler(slog.NewJSONHandler(&out, nil))).With("pre", key)
	log.Warn("saw "+key, "err", errors.New("401 "+key), "g", slog.GroupValue(slog.String("k", key)), "n", 3)
	if strings.Contains(out.String(), key) || strings.Count(out.String(), redact.Marker) != 4 {
		t.Errorf("logged %s", out.String())
	}
	h := r.Handler(slog.NewTextHandler(io.Discard, nil))
	if r.Handler(h) != h {
		t.Error("a handler that already redacts was wrapped again")
	}
}
