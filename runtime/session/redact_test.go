package session

import (
	"bytes"
	"strings"
	"testing"
)

// An event appended through SetRedact's function is the redacted one
// everywhere: as returned, in the log, in the messages the model is sent
// and in what the store gets.
func TestSetRedactRewritesEveryView(t *testing.T) {
	b := &memBackend{}
	s := restoreMem(t, b)
	s.SetRedact(func(data []byte) []byte { return bytes.ReplaceAll(data, []byte("hunter2"), []byte("[redacted]")) })
	e := mustAppend(t, s, NewEvent(UserMessage{Content: TextContent("my password is hunter2"), Source: Source{Kind: SourceUser}}))
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	views := map[string]string{
		"returned": string(e.Data),
		"log":      string(s.Events()[len(s.Events())-1].Data),
		"messages": s.Messages()[0].Content[0].Text,
		"stored":   string(b.recs[len(b.recs)-1].JSON),
	}
	for view, text := range views {
		if strings.Contains(text, "hunter2") || !strings.Contains(text, "[redacted]") {
			t.Errorf("%s: %s", view, text)
		}
	}
}
