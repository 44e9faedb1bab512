package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/deepseek"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// fakeModel is a DeepSeek-shaped SSE server on loopback: a request whose
// messages hold no tool result answers one call of testkit's echo_args,
// the next answers text. It caps concurrent streams at 256.
func fakeModel() (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	sem := make(chan struct{}, 256)
	chunk := func(delta, finish string) string {
		return `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}`
	}
	usage := `,"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}`
	mux := http.NewServeMux()
	mux.HandleFunc("/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		sem <- struct{}{}
		defer func() { <-sem }()
		body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		var events []string
		if !strings.Contains(string(body), `"role":"tool"`) {
			events = []string{
				chunk(`{"role":"assistant","content":""}`, "null"),
				chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"echo_args","arguments":"{\"text\":\"hello\"}"}}]}`, "null"),
				strings.TrimSuffix(chunk(`{}`, `"tool_calls"`), "}") + usage + "}",
			}
		} else {
			events = []string{
				chunk(`{"role":"assistant","content":"done"}`, "null"),
				strings.TrimSuffix(chunk(`{}`, `"stop"`), "}") + usage + "}",
			}
		}
		for _, e := range events {
			fmt.Fprintf(w, "data: %s\n\n", e)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return srv, "http://" + ln.Addr().String(), nil
}

// timedProvider adds each Generate's duration to the turn's account in
// its context: the model's time, which the loop's overhead excludes.
type timedProvider struct{ p model.Provider }

type modelTimeKey struct{}

func (t timedProvider) Generate(ctx context.Context, req *model.Request, emit func(model.Chunk) error) error {
	t0 := time.Now()
	err := t.p.Generate(ctx, req, emit)
	if acc, ok := ctx.Value(modelTimeKey{}).(*atomic.Int64); ok {
		acc.Add(int64(time.Since(t0)))
	}
	return err
}

// loopRows runs c.sessions sessions at once, one turn each (a tool call
// of testkit's Wasm echo, then a text answer), against the fake server.
func loopRows(c bconfig) ([]*row, error) {
	ctx := context.Background()
	kit, err := guestbuild.Build("testdata/guests/testkit")
	if err != nil {
		return nil, err
	}
	srv, url, err := fakeModel()
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	prov, err := deepseek.New(deepseek.Options{BaseURL: url, APIKeyEnv: "BENCH_KEY", Model: "m",
		LookupEnv: func(string) (string, bool) { return "k", true }})
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "dsh-bench-loop-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	// The sessions live beside the workspace, not in it: a cwd inside the
	// host's own state is refused.
	sessions := filepath.Join(tmp, "sessions")
	work := filepath.Join(tmp, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		return nil, err
	}
	cch, err := deployCache()
	if err != nil {
		return nil, err
	}
	goroutines0 := runtime.NumGoroutine()
	d, err := deploy.New(ctx, deploy.Options{Model: "m", Provider: timedProvider{prov}, SessionsDir: sessions, Cache: cch, Logger: discard(),
		Plugins: []deploy.PluginSpec{{Name: "kit", Source: kit, Config: json.RawMessage(`{"tools":["echo_args"]}`)}}})
	if err != nil {
		return nil, err
	}
	group := fmt.Sprintf("agent loop, %d concurrent sessions, one Wasm tool call each", c.sessions)
	turns := &row{group: group, name: "turn wall time (model included)", unit: "time"}
	over := &row{group: group, name: "loop overhead (turn minus model time)", unit: "time", base: turns.name}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	t0 := time.Now()
	cpu0 := cpuTime()
	for i := range c.sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fail := func(err error) {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("session %d: %w", i, err)
				}
				mu.Unlock()
			}
			s, err := d.NewSession(ctx, deploy.SessionOptions{Cwd: work})
			if err != nil {
				fail(err)
				return
			}
			defer s.Close(ctx)
			var acc atomic.Int64
			ts := time.Now()
			res, err := s.Prompt(context.WithValue(ctx, modelTimeKey{}, &acc), "echo hello")
			wall := time.Since(ts)
			if err != nil {
				fail(err)
				return
			}
			if res.End.Kind != session.EndCompleted || res.Steps != 2 || res.Text != "done" {
				fail(fmt.Errorf("turn ended %+v after %d steps with %q: %v", res.End, res.Steps, res.Text, res.Err))
				return
			}
			mu.Lock()
			turns.samples = append(turns.samples, float64(wall))
			over.samples = append(over.samples, float64(wall-time.Duration(acc.Load())))
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	cpu := cpuTime() - cpu0
	if firstErr != nil {
		d.Close(ctx)
		return nil, firstErr
	}
	if n := d.PluginInstances(); n != 1 {
		d.Close(ctx)
		return nil, fmt.Errorf("%d instances of kit open after every session closed, want the load-time one", n)
	}
	if err := d.Close(ctx); err != nil {
		return nil, err
	}
	srv.Close()
	// Goroutines left: idle HTTP connections close with the transport's
	// idle timeout, so wait for the count to come back, bounded.
	left := 0
	for deadline := time.Now().Add(30 * time.Second); ; {
		left = runtime.NumGoroutine() - goroutines0
		if left <= 0 || time.Now().After(deadline) {
			break
		}
		if tr, ok := http.DefaultTransport.(*http.Transport); ok {
			tr.CloseIdleConnections()
		}
		time.Sleep(50 * time.Millisecond)
	}
	if left > 0 {
		return nil, fmt.Errorf("%d goroutines left after the loop", left)
	}
	rate := &row{group: group, name: "turns per second", unit: "rate", samples: []float64{float64(c.sessions) / elapsed.Seconds()}}
	turns.cpu = float64(cpu) / float64(c.sessions)
	leak := &row{group: group, name: "goroutines and instances left afterwards", unit: "count", samples: []float64{0}}
	return []*row{turns, over, rate, leak}, nil
}
