package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/session/filestore"
)

// gatedStore holds every Open until gate is closed, and says when one
// is waiting: a prompt that is registered but has no session yet.
type gatedStore struct {
	*filestore.Store
	waiting chan struct{}
	gate    chan struct{}
	once    sync.Once
}

// release lets every Open through.
func (g *gatedStore) release() { g.once.Do(func() { close(g.gate) }) }

func (g *gatedStore) Open(id string) (*session.Session, error) {
	g.waiting <- struct{}{}
	<-g.gate
	return g.Store.Open(id)
}

func gatedServer(t *testing.T) (*httptest.Server, *gatedStore) {
	t.Helper()
	p, err := scripted.Provider([]scripted.Answer{{Text: "done"}})
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedStore{Store: filestore.New(t.TempDir(), filestore.Options{}), waiting: make(chan struct{}, 4), gate: make(chan struct{})}
	d, err := deploy.New(context.Background(), deploy.Options{Model: "m", Provider: p, Store: g, Builtins: os.DirFS(t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	s, err := New(Config{Deployment: d, Workspaces: t.TempDir(), Tokens: map[string]string{alphaTok: "alpha"}, MaxTurns: 4, MaxTenantTurns: 4})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	t.Cleanup(g.release) // before hs.Close, which waits for a held prompt
	return hs, g
}

// sseEvents reads a prompt's stream to its end: the events' JSON objects.
func sseEvents(t *testing.T, resp *http.Response) []map[string]any {
	t.Helper()
	defer resp.Body.Close()
	var evs []map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var e map[string]any
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatal(err)
			}
			evs = append(evs, e)
		}
	}
	return evs
}

func startPrompt(t *testing.T, url string) <-chan *http.Response {
	t.Helper()
	out := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest("POST", url, strings.NewReader(`{"text":"hi"}`))
		req.Header.Set("Authorization", "Bearer "+alphaTok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			close(out)
			return
		}
		out <- resp
	}()
	return out
}

// A cancel that arrives while the prompt's session is still opening is
// kept: the turn starts cancelled and ends aborted with the reason. And
// a second prompt of a session whose prompt is here is refused 409 with
// Retry-After.
func TestCancelBeforeTheTurnStarts(t *testing.T) {
	hs, g := gatedServer(t)
	code, body := do(t, "POST", hs.URL+"/v1/sessions", alphaTok, `{"cwd":"p"}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	var h session.Header
	json.Unmarshal(body, &h)
	url := hs.URL + "/v1/sessions/" + h.ID

	first := startPrompt(t, url+"/prompt")
	select {
	case <-g.waiting:
	case <-time.After(time.Minute):
		t.Fatal("the prompt never opened its session")
	}
	req, _ := http.NewRequest("POST", url+"/prompt", strings.NewReader(`{"text":"again"}`))
	req.Header.Set("Authorization", "Bearer "+alphaTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a second prompt of a busy session: %d, Retry-After %q; want 409 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if code, body := do(t, "POST", url+"/cancel", alphaTok, `{"reason":"changed my mind"}`); code != http.StatusAccepted {
		t.Fatalf("cancel before the turn started: %d %s, want 202", code, body)
	}
	g.release()
	evs := sseEvents(t, <-first)
	last := evs[len(evs)-1]
	if last["type"] != session.TypeTurnEnd {
		t.Fatalf("the stream ends with %v", last)
	}
	reason := last["data"].(map[string]any)["reason"].(map[string]any)
	if reason["kind"] != session.EndAborted || reason["reason"] != "changed my mind" {
		t.Fatalf("the turn ended %v, want aborted with the cancel's reason", reason)
	}
}
