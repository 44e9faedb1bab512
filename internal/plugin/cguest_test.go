package plugin

import (
	"context"
	"strings"
	"testing"
)

// TestCGuest runs the freestanding C echo tool (testdata/guests/bench-c),
// the benchmark's fast guest: a module from another toolchain, with static
// buffers instead of an allocator, must load, be instrumented, and answer
// correctly, including its error results.
func TestCGuest(t *testing.T) {
	h := newHost(t)
	p, err := h.Load(context.Background(), Spec{Name: "c", Source: cGuest(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !p.interruptible {
		t.Fatal("the C guest was not instrumented")
	}
	a := agent("a", "m")
	for _, c := range []struct {
		args, want string
		isErr      bool
	}{
		{`{"text":"hello"}`, "hello", false},
		{` { "text" : "` + strings.Repeat("x", 5000) + `" } `, strings.Repeat("x", 5000), false},
		{`{"text":"tab\t quote\" back\\ \u00e9 \ud83d\ude00 lone \ud800 end"}`, "tab\t quote\" back\\ é 😀 lone \uFFFD end", false},
		{`{"text":"é and more than eight bytes"}`, "é and more than eight bytes", false},
		{`{"text":"x"`, "Error: arguments: want ',' or '}' at byte 11", true},
		{`{"other":1}`, "Error: arguments: unknown member at byte 1", true},
		{`{}`, "Error: arguments: missing text at byte 2", true},
		{`{"text":1}`, "Error: arguments: text must be a string at byte 8", true},
		{"{\"text\":\"ctl\x01\"}", "Error: arguments: bad string at byte 12", true},
		{`[]`, "Error: arguments: want a JSON object at byte 0", true},
		{`{"text":"x"} x`, "Error: arguments: data after the object at byte 12", true},
	} {
		r, err := h.CallTool(context.Background(), a, "echo_c", []byte(c.args))
		if err != nil {
			t.Fatalf("%s: %v", c.args, err)
		}
		if r.Text != c.want || r.IsError != c.isErr {
			t.Errorf("echo_c(%.40q) = %.60q (error %v), want %.60q (error %v)", c.args, r.Text, r.IsError, c.want, c.isErr)
		}
	}
}
