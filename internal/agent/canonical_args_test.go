package agent

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/hostfns/jsonobj"
	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// argsSeen runs one turn whose model calls echo with args, and returns
// what the tools/pre-execute and tools/post-execute listeners saw, what
// the tool got (nil for each that did not run), and the call's result.
func argsSeen(t *testing.T, args string) (pre, post, tool *string, res session.ToolResult) {
	t.Helper()
	var mu sync.Mutex
	bus := events.New(discard)
	onWaterfall(t, bus, events.EventToolPreExecute, func(p *ToolExecution) {
		mu.Lock()
		s := p.Arguments
		pre = &s
		mu.Unlock()
	})
	onWaterfall(t, bus, events.EventToolPostExecute, func(p *ToolExecution) {
		mu.Lock()
		s := p.Arguments
		post = &s
		mu.Unlock()
	})
	reg := newRegistry(t, testPersona)
	if _, err := reg.RegisterTool(prompt.Tool{Name: "echo", Description: "echo a command",
		Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}}}`)}); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, Options{Bus: bus, Registry: reg, Provider: scripted(t,
		step(1, 1, callAnswer(call{"c", "echo", args})), step(1, 2, textAnswer("ok")))})
	f.prompt(t, "go")
	for _, c := range f.tools.called() {
		s := strings.TrimPrefix(c, "echo ")
		tool = &s
	}
	rs := ofType[session.ToolResult](t, f.sess.Events())
	if len(rs) != 1 {
		t.Fatalf("%d tool results", len(rs))
	}
	return pre, post, tool, rs[0]
}

// TestHooksSeeTheToolsArguments: the two argument tricks. A key that
// differs from another only in case, and a number encoding/json cannot
// hold, are refused before any listener or the tool sees them; so is a
// key that is the tool's parameter in another case.
func TestHooksSeeTheToolsArguments(t *testing.T) {
	for _, args := range []string{
		`{"command":"rm -rf /","Command":"echo harmless"}`,
		`{"command":"rm -rf /","pad":1e400}`,
		`{"COMMAND":"rm -rf /"}`,
		`{"commanD":"rm -rf /","other":1}`,
	} {
		pre, post, tool, res := argsSeen(t, args)
		if pre != nil || post != nil || tool != nil {
			t.Errorf("%s: listeners saw %s and %s, the tool %s; want none", args, show(pre), show(post), show(tool))
		}
		if !res.IsError || res.Error == nil || res.Error.Code != CodeInvalidArguments {
			t.Errorf("%s: result %+v, want an INVALID_ARGS error", args, res)
		}
	}
	// Accepted text reaches both in its canonical form.
	pre, post, tool, _ := argsSeen(t, ` { "command" : "r\u006d -rf /" } `)
	want := `{"command":"rm -rf /"}`
	if pre == nil || post == nil || tool == nil || *pre != want || *post != want || *tool != want {
		t.Errorf("pre %s post %s tool %s, want %s for each", show(pre), show(post), show(tool), want)
	}
}

// FuzzHooksSeeWhatToolsGet: for any argument text, the tools/pre-execute
// and tools/post-execute listeners see exactly the bytes the tool gets, or
// nothing runs and the model gets INVALID_ARGS; and a hook program that
// reads those bytes with encoding/json (case-insensitive field matching)
// reads the "command" a tool reading them with jsonobj reads, or none
// when the tool has none (the tool's schema names "command").
func FuzzHooksSeeWhatToolsGet(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"command":"ls"}`, `{"command":"x","Command":"y"}`, `{"command":"x","pad":1e400}`,
		`{"command":"x","ſ":1,"s":2}`, `{"COMMAND":"x"}`, `{"command":"a","command":"b"}`, `[1]`, `{"command":`,
		`{"c":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`, "{\"command\":\"\xff\\ud800\"}",
		`{"command":"a\u0000b","x":{"y":{"Y":1}}}`, "{\"\u212aey\":1,\"key\":2}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		pre, post, tool, res := argsSeen(t, args)
		canon, err := CanonicalArguments(args)
		if err == nil {
			err = checkSpelling(json.RawMessage(`{"properties":{"command":{}}}`), canon)
		}
		if err != nil {
			if pre != nil || post != nil || tool != nil || res.Error == nil || res.Error.Code != CodeInvalidArguments {
				t.Fatalf("%q refused (%v), yet pre %s post %s tool %s result %+v", args, err, show(pre), show(post), show(tool), res)
			}
			return
		}
		if tool == nil || pre == nil || post == nil || *pre != *tool || *post != *tool || *tool != string(canon) {
			t.Fatalf("%q: pre %s post %s tool %s, want %s for each", args, show(pre), show(post), show(tool), canon)
		}
		var o jsonobj.Obj
		if o.Parse(canon) != nil {
			return // not an object: the tool refuses it itself
		}
		var hook struct {
			Command any `json:"command"`
		}
		if err := json.Unmarshal(canon, &hook); err != nil {
			t.Fatalf("encoding/json refuses %s: %v", canon, err)
		}
		v, _ := o.Lookup("command")
		var toolCmd any
		if v.Kind() != jsonobj.Invalid {
			_ = json.Unmarshal(v.Raw(), &toolCmd)
		}
		if hb := mustMarshal(hook.Command); hb != mustMarshal(toolCmd) {
			t.Fatalf("%s: a hook reads command %s, the tool %s", canon, hb, mustMarshal(toolCmd))
		}
	})
}

func mustMarshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// show is what a listener or tool saw, or "nothing".
func show(p *string) string {
	if p == nil {
		return "nothing"
	}
	return *p
}
