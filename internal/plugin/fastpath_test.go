package plugin

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// recordingHandler keeps every record it is given.
type recordingHandler struct {
	mu   *sync.Mutex
	recs *[]slog.Record
}

func (h recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	*h.recs = append(*h.recs, r)
	h.mu.Unlock()
	return nil
}
func (h recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordingHandler) WithGroup(string) slog.Handler      { return h }

// TestLogRequestsAreStrict: the log host function reads its request
// without encoding/json but refuses what decode refuses, with statuses and
// messages that say what was wrong; good requests reach the logger intact.
func TestLogRequestsAreStrict(t *testing.T) {
	var mu sync.Mutex
	var recs []slog.Record
	h, err := New(Options{Registry: prompt.NewRegistry(nil), Cache: sharedCache(t), Logger: slog.New(recordingHandler{&mu, &recs})})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(bg)
	if _, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{"tools": []string{"probe"}})}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		req    string
		status hostfns.Status
		msg    string     // the whole error message, or the logged message
		level  slog.Level // of a logged record
	}{
		{`{"level":"warn","message":"tab\there \u00e9"}`, hostfns.StatusOK, "tab\there é", slog.LevelWarn},
		{`{"message":"no level is info"}`, hostfns.StatusOK, "no level is info", slog.LevelInfo},
		{`{"level":"debug","message":null}`, hostfns.StatusOK, "", slog.LevelDebug},
		{`{"level":"loud","message":"x"}`, hostfns.ErrBadJSON, `log: unknown level "loud" (want debug, info, warn or error)`, 0},
		{`{"level":"info","message":"x","extra":1}`, hostfns.ErrBadJSON, `log: bad request: unknown field "extra"`, 0},
		{`{"level":"info","message":7}`, hostfns.ErrBadJSON, "log: bad request: message: wrong JSON type: want a string, found number", 0},
		{`{"level":1}`, hostfns.ErrBadJSON, "log: bad request: level: wrong JSON type: want a string, found number", 0},
		{`{"level":"info"`, hostfns.ErrBadJSON, "log: bad request: invalid JSON at byte 15: unexpected end of input after object key:value pair", 0},
		{`["info"]`, hostfns.ErrBadJSON, "log: bad request: invalid JSON at byte 0: want a JSON object, found array", 0},
	}
	probes := make([]map[string]string, len(cases))
	for i, c := range cases {
		probes[i] = map[string]string{"fn": hostfns.FnLog, "req": c.req}
	}
	args, _ := json.Marshal(probes)
	r, err := h.CallTool(bg, agent("a", "m"), "probe", args)
	if err != nil || r.IsError {
		t.Fatalf("probe: %+v, %v", r, err)
	}
	var got []struct {
		Status  uint32 `json:"status"`
		Payload string `json:"message"`
	}
	if err := json.Unmarshal([]byte(r.Text), &got); err != nil || len(got) != len(cases) {
		t.Fatalf("probe results %s: %v", r.Text, err)
	}
	mu.Lock()
	defer mu.Unlock()
	logged := recs // the probe's log calls are all the host logged
	next := 0
	for i, c := range cases {
		if hostfns.Status(got[i].Status) != c.status {
			t.Errorf("%s: status %d (%s), want %d", c.req, got[i].Status, got[i].Payload, c.status)
			continue
		}
		if c.status != hostfns.StatusOK {
			if got[i].Payload != c.msg {
				t.Errorf("%s: message\n%q, want\n%q", c.req, got[i].Payload, c.msg)
			}
			continue
		}
		if next >= len(logged) {
			t.Errorf("%s: not logged", c.req)
			continue
		}
		if rec := logged[next]; rec.Message != c.msg || rec.Level != c.level {
			t.Errorf("%s: logged %v %q, want %v %q", c.req, rec.Level, rec.Message, c.level, c.msg)
		}
		next++
	}
	if next != len(logged) {
		t.Errorf("%d records logged, want %d: %v", len(logged), next, logged)
	}
}

// TestArgsTools runs a tool on the SDK's parsed-arguments path: typed
// accessors, their errors naming the argument, arguments that are not a
// JSON object, and a failing handler whose partial output is dropped.
func TestArgsTools(t *testing.T) {
	h := newHost(t)
	if _, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{"tools": []string{"args_probe"}})}); err != nil {
		t.Fatal(err)
	}
	a := agent("a", "m")
	for _, c := range []struct {
		args, want string
		isErr      bool
	}{
		{`{"s":"a\"b\u00e9","n":-42,"f":2.5,"b":true,"missing":null}`,
			"s: a\"bé\nn: -42\nf: 2.5\nb: true\nmissing: error: argument \"missing\": missing argument\n", false},
		{`{"s":1,"n":1.5,"f":"x","b":"true"}`,
			"s: error: argument \"s\": wrong JSON type: want a string, found number\n" +
				"n: error: argument \"n\": wrong JSON type: 1.5 is not an integer that fits in 64 bits\n" +
				"f: error: argument \"f\": wrong JSON type: want a number, found string\n" +
				"b: error: argument \"b\": wrong JSON type: want a boolean, found string\n" +
				"missing: error: argument \"missing\": missing argument\n", false},
		{``, "s: error: argument \"s\": missing argument\nn: error: argument \"n\": missing argument\n" +
			"f: error: argument \"f\": missing argument\nb: error: argument \"b\": missing argument\n" +
			"missing: error: argument \"missing\": missing argument\n", false},
		{`{"s":"x",}`, "Error: the tool's arguments are not a JSON object: invalid JSON at byte 9: unexpected '}' looking for the beginning of an object key string", true},
		{`"fail"`, "Error: the tool's arguments are not a JSON object: invalid JSON at byte 0: want a JSON object, found string", true},
		{`{"s":"fail"}`, "Error: args_probe failed on purpose", true},
	} {
		r, err := h.CallTool(bg, a, "args_probe", []byte(c.args))
		if err != nil {
			t.Fatalf("%s: %v", c.args, err)
		}
		if r.Text != c.want || r.IsError != c.isErr {
			t.Errorf("args_probe(%s) =\n%q (error %v)\nwant\n%q (error %v)", c.args, r.Text, r.IsError, c.want, c.isErr)
		}
	}
}
