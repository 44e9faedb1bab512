package plugintest_test

import (
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/plugintest"
)

// A plugin author's test: build the plugin in this directory, load it
// with a config, call its tool directly, check the section it
// contributes, then run one turn of the real agent loop in which a
// scripted model calls the tool.
func Example() {
	testShout := func(t *testing.T) {
		h := plugintest.New(t)
		h.Load(plugintest.BuildGo(t, "."), plugintest.Config(map[string]any{"mark": "!"}))
		if r := h.Call("shout", map[string]string{"text": "hi"}); r.IsError || r.Text != "HI!" {
			t.Errorf("shout = %+v", r)
		}
		if !strings.Contains(h.Render(), "Shout with the shout tool") {
			t.Error("the guide section is not in the system prompt")
		}
		turn := h.Turn("shout", map[string]string{"text": "hi"})
		if turn.Result != "HI!" || !strings.Contains(turn.System, "shout") {
			t.Errorf("turn = %+v", turn)
		}
	}
	_ = testShout // in a _test.go file: func TestShout(t *testing.T) { ... }
}
