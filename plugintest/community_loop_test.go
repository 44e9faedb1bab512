package plugintest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/plugintest"
)

func guest(t *testing.T, dir string) string {
	t.Helper()
	p, err := guestbuild.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Community plugins through the real agent loop: the model is offered
// their tools and its tool calls reach describe/call (v1, mcp.run) and
// list_tools/call_tool (v2).
func TestCommunityPluginsThroughTheLoop(t *testing.T) {
	h := plugintest.New(t)
	h.Load(guest(t, "testdata/guests/mcp-v1"), plugintest.Name("v1"))
	h.Load(guest(t, "testdata/guests/mcp-v2"), plugintest.Name("v2"))
	h.Load(guest(t, "testdata/guests/mcp-run"), plugintest.Name("srv"), plugintest.Config(map[string]any{"greeting": "Howdy"}))
	for _, c := range []struct {
		tool, args, want string
	}{
		{"echo", `{"text":"from v1"}`, "from v1"},
		{"v2_echo", `{"text":"from v2"}`, "from v2"},
		{"greet", `{"name":"Ann"}`, "Howdy, Ann"},
	} {
		turn := h.Turn(c.tool, c.args)
		if turn.IsError || turn.Result != c.want || turn.Text != "the tool said: "+c.want {
			t.Errorf("%s: %+v", c.tool, turn)
		}
		for _, want := range []string{"echo", "v2_echo", "greet", "read_file"} {
			if !strings.Contains(" "+strings.Join(turn.Tools, " ")+" ", " "+want+" ") {
				t.Errorf("the model was not offered %s: %v", want, turn.Tools)
			}
		}
	}
}

// Two community plugins with a tool of the same name: the second load is
// refused with a message that says why.
func TestCommunityToolNameClash(t *testing.T) {
	h := plugintest.New(t)
	h.Load(guest(t, "testdata/guests/mcp-v1"), plugintest.Name("first"))
	_, err := plugintest.HostOf(h).Load(context.Background(), plugin.Spec{Name: "second", Source: guest(t, "testdata/guests/mcp-v1")})
	if !errors.Is(err, plugin.ErrInit) || !strings.Contains(err.Error(), `tool "echo"`) || !strings.Contains(err.Error(), "tool names are global") {
		t.Fatalf("second load: %v", err)
	}
}
