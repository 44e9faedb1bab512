//go:build !wasip1

// The SDK's host-side tests: the export handlers and the host calls run
// as plain Go, with a fake host in place of hostCall, so they need no
// Wasm build.
package guest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
)

// fakeHost replaces hostCall for one test: it records each call and
// answers with reply.
func fakeHost(t *testing.T, reply func(fn string, in []byte) (hostfns.Status, []byte)) *[]string {
	t.Helper()
	var calls []string
	saved, savedSetup := hostCall, setupFn
	hostCall = func(fn string, in []byte) (hostfns.Status, []byte) {
		calls = append(calls, fn+" "+string(in))
		return reply(fn, in)
	}
	t.Cleanup(func() {
		hostCall, setupFn = saved, savedSetup
		clear(sections)
		clear(variables)
		clear(tools)
		clear(listeners)
	})
	return &calls
}

func ok(string, []byte) (hostfns.Status, []byte) { return hostfns.StatusOK, nil }

func frame(fields ...string) []byte {
	return []byte(strings.Join(fields, string(rune(hostfns.FrameSep))))
}

// At load, the setup's registrations go to the host; in a per-agent
// instance they only record the handlers, which the exports then call.
func TestSetupRegistersAtLoadOnly(t *testing.T) {
	calls := fakeHost(t, ok)
	Main(func(p *Plugin) error {
		if err := p.Section("demo:intro", 120, "Use the demo."); err != nil {
			return err
		}
		if err := p.Variable("demo_mood", func(Context) (string, bool, error) { return "calm", true, nil }); err != nil {
			return err
		}
		return p.Tool(Tool{Name: "echo", Description: "Echo."}, func(_ Context, args []byte) (string, error) {
			return "echo " + string(args), nil
		})
	})
	if out, st := handleSetup([]byte(`{"k":1}`), true); st != hostfns.OutOK {
		t.Fatalf("dsh_init: %d %q", st, out)
	}
	if len(*calls) != 3 || !strings.HasPrefix((*calls)[0], hostfns.FnSectionRegister+" ") ||
		!strings.HasPrefix((*calls)[2], hostfns.FnToolRegister+" ") || !strings.Contains((*calls)[2], `"name":"echo"`) {
		t.Errorf("load-time host calls %q", *calls)
	}
	*calls = nil
	if _, st := handleSetup(nil, false); st != hostfns.OutOK || len(*calls) != 0 {
		t.Errorf("dsh_setup made host calls %q (status %d)", *calls, st)
	}
	if out, st := handleTool(frame("echo", `{}`, `{"x":1}`)); st != hostfns.OutOK || string(out) != `echo {"x":1}` {
		t.Errorf("dsh_tool echo = %d %q", st, out)
	}
	if out, st := handleVariable(frame("demo_mood", `{}`)); st != hostfns.OutOK || string(out) != "calm" {
		t.Errorf("dsh_variable demo_mood = %d %q", st, out)
	}
	if out, st := handleTool(frame("nope", `{}`, `{}`)); st != hostfns.OutError || !strings.Contains(string(out), "no tool nope") {
		t.Errorf("dsh_tool of an unknown tool = %d %q", st, out)
	}
	if out, st := handleTool([]byte("echo-without-frame")); st != hostfns.OutError || !strings.Contains(string(out), "malformed frame") {
		t.Errorf("dsh_tool of a bad frame = %d %q", st, out)
	}
}

// A setup error and a missing Main are the plugin's init error, said.
func TestSetupErrors(t *testing.T) {
	fakeHost(t, ok)
	setupFn = nil
	if out, st := handleSetup(nil, true); st != hostfns.OutError || !strings.Contains(string(out), "guest.Main") {
		t.Errorf("no Main: %d %q", st, out)
	}
	Main(func(*Plugin) error { return errors.New("bad config") })
	if out, st := handleSetup(nil, true); st != hostfns.OutError || string(out) != "bad config" {
		t.Errorf("failing setup: %d %q", st, out)
	}
}

// ToolArgs parses the arguments once and types each one; a missing or
// mistyped argument is an error result naming it, and arguments that are
// not an object never reach the handler.
func TestToolArgs(t *testing.T) {
	fakeHost(t, ok)
	Main(func(p *Plugin) error {
		return p.ToolArgs(Tool{Name: "greet"}, func(_ Context, a *Args, out *Result) error {
			name, err := a.String("name")
			if err != nil {
				return err
			}
			times, err := a.Int("times")
			if err != nil {
				return err
			}
			loud := a.Has("loud")
			for range times {
				out.WriteString("hi " + name)
			}
			if loud {
				out.WriteString("!")
			}
			return nil
		})
	})
	if _, st := handleSetup(nil, false); st != hostfns.OutOK {
		t.Fatal("setup failed")
	}
	cases := []struct{ args, want string }{
		{`{"name":"Ann","times":2,"loud":true}`, "hi Annhi Ann!"},
		{`{"name":"B\u00e9a","times":1}`, "hi Béa"},
		{`{"times":1}`, `argument "name": missing argument`},
		{`{"name":"Ann","times":"two"}`, `argument "times"`},
		{`[1,2]`, "not a JSON object"},
		{``, `argument "name": missing argument`},
	}
	for _, c := range cases {
		out, _ := handleTool(frame("greet", `{}`, c.args))
		if !strings.Contains(string(out), c.want) {
			t.Errorf("greet(%s) = %q, want %q in it", c.args, out, c.want)
		}
	}
}

// Call marshals its request, and a failure status is a HostError that Is
// matches by status; outside a host it says so.
func TestCall(t *testing.T) {
	calls := fakeHost(t, func(fn string, in []byte) (hostfns.Status, []byte) {
		if fn == hostfns.FnEnvGet {
			return hostfns.ErrDenied, []byte("HOME is not granted")
		}
		return hostfns.StatusOK, []byte(`{"ok":true}`)
	})
	out, err := Call(hostfns.FnEventEmit, map[string]int{"n": 1})
	if err != nil || string(out) != `{"ok":true}` || (*calls)[0] != hostfns.FnEventEmit+` {"n":1}` {
		t.Errorf("Call = %q, %v (calls %q)", out, err, *calls)
	}
	_, _, err = Getenv("HOME")
	var he *HostError
	if !errors.As(err, &he) || he.Func != hostfns.FnEnvGet || !Is(err, hostfns.ErrDenied) || !strings.Contains(err.Error(), "not granted") {
		t.Errorf("Getenv denied = %v", err)
	}
	if _, err := Call("x", json.RawMessage(`{`)); err != nil || (*calls)[len(*calls)-1] != "x {" {
		t.Errorf("a RawMessage request is sent as is: %v, %q", err, *calls)
	}
}
