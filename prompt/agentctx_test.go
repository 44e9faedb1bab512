package prompt

import (
	"context"
	"encoding/json"
	"testing"
)

func TestAgentFactsRideTheContext(t *testing.T) {
	if AgentFrom(context.Background()) != nil {
		t.Fatal("a bare context has agent facts")
	}
	f := &AgentFacts{ID: "a1", Session: "s1"}
	if got := AgentFrom(WithAgent(context.Background(), f)); got != f {
		t.Fatalf("AgentFrom = %+v, want %+v", got, f)
	}
}

func TestToolSentHasAnObjectSchema(t *testing.T) {
	if got := (Tool{Name: "t"}).Sent(); string(got.Parameters) != `{"type":"object","properties":{}}` {
		t.Fatalf("Sent without parameters = %s", got.Parameters)
	}
	p := json.RawMessage(`{"type":"object","required":["x"]}`)
	if got := (Tool{Name: "t", Parameters: p}).Sent(); string(got.Parameters) != string(p) {
		t.Fatalf("Sent changed the schema: %s", got.Parameters)
	}
}
