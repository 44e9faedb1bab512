package httpapi

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// A turn that ran but failed (here the scripted model has no answer for
// it) is streamed with its turn/end; the *deploy.TurnError that Prompt
// returns is not a second, "error" event: that one means no turn ran.
func TestAFailedTurnStreamsItsEndOnly(t *testing.T) {
	hs, _ := newServer(t)
	code, body := do(t, "POST", hs.URL+"/v1/sessions", alphaTok, `{"cwd":"p"}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	id := strings.SplitN(strings.SplitN(string(body), `"id":"`, 2)[1], `"`, 2)[0]
	req, _ := http.NewRequest("POST", hs.URL+"/v1/sessions/"+id+"/prompt", strings.NewReader(`{"text":"hi"}`))
	req.Header.Set("Authorization", "Bearer "+alphaTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	stream, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(stream), `"type":"`+session.TypeTurnEnd+`"`) || !strings.Contains(string(stream), `"kind":"`+session.EndError+`"`) {
		t.Fatalf("no turn/end with an error kind in the stream:\n%s", stream)
	}
	if strings.Contains(string(stream), "event: error") {
		t.Errorf("a turn that ran was streamed with an error event:\n%s", stream)
	}
}
