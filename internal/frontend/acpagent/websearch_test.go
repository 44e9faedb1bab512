package acpagent

import (
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// A web_search call is the reference's search card: kind search, titled by
// the query, which is its raw input; without a query it is still a
// search, titled by the tool's name.
func TestWebSearchCard(t *testing.T) {
	tr := newTranslator("/w", false)
	us := tr.live(event(t, session.ToolCall{Turn: 1, Step: 1, CallID: "c1", Name: "web_search", Arguments: `{"query":"latest Go release"}`}))
	if len(us) != 1 || us[0].ToolCall == nil {
		t.Fatalf("call updates = %+v", us)
	}
	tc := us[0].ToolCall
	if tc.Kind != acp.ToolKindSearch || tc.Title != "latest Go release" || tc.RawInput != "latest Go release" {
		t.Errorf("search card = %+v", tc)
	}
	us = tr.live(event(t, session.ToolCall{Turn: 1, Step: 2, CallID: "c2", Name: "web_search", Arguments: `{}`}))
	if tc := us[0].ToolCall; tc.Kind != acp.ToolKindSearch || tc.Title != "web_search" {
		t.Errorf("search card without a query = %+v", tc)
	}
	us = tr.live(event(t, session.ToolResult{Turn: 1, Step: 1, CallID: "c1", Content: session.TextContent("Sources:\n- [a](https://a.example/)")}))
	if len(us) != 1 || us[0].ToolCallUpdate == nil || us[0].ToolCallUpdate.Status == nil || *us[0].ToolCallUpdate.Status != acp.ToolCallStatusCompleted {
		t.Errorf("result updates = %+v", us)
	}
}
