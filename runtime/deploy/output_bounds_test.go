package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/agent"
	"github.com/dsh-wasm/dsh-wasm/internal/deploytest"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// A model server that never stops talking: emit is called with the
// chunk number and returns the next SSE data line, or "" to fall silent
// (the connection stays open until the client goes). Only the first
// request gets that stream; later ones (a step after a tool call) get a
// short answer.
func endlessModel(t *testing.T, emit func(i int) string) string {
	t.Helper()
	quit := make(chan struct{})
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		if requests.Add(1) > 1 {
			fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"done\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
			return
		}
		for i := 0; ; i++ {
			line := emit(i)
			if line == "" {
				select {
				case <-r.Context().Done():
				case <-quit:
				}
				return
			}
			if _, err := fmt.Fprintf(w, "data: %s\n\n", line); err != nil {
				return
			}
			fl.Flush()
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(quit) }) // first: Close waits for the handlers
	return srv.URL
}

// openBounded opens a deployment file on the model server at url with
// the given limits block, and a session on it.
func openBounded(t *testing.T, url, limits string) (*deploy.Deployment, *deploy.Session) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("DSH_TEST_BOUNDS_KEY", "k")
	src := fmt.Sprintf(`model: deepseek-v4-flash
provider: {base_url: %s, api_key_env: DSH_TEST_BOUNDS_KEY, max_retries: 0}
plugins: []
sessions: sessions
limits: %s
`, url, limits)
	file := filepath.Join(dir, "dsh.yml")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, err := deploy.Open(ctx, file, deploy.Options{Cache: deploytest.Cache(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(ctx) })
	s, err := d.NewSession(ctx, deploy.SessionOptions{Cwd: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(ctx) })
	return d, s
}

// promptWithin runs one turn and fails the test if it has not ended
// after limit: on code without the bounds the turn never ends.
func promptWithin(t *testing.T, s *deploy.Session, limit time.Duration) deploy.TurnResult {
	t.Helper()
	type out struct {
		res deploy.TurnResult
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := s.Prompt(context.Background(), "talk")
		done <- out{res, err}
	}()
	select {
	case o := <-done:
		// A turn that ends at a bound did not complete: Prompt says so
		// with a *TurnError, and the result still holds its events.
		var te *deploy.TurnError
		if o.err != nil && !errors.As(o.err, &te) {
			t.Fatal(o.err)
		}
		return o.res
	case <-time.After(limit):
		s.Cancel("test over")
		<-done
		t.Fatalf("the step did not end within %v", limit)
		return deploy.TurnResult{}
	}
}

// expectOutputLimit fails unless the turn ended as an error of the
// output bounds, mentioning want.
func expectOutputLimit(t *testing.T, res deploy.TurnResult, want string) {
	t.Helper()
	if res.End.Kind != session.EndError || res.End.Code != agent.CodeOutputLimit ||
		!errors.Is(res.Err, model.ErrOutputLimit) || !strings.Contains(res.End.Message, want) {
		t.Fatalf("turn end = %+v (err %v), want an error %s mentioning %q", res.End, res.Err, agent.CodeOutputLimit, want)
	}
}

func heapNow() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A stream without end ends its step as an error at the byte bound, the
// chunks up to the bound recorded, and the worker keeps at most a few
// times the bound: an idle timeout never fires while data arrives.
func TestEndlessStreamEndsAtTheByteBound(t *testing.T) {
	const bound = 1 << 20
	piece := strings.Repeat("x", 16<<10)
	url := endlessModel(t, func(i int) string {
		if i*len(piece) > 64*bound {
			return "" // enough to show the point on code without the bound
		}
		return `{"choices":[{"index":0,"delta":{"content":"` + piece + `"}}]}`
	})
	_, s := openBounded(t, url, "{step_output_bytes: 1MiB}")
	before := heapNow()
	res := promptWithin(t, s, 30*time.Second)
	grown := int64(heapNow()) - int64(before)
	runtime.KeepAlive(s)
	expectOutputLimit(t, res, "1048576 bytes")
	t.Logf("heap grew by %d bytes", grown)
	if grown > 4*bound {
		t.Errorf("the heap grew by %d bytes, more than 4× the %d-byte bound", grown, bound)
	}
	var text int
	for _, e := range s.History() {
		if e.Type == session.TypeAssistantChunk {
			var c session.AssistantChunk
			if err := json.Unmarshal(e.Data, &c); err != nil {
				t.Fatal(err)
			}
			text += len(c.Chunk.Text)
		}
	}
	if text > bound || text < bound/2 {
		t.Errorf("the session kept %d bytes of text, want what was received up to the %d-byte bound", text, bound)
	}
}

// One tool call's arguments in many pieces end the step as an error at
// the argument bound, and the session stores at most the bound of them.
func TestHugeToolArgumentsEndAtTheirBound(t *testing.T) {
	const bound = 1 << 20
	piece := strings.Repeat("a", 128<<10)
	url := endlessModel(t, func(i int) string {
		switch {
		case i == 0:
			return `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\":\""}}]}}]}`
		case i <= 128: // 16 MiB in all
			return `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"` + piece + `"}}]}}]}`
		case i == 129:
			return `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"}"}}]},"finish_reason":"tool_calls"}]}`
		case i == 130:
			return "[DONE]"
		}
		return ""
	})
	_, s := openBounded(t, url, "{tool_argument_bytes: 1MiB}")
	res := promptWithin(t, s, 30*time.Second)
	expectOutputLimit(t, res, "arguments of tool call 0 passed 1048576 bytes")
	for _, e := range s.History() {
		if e.Type == session.TypeToolCall {
			t.Errorf("a tool call past the bound was run: %s", e.Data)
		}
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("session file: %d bytes", fi.Size())
	if fi.Size() > bound+64<<10 {
		t.Errorf("the session file holds %d bytes, more than the %d-byte argument bound", fi.Size(), bound)
	}
}

// A stream that keeps sending a little ends at the step's time bound.
func TestSlowEndlessStreamEndsAtTheTimeBound(t *testing.T) {
	url := endlessModel(t, func(i int) string {
		time.Sleep(10 * time.Millisecond)
		return `{"choices":[{"index":0,"delta":{"content":"x"}}]}`
	})
	_, s := openBounded(t, url, "{step_output_time: 300ms}")
	start := time.Now()
	res := promptWithin(t, s, 30*time.Second)
	expectOutputLimit(t, res, "took longer than 300ms")
	if len(res.Text) != 0 {
		t.Errorf("text %q", res.Text)
	}
	t.Logf("ended after %v", time.Since(start))
}
