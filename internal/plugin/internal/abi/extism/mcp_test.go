package extism

import (
	"encoding/json"
	"testing"
)

// TestCallInputByABI: hyper-mcp v2 wraps the call in a request with a
// numbered context; v1 and mcp.run take params and number nothing.
func TestCallInputByABI(t *testing.T) {
	n := int64(0)
	next := func() int64 { n++; return n }
	for _, c := range []struct{ abi, want string }{
		{HyperMCPv1, `{"params":{"name":"echo","arguments":{"a":1}}}`},
		{MCPRun, `{"params":{"name":"echo","arguments":{"a":1}}}`},
		{HyperMCPv2, `{"request":{"name":"echo","arguments":{"a":1}},"context":{"id":1,"_meta":{}}}`},
	} {
		got := string(CallInput(c.abi, "echo", []byte(`{"a":1}`), next))
		if got != c.want || !json.Valid([]byte(got)) {
			t.Errorf("%s: %s, want %s", c.abi, got, c.want)
		}
	}
	if n != 1 {
		t.Errorf("%d request ids drawn, want 1 (v2's only)", n)
	}
	if ListInput(HyperMCPv1, next) != nil || n != 1 {
		t.Error("v1's list input is not empty, or drew an id")
	}
}

// TestResultsTextAgreesWithResultText: the fast path renders an all-text
// result as the general one does, and leaves any other to it.
func TestResultsTextAgreesWithResultText(t *testing.T) {
	var r Results
	for _, out := range []string{
		`{"content":[{"type":"text","text":"a"},{"type":"text","text":"b\u00e9"}],"isError":true}`,
		`{"content":[{"type":"text","text":"x"}]}`,
	} {
		text, isErr, ok := r.Text([]byte(out))
		want, wantErr, err := ResultText([]byte(out))
		if !ok || err != nil || text != want || isErr != wantErr {
			t.Errorf("%s: fast %q %v %v; general %q %v %v", out, text, isErr, ok, want, wantErr, err)
		}
	}
	img := `{"content":[{"type":"image","mimeType":"image/png","data":"AAAA"}]}`
	if _, _, ok := r.Text([]byte(img)); ok {
		t.Error("the fast path took an image")
	}
	if got, _, err := ResultText([]byte(img)); err != nil || got != "[image: image/png, 3 bytes]" {
		t.Errorf("image: %q, %v", got, err)
	}
}
