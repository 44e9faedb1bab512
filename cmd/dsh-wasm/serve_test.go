package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/pgtest"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// scriptedModel is a DeepSeek-shaped model server that answers by the
// last user message:
//
//	"quick ..."  a text answer at once;
//	"slow ..."   reasoning trickling until the request is cancelled;
//	"tool ..."   a call of tool "probe" (unknown: an error result), then,
//	             once the result is back, a request that hangs.
//
// hung receives the text of each request that hangs.
type scriptedModel struct {
	hung chan string
}

func (m *scriptedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var user, lastRole string
	for _, msg := range req.Messages {
		lastRole = msg.Role
		if msg.Role == "user" {
			b, _ := json.Marshal(msg.Content)
			user = string(b)
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta, finish string) {
		fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"deepseek-v4-flash\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, finish)
		w.(http.Flusher).Flush()
	}
	end := func() {
		fmt.Fprint(w, "data: {\"id\":\"u\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"deepseek-v4-flash\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n")
	}
	hang := func() {
		select {
		case m.hung <- user:
		default:
		}
		for {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(100 * time.Millisecond):
				chunk(reasoning("thinking"), "null")
			}
		}
	}
	switch {
	case strings.Contains(user, "slow"):
		hang()
	case strings.Contains(user, "tool") && lastRole == "tool":
		hang()
	case strings.Contains(user, "tool"):
		chunk(toolCall("call_p", "probe", `{}`), "null")
		chunk(`{"content":null,"reasoning_content":null}`, `"tool_calls"`)
		end()
	default:
		chunk(content("done"), "null")
		chunk(`{"content":null,"reasoning_content":null}`, `"stop"`)
		end()
	}
}

// worker is a `dsh-wasm serve` child process.
type worker struct {
	cmd    *exec.Cmd
	url    string
	stderr *bytes.Buffer
}

const (
	tokenAlpha = "alpha-token-0123456789"
	tokenBeta  = "beta-token-0123456789ab"
)

// serveSetup writes a deployment for serve and returns its path. withPG
// false: JSONL sessions; true: a fresh database on the test server.
func serveSetup(t *testing.T, modelURL string, withPG bool, extra string) (cfgPath string, env []string) {
	t.Helper()
	dsn := ""
	if withPG {
		dsn = pgtest.DB(t) + "&pool_max_conns=24"
	}
	return serveSetupStore(t, modelURL, dsn, 5*time.Second, extra)
}

// serveSetupStore is serveSetup on the database dsn (empty: JSONL
// sessions) with leases of ttl.
func serveSetupStore(t *testing.T, modelURL, dsn string, ttl time.Duration, extra string) (cfgPath string, env []string) {
	t.Helper()
	dir := t.TempDir()
	store := ""
	env = append(os.Environ(), "DEEPSEEK_API_KEY=sk-fake", "XDG_DATA_HOME="+filepath.Join(dir, "xdg"),
		`DSH_TOKENS={"`+tokenAlpha+`":"alpha","`+tokenBeta+`":"beta"}`)
	if dsn != "" {
		store = fmt.Sprintf("store:\n  dsn_env: DSH_TEST_DSN\n  lease_ttl: %s\n", ttl)
		env = append(env, "DSH_TEST_DSN="+dsn)
	}
	cfg := fmt.Sprintf(`model: deepseek-v4-flash
provider:
  base_url: %s
  max_retries: 0
plugins: []
sessions: %s
%sserve:
  workspaces: %s
  tokens_env: DSH_TOKENS
%s`, modelURL, filepath.Join(dir, "sessions"), store, filepath.Join(dir, "ws"), extra)
	cfgPath = filepath.Join(dir, "dsh.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfgPath, env
}

var servingRE = regexp.MustCompile(`serving on (http://[0-9.:]+)`)

func startWorker(t *testing.T, cfgPath string, env []string) *worker {
	t.Helper()
	cmd := exec.Command(binary(t), "serve", "--config", cfgPath, "--listen", "127.0.0.1:0")
	cmd.Env = env
	return startWorkerCmd(t, cmd)
}

// startWorkerCmd starts cmd, a serve worker, and waits for its address.
func startWorkerCmd(t *testing.T, cmd *exec.Cmd) *worker {
	t.Helper()
	w := &worker{stderr: &bytes.Buffer{}, cmd: cmd}
	pr, pw := io.Pipe()
	w.cmd.Stderr = pw
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.cmd.Process.Kill()
		w.cmd.Wait()
		pw.Close()
	})
	found := make(chan string, 1)
	var mu sync.Mutex
	go func() {
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			mu.Lock()
			w.stderr.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
	}()
	select {
	case w.url = <-found:
	case <-time.After(90 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("worker did not start:\n%s", w.stderr)
	}
	return w
}

func apiReq(t *testing.T, method, url, token, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func createSession(t *testing.T, w *worker, token, cwd string) session.Header {
	t.Helper()
	code, body := apiReq(t, "POST", w.url+"/v1/sessions", token, `{"cwd":"`+cwd+`"}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	var h session.Header
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatal(err)
	}
	return h
}

// turnStream is a prompt's SSE response read as it comes.
type turnStream struct {
	code   int
	header http.Header
	events chan map[string]any
	body   []byte
}

// prompt starts a turn; the stream's events arrive on the channel, which
// closes at the end of the response.
func promptTurn(t *testing.T, ctx context.Context, w *worker, token, id, text string) *turnStream {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", w.url+"/v1/sessions/"+id+"/prompt", strings.NewReader(`{"text":"`+text+`"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("prompt: %v", err)
	}
	ts := &turnStream{code: resp.StatusCode, header: resp.Header, events: make(chan map[string]any, 1024)}
	if resp.StatusCode != http.StatusOK {
		ts.body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		close(ts.events)
		return ts
	}
	go func() {
		defer resp.Body.Close()
		defer close(ts.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var e map[string]any
			if json.Unmarshal([]byte(line), &e) == nil {
				ts.events <- e
			}
		}
	}()
	return ts
}

// finish reads the stream to its end and returns its events.
func (ts *turnStream) finish(t *testing.T) []map[string]any {
	t.Helper()
	var evs []map[string]any
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case e, ok := <-ts.events:
			if !ok {
				return evs
			}
			evs = append(evs, e)
		case <-timeout:
			t.Fatal("the turn's stream did not end")
		}
	}
}

// endKind is the kind of the stream's turn/end, checking the stream
// starts with the session header.
func endKind(t *testing.T, evs []map[string]any) string {
	t.Helper()
	if len(evs) == 0 || evs[0]["type"] != "session" {
		t.Fatalf("the stream does not start with the session header: %v", evs)
	}
	last := evs[len(evs)-1]
	if last["type"] != session.TypeTurnEnd {
		t.Fatalf("the stream ends with %v, not turn/end", last["type"])
	}
	return last["data"].(map[string]any)["reason"].(map[string]any)["kind"].(string)
}

// exported reads a session through `dsh-wasm session export`.
func exported(t *testing.T, cfgPath string, env []string, id string) []byte {
	t.Helper()
	cmd := exec.Command(binary(t), "session", "export", id, "--config", cfgPath)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("session export: %v: %s", err, stderr.String())
	}
	return out
}

// turnLog is a session's turns: for each, its end kind and event types,
// after checking the seqs are gapless and the turns never interleave.
type turnLog struct {
	ends  []string
	types [][]string
}

func readTurns(t *testing.T, jsonl []byte) turnLog {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(jsonl), "\n"), "\n")
	var tl turnLog
	open := false
	for i, line := range lines[1:] {
		var e struct {
			Type string          `json:"type"`
			Seq  int64           `json:"seq"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("line %d: %v", i+2, err)
		}
		if e.Seq != int64(i) {
			t.Fatalf("line %d has seq %d, want %d: the log has a gap or a duplicate", i+2, e.Seq, i)
		}
		switch e.Type {
		case session.TypeTurnStart:
			if open {
				t.Fatalf("seq %d: a turn starts inside another: turns interleaved", e.Seq)
			}
			open = true
			tl.types = append(tl.types, nil)
			tl.ends = append(tl.ends, "")
		case session.TypeTurnEnd:
			var te session.TurnEnd
			json.Unmarshal(e.Data, &te)
			tl.ends[len(tl.ends)-1] = te.Reason.Kind
			open = false
		}
		if len(tl.types) > 0 {
			tl.types[len(tl.types)-1] = append(tl.types[len(tl.types)-1], e.Type)
		}
	}
	if open {
		t.Fatalf("the log ends inside a turn")
	}
	return tl
}

// Two workers share one PostgreSQL: a turn started on A can be cancelled
// through B; a session prompted through both at once runs one turn and
// refuses the other; another tenant can neither read, prompt nor cancel
// it; and when A is killed mid-turn, B takes the session over, closing
// the killed turn as interrupted and keeping what it had done.
func TestServeTwoWorkers(t *testing.T) {
	model := &scriptedModel{hung: make(chan string, 4)}
	ms := httptest.NewServer(model)
	defer ms.Close()
	cfgPath, env := serveSetup(t, ms.URL, true, "")
	a := startWorker(t, cfgPath, env)
	b := startWorker(t, cfgPath, env)
	ctx := context.Background()

	h := createSession(t, a, tokenAlpha, "proj")
	id := h.ID
	if !strings.HasSuffix(h.Cwd, filepath.Join("ws", "alpha", "proj")) {
		t.Fatalf("cwd %q is not inside alpha's workspace root", h.Cwd)
	}

	// Turn 1 completes on A.
	if ts := promptTurn(t, ctx, a, tokenAlpha, id, "quick one"); ts.code != 200 {
		t.Fatalf("prompt on A: %d %s", ts.code, ts.body)
	} else if k := endKind(t, ts.finish(t)); k != session.EndCompleted {
		t.Fatalf("turn 1 ended %s", k)
	}

	// Turn 2 runs on A; the same session prompted through B is refused,
	// and a cancel sent to B stops the turn on A.
	slow := promptTurn(t, ctx, a, tokenAlpha, id, "slow two")
	if slow.code != 200 {
		t.Fatalf("slow prompt: %d %s", slow.code, slow.body)
	}
	select {
	case <-model.hung:
	case <-time.After(time.Minute):
		t.Fatal("the slow turn never reached the model")
	}
	if ts := promptTurn(t, ctx, b, tokenAlpha, id, "quick intruder"); ts.code != http.StatusConflict {
		t.Fatalf("a concurrent prompt through B: %d %s, want 409", ts.code, ts.body)
	} else if ts.header.Get("Retry-After") == "" {
		t.Errorf("the 409 of a session busy on another worker carries no Retry-After")
	}
	if ts := promptTurn(t, ctx, a, tokenAlpha, id, "quick intruder"); ts.code != http.StatusConflict {
		t.Fatalf("a concurrent prompt through A: %d %s, want 409", ts.code, ts.body)
	}

	// Another tenant is refused everything about the session.
	for _, c := range []struct{ method, path, body string }{
		{"GET", "", ""},
		{"POST", "/prompt", `{"text":"quick"}`},
		{"POST", "/cancel", ""},
	} {
		if code, body := apiReq(t, c.method, b.url+"/v1/sessions/"+id+c.path, tokenBeta, c.body); code != http.StatusNotFound {
			t.Errorf("tenant beta: %s %s: %d %s, want 404", c.method, c.path, code, body)
		}
	}
	if code, body := apiReq(t, "GET", b.url+"/v1/sessions", tokenBeta, ""); code != 200 || strings.Contains(string(body), id) {
		t.Errorf("tenant beta's list: %d %s", code, body)
	}
	if code, _ := apiReq(t, "GET", b.url+"/v1/sessions/"+id, "", ""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	if code, body := apiReq(t, "GET", b.url+"/v1/sessions", tokenAlpha, ""); code != 200 || !strings.Contains(string(body), id) {
		t.Errorf("tenant alpha's list: %d %s", code, body)
	}
	// Beta's turn still runs: the refused cancel did nothing.
	var seen []map[string]any
	for wait := time.After(300 * time.Millisecond); ; {
		var e map[string]any
		select {
		case e = <-slow.events:
		case <-wait:
		}
		if e == nil {
			break
		}
		if e["type"] == session.TypeTurnEnd {
			t.Fatal("the turn ended after another tenant's cancel")
		}
		seen = append(seen, e)
	}

	if code, body := apiReq(t, "POST", b.url+"/v1/sessions/"+id+"/cancel", tokenAlpha, `{"reason":"stop from B"}`); code != http.StatusAccepted {
		t.Fatalf("cancel through B: %d %s", code, body)
	}
	slowEvents := append(seen, slow.finish(t)...)
	if k := endKind(t, slowEvents); k != session.EndAborted {
		t.Fatalf("turn 2 ended %s after the cancel through B, want %s", k, session.EndAborted)
	}
	if r := slowEvents[len(slowEvents)-1]["data"].(map[string]any)["reason"].(map[string]any)["reason"]; r != "stop from B" {
		t.Errorf("turn 2's end reason %v, want the reason sent to B", r)
	}

	// Two prompts sent at once through the two workers: one runs, the
	// other is refused.
	race := make(chan *turnStream, 2)
	for _, w := range []*worker{a, b} {
		go func() { race <- promptTurn(t, ctx, w, tokenAlpha, id, "slow race") }()
	}
	r1, r2 := <-race, <-race
	if r1.code == 200 {
		r1, r2 = r2, r1
	}
	if r1.code != http.StatusConflict || r2.code != 200 {
		t.Fatalf("two prompts at once: %d and %d, want one 409 and one 200", r1.code, r2.code)
	}
	<-model.hung
	if code, body := apiReq(t, "POST", a.url+"/v1/sessions/"+id+"/cancel", tokenAlpha, ""); code != http.StatusAccepted {
		t.Fatalf("cancel the race's winner: %d %s", code, body)
	}
	if k := endKind(t, r2.finish(t)); k != session.EndAborted {
		t.Fatalf("the race's turn ended %s", k)
	}

	// Turn 4 runs a tool step on A, then A is killed while the model
	// answers the second step.
	ctx3, cancel3 := context.WithCancel(ctx)
	defer cancel3()
	killed := promptTurn(t, ctx3, a, tokenAlpha, id, "tool three")
	if killed.code != 200 {
		t.Fatalf("tool prompt: %d %s", killed.code, killed.body)
	}
	select {
	case <-model.hung:
	case <-time.After(time.Minute):
		t.Fatal("the tool turn never reached its second step")
	}
	// Kill A the moment its client sees the second step stream: what it
	// saw must be stored.
	var killedEvents []map[string]any
	for streaming := false; !streaming; {
		select {
		case e, ok := <-killed.events:
			if !ok {
				t.Fatal("the tool turn's stream ended before its second step streamed")
			}
			killedEvents = append(killedEvents, e)
			if d, _ := e["data"].(map[string]any); e["type"] == session.TypeAssistantChunk && d["step"] == 2.0 {
				streaming = true
			}
		case <-time.After(time.Minute):
			t.Fatal("the second step never streamed")
		}
	}
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.cmd.Wait()
	killedEvents = append(killedEvents, killed.finish(t)...)

	// B takes over once A's lease expires.
	deadline := time.Now().Add(30 * time.Second)
	var evs []map[string]any
	for {
		ts := promptTurn(t, ctx, b, tokenAlpha, id, "quick four")
		if ts.code == 200 {
			evs = ts.finish(t)
			break
		}
		if ts.code != http.StatusConflict || time.Now().After(deadline) {
			t.Fatalf("prompt on B after A died: %d %s", ts.code, ts.body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if k := endKind(t, evs); k != session.EndCompleted {
		t.Fatalf("turn 4 on B ended %s", k)
	}

	jsonl := exported(t, cfgPath, env, id)
	_, history := apiReq(t, "GET", b.url+"/v1/sessions/"+id, tokenAlpha, "")
	if !bytes.Equal(jsonl, history) {
		t.Errorf("GET /v1/sessions/{id} differs from `session export`")
	}
	tl := readTurns(t, jsonl)
	if want := []string{session.EndCompleted, session.EndAborted, session.EndAborted, session.EndInterrupted, session.EndCompleted}; !slices.Equal(tl.ends, want) {
		t.Fatalf("turn ends %v, want %v\n%s", tl.ends, want, jsonl)
	}
	killedTurn := tl.types[3]
	for _, want := range []string{session.TypeUserMessage, session.TypeToolCall, session.TypeToolResult, session.TypeStepEnd} {
		if !slices.Contains(killedTurn, want) {
			t.Errorf("the killed turn lost its %s: %v", want, killedTurn)
		}
	}
	if !strings.Contains(string(jsonl), `"tool three"`) {
		t.Errorf("the killed turn's user message is gone")
	}
	// What the killed worker streamed is what the session holds.
	assertStreamedStored(t, killedEvents, jsonl)
}

// Without a store section, serve keeps sessions in JSONL files, and its
// concurrent-turn limits answer 429.
func TestServeJSONLAndLimits(t *testing.T) {
	model := &scriptedModel{hung: make(chan string, 4)}
	ms := httptest.NewServer(model)
	defer ms.Close()
	cfgPath, env := serveSetup(t, ms.URL, false, "  max_turns: 2\n  max_tenant_turns: 1\n")
	w := startWorker(t, cfgPath, env)
	ctx := context.Background()
	if code, body := apiReq(t, "GET", w.url+"/readyz", "", ""); code != 200 {
		t.Fatalf("readyz: %d %s", code, body)
	}
	s1 := createSession(t, w, tokenAlpha, "")
	s2 := createSession(t, w, tokenAlpha, "x")
	s3 := createSession(t, w, tokenBeta, "y")
	if code, body := apiReq(t, "POST", w.url+"/v1/sessions", tokenAlpha, `{"cwd":"../beta"}`); code != http.StatusBadRequest {
		t.Errorf("cwd outside the tenant's root: %d %s, want 400", code, body)
	}
	if code, body := apiReq(t, "POST", w.url+"/v1/sessions", tokenAlpha, `{"cwd":"/etc"}`); code != http.StatusBadRequest {
		t.Errorf("absolute cwd: %d %s, want 400", code, body)
	}

	slowCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	slow := promptTurn(t, slowCtx, w, tokenAlpha, s1.ID, "slow")
	if slow.code != 200 {
		t.Fatalf("slow: %d %s", slow.code, slow.body)
	}
	<-model.hung
	if ts := promptTurn(t, ctx, w, tokenAlpha, s2.ID, "quick"); ts.code != http.StatusTooManyRequests {
		t.Fatalf("alpha's second turn: %d %s, want 429 (max_tenant_turns 1)", ts.code, ts.body)
	}
	// Beta has room of its own.
	if ts := promptTurn(t, ctx, w, tokenBeta, s3.ID, "quick"); ts.code != 200 || endKind(t, ts.finish(t)) != session.EndCompleted {
		t.Fatalf("beta's turn: %d %s", ts.code, ts.body)
	}
	if code, _ := apiReq(t, "POST", w.url+"/v1/sessions/"+s1.ID+"/cancel", tokenAlpha, ""); code != http.StatusAccepted {
		t.Fatalf("cancel: %d", code)
	}
	if k := endKind(t, slow.finish(t)); k != session.EndAborted {
		t.Fatalf("cancelled turn ended %s", k)
	}
	if ts := promptTurn(t, ctx, w, tokenAlpha, s2.ID, "quick"); ts.code != 200 || endKind(t, ts.finish(t)) != session.EndCompleted {
		t.Fatalf("alpha's turn after the first ended: %d %s", ts.code, ts.body)
	}
	// The session file is what export prints.
	jsonl := exported(t, cfgPath, env, s2.ID)
	if tl := readTurns(t, jsonl); !slices.Equal(tl.ends, []string{session.EndCompleted}) {
		t.Fatalf("turns %v", tl.ends)
	}
	code, metrics := apiReq(t, "GET", w.url+"/metrics", "", "")
	for _, want := range []string{`dsh_turns_total{kind="completed"} 2`, `dsh_turns_total{kind="aborted"} 1`, "dsh_turns_refused_total 1", "dsh_plugin_instances_live"} {
		if code != 200 || !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %q:\n%s", want, metrics)
		}
	}
}

// 200 sessions each run a turn at once across two workers sharing
// PostgreSQL. Every turn completes, and every session's log is gapless.
// It reports turns per second and the p99 latency of a turn, which with
// a model that answers at once is the runtime's overhead.
func TestServeLoad(t *testing.T) {
	const sessions = 200
	ms := httptest.NewServer(&scriptedModel{hung: make(chan string, 1)})
	defer ms.Close()
	cfgPath, env := serveSetup(t, ms.URL, true, "  max_turns: 200\n  max_tenant_turns: 200\n")
	ws := []*worker{startWorker(t, cfgPath, env), startWorker(t, cfgPath, env)}
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = createSession(t, ws[i%2], tokenAlpha, fmt.Sprintf("s%d", i)).ID
	}
	ctx := context.Background()
	// The latency of a turn alone, as a baseline for the burst's.
	var alone []time.Duration
	for i := range 9 {
		id := createSession(t, ws[i%2], tokenAlpha, fmt.Sprintf("alone%d", i)).ID
		t0 := time.Now()
		ts := promptTurn(t, ctx, ws[i%2], tokenAlpha, id, "quick")
		if ts.code != 200 || endKind(t, ts.finish(t)) != session.EndCompleted {
			t.Fatalf("a turn alone: %d %s", ts.code, ts.body)
		}
		alone = append(alone, time.Since(t0))
	}
	slices.Sort(alone)
	lat := make([]time.Duration, sessions)
	errs := make(chan error, sessions)
	start := time.Now()
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			ts := promptTurn(t, ctx, ws[(i+1)%2], tokenAlpha, id, "quick")
			if ts.code != 200 {
				errs <- fmt.Errorf("session %d: %d %s", i, ts.code, ts.body)
				return
			}
			var last map[string]any
			for e := range ts.events {
				last = e
			}
			lat[i] = time.Since(t0)
			if last == nil || last["type"] != session.TypeTurnEnd {
				errs <- fmt.Errorf("session %d: stream ended with %v", i, last)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("%d concurrent turns on 2 workers in %s: %.1f turns/s; turn latency p50 %s, p99 %s; a turn alone: median %s (the model answers at once: latency is the runtime's overhead)",
		sessions, elapsed.Round(time.Millisecond), sessions/elapsed.Seconds(), lat[sessions/2].Round(time.Millisecond),
		lat[sessions*99/100].Round(time.Millisecond), alone[len(alone)/2].Round(time.Millisecond))
	for _, id := range ids {
		_, body := apiReq(t, "GET", ws[0].url+"/v1/sessions/"+id, tokenAlpha, "")
		if tl := readTurns(t, body); !slices.Equal(tl.ends, []string{session.EndCompleted}) {
			t.Fatalf("session %s: turns %v", id, tl.ends)
		}
	}
}
