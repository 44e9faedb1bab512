// Package redact keeps a deployment's secrets (its API key, its store's
// DSN, its bearer tokens) out of what it shows: session events, errors
// returned to clients, logs. A Redactor is built once from the secret
// values and replaces each of them, in every spelling an error or a log
// is likely to carry it (as is, JSON- or Go-escaped, URL-encoded), with
// Marker. A value cut short by an excerpt ("sk-abcd…" at the end of a
// message) is replaced too: MinLen bytes of it next to an ellipsis, half
// of it at the very start or end of a text.
//
// A nil *Redactor redacts nothing; every method may be called on it.
package redact

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Marker replaces a secret.
const Marker = "[redacted]"

// MinLen is the shortest secret a Redactor redacts, and the shortest
// fragment of one it redacts at a cut: a shorter value (an empty variable,
// a one-letter password) would match ordinary text everywhere and redact
// it, while telling an attacker next to nothing.
const MinLen = 8

// ellipses end an excerpt cut short.
var ellipses = []string{"…", "..."}

// Redactor replaces secrets with Marker. It is safe for concurrent use.
type Redactor struct {
	// forms are the spellings of every secret, unique, longest first.
	forms []string
}

// New returns a Redactor of secrets. Values shorter than MinLen are
// ignored; with none left it returns nil, which redacts nothing.
func New(secrets ...string) *Redactor {
	var forms []string
	for _, s := range secrets {
		if len(s) < MinLen {
			continue
		}
		for _, f := range spellings(s) {
			if len(f) >= MinLen && !slices.Contains(forms, f) {
				forms = append(forms, f)
			}
		}
	}
	if len(forms) == 0 {
		return nil
	}
	slices.SortStableFunc(forms, func(a, b string) int { return len(b) - len(a) })
	return &Redactor{forms: forms}
}

// spellings are the ways s appears in text that quotes it: as is, inside
// a JSON string (with and without HTML escaping, with "/" as "\/"), inside
// a Go-quoted string (slog's text handler, %q), URL-encoded (a query or a
// path, a DSN's userinfo).
func spellings(s string) []string {
	out := []string{s}
	if b, err := json.Marshal(s); err == nil {
		out = append(out, string(b[1:len(b)-1]))
		out = append(out, strings.ReplaceAll(string(b[1:len(b)-1]), "/", `\/`))
	}
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	if enc.Encode(s) == nil {
		j := strings.TrimSuffix(sb.String(), "\n")
		out = append(out, j[1:len(j)-1])
	}
	q := strconv.Quote(s)
	out = append(out, q[1:len(q)-1])
	out = append(out, url.QueryEscape(s), url.PathEscape(s), strings.ReplaceAll(url.QueryEscape(s), "+", "%20"))
	return out
}

// Empty reports whether r redacts nothing.
func (r *Redactor) Empty() bool { return r == nil || len(r.forms) == 0 }

// String returns s with every secret replaced by Marker, and every
// fragment of one that an excerpt cut: before an ellipsis ("…", "...")
// or after one, at least MinLen bytes of it; at the very end or start of
// s, at least half of it (and MinLen), so that ordinary text that merely
// ends like a secret begins (a DSN's "postgres://") is left alone.
func (r *Redactor) String(s string) string {
	if r.Empty() || len(s) < MinLen {
		return s
	}
	for _, f := range r.forms {
		if strings.Contains(s, f) {
			s = strings.ReplaceAll(s, f, Marker)
		}
	}
	return r.cuts(s)
}

// cuts redacts the fragments of secrets cut at an edge of s: a tail that
// begins a secret and ends s or an ellipsis, and a head that ends one
// and begins s or follows an ellipsis.
func (r *Redactor) cuts(s string) string {
	for _, f := range r.forms {
		edge := max(MinLen, (len(f)+1)/2) // at an edge of s, without an ellipsis
		probe := f[:MinLen]
		for from := 0; ; {
			i := strings.Index(s[from:], probe)
			if i < 0 {
				break
			}
			i += from
			n := MinLen
			for i+n < len(s) && n < len(f) && s[i+n] == f[n] {
				n++
			}
			if rest := s[i+n:]; hasAnyPrefix(rest, ellipses) || rest == "" && n >= edge {
				s = s[:i] + Marker + rest
				from = i + len(Marker)
				continue
			}
			from = i + 1
		}
		// A head: the longest suffix of f that s, or what follows an
		// ellipsis in s, begins with.
		for _, at := range heads(s) {
			rest, least := s[at:], MinLen
			if at == 0 {
				least = edge
			}
			for n := min(len(f)-1, len(rest)); n >= least; n-- {
				if strings.HasPrefix(rest, f[len(f)-n:]) {
					s = s[:at] + Marker + rest[n:]
					break
				}
			}
		}
	}
	return s
}

// heads lists where a cut fragment may begin in s: at 0 and after each
// ellipsis, last first so that replacing one keeps the others' offsets.
func heads(s string) []int {
	at := []int{0}
	for _, e := range ellipses {
		for i := 0; ; {
			j := strings.Index(s[i:], e)
			if j < 0 {
				break
			}
			i += j + len(e)
			at = append(at, i)
		}
	}
	slices.Sort(at)
	slices.Reverse(at)
	return slices.Compact(at)
}

func hasAnyPrefix(s string, ps []string) bool {
	for _, p := range ps {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// Error returns err when its text holds no secret, and otherwise an error
// whose text is redacted and which unwraps to err, so that errors.Is
// still finds its sentinels.
func (r *Redactor) Error(err error) error {
	if err == nil || r.Empty() {
		return err
	}
	msg := err.Error()
	red := r.String(msg)
	if red == msg {
		return err
	}
	return &redacted{msg: red, err: err}
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// IsRedacted reports whether err is an error Error redacted.
func IsRedacted(err error) bool {
	var re *redacted
	return errors.As(err, &re)
}

// JSON returns the JSON value raw with the secrets in its strings (keys
// included) redacted; raw itself when there were none. Each string is
// redacted as its decoded text, so an escape (\u0041, \/) hides nothing,
// and the result is valid JSON when raw is.
func (r *Redactor) JSON(raw []byte) []byte {
	if r.Empty() {
		return raw
	}
	var out []byte
	done := 0
	for i := 0; i < len(raw); i++ {
		if raw[i] != '"' {
			continue
		}
		start, escaped := i, false
		for i++; i < len(raw) && raw[i] != '"'; i++ {
			if raw[i] == '\\' {
				escaped = true
				i++
			}
		}
		if i >= len(raw) {
			break // not JSON; left as it is
		}
		lit := raw[start : i+1]
		var text string
		if escaped {
			if json.Unmarshal(lit, &text) != nil {
				continue
			}
		} else {
			text = string(lit[1 : len(lit)-1])
		}
		red := r.String(text)
		if red == text {
			continue
		}
		out = append(out, raw[done:start]...)
		out = appendJSONString(out, red)
		done = i + 1
	}
	if out == nil {
		return raw
	}
	return append(out, raw[done:]...)
}

func appendJSONString(b []byte, s string) []byte {
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	if enc.Encode(s) != nil || !utf8.ValidString(s) {
		q, _ := json.Marshal(s)
		return append(b, q...)
	}
	return append(b, strings.TrimSuffix(sb.String(), "\n")...)
}

// Handler returns a slog.Handler that redacts each record's message and
// attributes (errors and values of any kind by their text) before h sees
// them. It returns h when r redacts nothing or h already redacts for r.
func (r *Redactor) Handler(h slog.Handler) slog.Handler {
	if r.Empty() {
		return h
	}
	if rh, ok := h.(*handler); ok && rh.r == r {
		return h
	}
	return &handler{r: r, h: h}
}

type handler struct {
	r *Redactor
	h slog.Handler
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.r.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = h.r.attr(a)
	}
	return &handler{r: h.r, h: h.h.WithAttrs(red)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{r: h.r, h: h.h.WithGroup(name)}
}

func (r *Redactor) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, r.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, x := range g {
			red[i] = r.attr(x)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		// What a handler would print: an error's text, a value's %+v.
		text := v.String()
		if err, ok := v.Any().(error); ok {
			text = err.Error()
		}
		if red := r.String(text); red != text {
			return slog.String(a.Key, red)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// Writer redacts a byte stream written in pieces: a secret split across
// two writes is still found, because a tail of what was written that may
// begin a secret is held back until the next write shows whether it does.
// Flush writes what is held (a cut secret's fragment redacted).
type Writer struct {
	r  *Redactor
	w  io.Writer
	mu sync.Mutex
	// held is the tail not yet written: a prefix of some secret.
	held []byte
}

// Writer returns a Writer that redacts what it passes to w.
func (r *Redactor) Writer(w io.Writer) *Writer { return &Writer{r: r, w: w} }

// Write redacts p (with what is held before it) and writes all but a tail
// that may begin a secret. It reports len(p) when the write succeeded.
func (w *Writer) Write(p []byte) (int, error) {
	if w.r.Empty() {
		return w.w.Write(p)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	buf := append(w.held, p...)
	keep := w.r.heldTail(buf)
	out := w.r.String(string(buf[:len(buf)-keep]))
	w.held = append([]byte(nil), buf[len(buf)-keep:]...)
	if _, err := io.WriteString(w.w, out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what is held, redacted as the end of the stream.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.held) == 0 {
		return nil
	}
	out := w.r.String(string(w.held))
	w.held = nil
	_, err := io.WriteString(w.w, out)
	return err
}

// heldTail is the length of the longest suffix of b that is a proper
// prefix of a spelling of a secret.
func (r *Redactor) heldTail(b []byte) int {
	best := 0
	for _, f := range r.forms {
		for n := min(len(f)-1, len(b)); n > best; n-- {
			if string(b[len(b)-n:]) == f[:n] {
				best = n
				break
			}
		}
	}
	return best
}
