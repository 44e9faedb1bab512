package deepseek

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
)

const testKey = "sk-test-123"

// chunkJSON renders a DeepSeek chat.completion.chunk with one choice.
func chunkJSON(delta string, finish string) string {
	fr := "null"
	if finish != "" {
		fr = fmt.Sprintf("%q", finish)
	}
	return fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"deepseek-chat",`+
		`"system_fingerprint":"fp","choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}],"usage":null}`,
		delta, fr)
}

func reasoningDelta(s string) string {
	return chunkJSON(fmt.Sprintf(`{"content":null,"reasoning_content":%q}`, s), "")
}
func contentDelta(s string) string {
	return chunkJSON(fmt.Sprintf(`{"content":%q,"reasoning_content":null}`, s), "")
}

const roleDelta = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"deepseek-chat","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning_content":null},"logprobs":null,"finish_reason":null}]}`

const usageChunk = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"deepseek-chat","choices":[],` +
	`"usage":{"prompt_tokens":890,"completion_tokens":95,"total_tokens":985,"prompt_tokens_details":{"cached_tokens":768},` +
	`"completion_tokens_details":{"reasoning_tokens":23},"prompt_cache_hit_tokens":768,"prompt_cache_miss_tokens":122}}`

var wantUsage = model.Usage{InputTokens: 122, OutputTokens: 95, CacheReadTokens: 768, ReasoningTokens: 23}

// writeSSE writes each payload as one event and flushes.
func writeSSE(w http.ResponseWriter, payloads ...string) {
	for _, p := range payloads {
		fmt.Fprintf(w, "data: %s\n\n", p)
	}
	w.(http.Flusher).Flush()
}

func startSSE(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
}

// fakeSleep records the delays instead of waiting.
type fakeSleep struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (f *fakeSleep) sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delays = append(f.delays, d)
	return ctx.Err()
}

func (f *fakeSleep) got() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.delays...)
}

// server runs handler for each request, counting them and checking the
// request line and the bearer key.
type server struct {
	*httptest.Server
	calls atomic.Int32
}

func newServer(t *testing.T, handler func(w http.ResponseWriter, r *http.Request, call int)) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call := int(s.calls.Add(1))
		// Read the whole body first: only then does the server notice a
		// client that goes away, which blocking handlers rely on.
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading request body: %v", err)
		}
		r.Body = io.NopCloser(bytes.NewReader(raw))
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			t.Errorf("request %s %s, want POST /v1/chat/completions", r.Method, r.URL.Path)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+testKey {
			t.Errorf("Authorization = %q", got)
		}
		if got := r.Header.Get("Content-Type"); got != "application/json" {
			t.Errorf("Content-Type = %q", got)
		}
		handler(w, r, call)
	}))
	t.Cleanup(s.Close)
	return s
}

func newProvider(t *testing.T, s *server, sleep *fakeSleep, mutate ...func(*Options)) *Provider {
	t.Helper()
	opts := Options{
		BaseURL:   s.URL + "/v1",
		APIKeyEnv: "TEST_DEEPSEEK_KEY",
		LookupEnv: func(name string) (string, bool) {
			if name == "TEST_DEEPSEEK_KEY" {
				return testKey, true
			}
			return "", false
		},
		HTTPClient: s.Client(),
	}
	if sleep != nil {
		opts.Sleep = sleep.sleep
	}
	for _, m := range mutate {
		m(&opts)
	}
	p, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

func simpleRequest() *model.Request {
	return &model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: []model.Part{{Type: model.BlockText, Text: "hi"}}}}}
}

// collect runs Generate and returns the chunks, checking each one against
// an Accumulator.
func collect(t *testing.T, ctx context.Context, p *Provider, req *model.Request) ([]model.Chunk, *model.Accumulator, error) {
	t.Helper()
	var chunks []model.Chunk
	acc := &model.Accumulator{}
	err := p.Generate(ctx, req, func(c model.Chunk) error {
		chunks = append(chunks, c)
		if err := acc.Add(c); err != nil {
			t.Errorf("provider emitted an invalid chunk: %v", err)
		}
		return nil
	})
	return chunks, acc, err
}

func TestReasoningThenText(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {
		startSSE(w)
		writeSSE(w, roleDelta, reasoningDelta("The user"), reasoningDelta(" wants PONG."))
		fmt.Fprint(w, ": keep-alive\n\n")
		writeSSE(w, contentDelta("P"), contentDelta("ONG"),
			chunkJSON(`{"content":"","reasoning_content":null}`, "stop"), usageChunk, "[DONE]")
	})
	p := newProvider(t, s, nil)
	chunks, acc, err := collect(t, context.Background(), p, simpleRequest())
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	reasoning := model.Part{Type: model.BlockReasoning, Text: "The user wants PONG."}
	text := model.Part{Type: model.BlockText, Text: "PONG"}
	want := []model.Chunk{
		{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockReasoning},
		{Type: model.ChunkReasoningDelta, Index: 0, Text: "The user"},
		{Type: model.ChunkReasoningDelta, Index: 0, Text: " wants PONG."},
		{Type: model.ChunkBlockStart, Index: 1, BlockType: model.BlockText},
		{Type: model.ChunkTextDelta, Index: 1, Text: "P"},
		{Type: model.ChunkTextDelta, Index: 1, Text: "ONG"},
		{Type: model.ChunkBlockEnd, Index: 0, Block: &reasoning},
		{Type: model.ChunkBlockEnd, Index: 1, Block: &text},
		{Type: model.ChunkUsage, Usage: &wantUsage},
		{Type: model.ChunkFinish, Reason: &model.FinishReason{Kind: model.FinishStop}},
	}
	if !reflect.DeepEqual(chunks, want) {
		t.Fatalf("chunks:\n got %s\nwant %s", dump(chunks), dump(want))
	}
	if err := acc.Complete(); err != nil {
		t.Fatalf("accumulated stream incomplete: %v", err)
	}
}

func dump(chunks []model.Chunk) string {
	b, _ := json.Marshal(chunks)
	return string(b)
}

func TestParallelToolCallsWithSplitArguments(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {
		startSSE(w)
		tc := func(calls string) string {
			return chunkJSON(`{"content":null,"reasoning_content":null,"tool_calls":`+calls+`}`, "")
		}
		writeSSE(w, roleDelta, reasoningDelta("two calls"),
			tc(`[{"index":0,"id":"call_00_a","type":"function","function":{"name":"bash","arguments":""}}]`),
			tc(`[{"index":0,"function":{"arguments":"{\"command\": "}}]`),
			tc(`[{"index":1,"id":"call_01_b","type":"function","function":{"name":"read","arguments":"{\"file_path\""}}]`),
			tc(`[{"index":0,"function":{"arguments":"\"ls\"}"}}]`),
			tc(`[{"index":1,"function":{"arguments":": \"a.txt\"}"}}]`),
			chunkJSON(`{"content":null,"reasoning_content":null}`, "tool_calls"),
			usageChunk, "[DONE]")
	})
	p := newProvider(t, s, nil)
	chunks, acc, err := collect(t, context.Background(), p, simpleRequest())
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if err := acc.Complete(); err != nil {
		t.Fatalf("stream incomplete: %v", err)
	}
	wantCalls := []model.Part{
		{Type: model.BlockToolCall, ID: "call_00_a", Name: "bash", Arguments: `{"command": "ls"}`},
		{Type: model.BlockToolCall, ID: "call_01_b", Name: "read", Arguments: `{"file_path": "a.txt"}`},
	}
	if got := acc.ToolCalls(); !reflect.DeepEqual(got, wantCalls) {
		t.Fatalf("tool calls = %+v", got)
	}
	if parts := acc.Parts(); len(parts) != 3 || parts[0].Type != model.BlockReasoning {
		t.Fatalf("parts = %+v, want reasoning then two calls", parts)
	}
	// Every fragment is a delta repeating its call's id and name, as the
	// reference writes them (llm-deepseek/src/translate.ts).
	var named []string
	for _, c := range chunks {
		if c.Type == model.ChunkToolCallDelta {
			named = append(named, fmt.Sprintf("%d:%s:%s:%s", c.Index, c.ID, c.Name, c.ArgumentsDelta))
		}
	}
	if want := []string{"1:call_00_a:bash:", `1:call_00_a:bash:{"command": `, `2:call_01_b:read:{"file_path"`,
		`1:call_00_a:bash:"ls"}`, `2:call_01_b:read:: "a.txt"}`}; !reflect.DeepEqual(named, want) {
		t.Fatalf("named deltas = %v, want %v", named, want)
	}
	if u, _ := acc.Usage(); u != wantUsage {
		t.Fatalf("usage = %+v, want %+v", u, wantUsage)
	}
	if r, _ := acc.FinishReason(); r.Kind != model.FinishToolCalls {
		t.Fatalf("finish = %+v", r)
	}
}

func TestRequestBody(t *testing.T) {
	var body map[string]any
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Errorf("request body is not JSON: %v", err)
		}
		startSSE(w)
		writeSSE(w, contentDelta("ok"), chunkJSON(`{"content":""}`, "stop"), "[DONE]")
	})
	p := newProvider(t, s, nil, func(c *Options) {
		c.Model = "deepseek-v4-flash"
		c.Thinking = ThinkingEnabled
		c.ReasoningEffort = "high"
	})
	schema := json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)
	req := &model.Request{
		System: "You are a test.",
		Messages: []model.Message{
			{Role: model.RoleUser, Content: []model.Part{{Type: model.BlockText, Text: "hi"}}},
			{Role: model.RoleAssistant, Content: []model.Part{
				{Type: model.BlockReasoning, Text: "no tools in this turn: not sent back"},
				{Type: model.BlockText, Text: "Hello."},
			}},
			{Role: model.RoleUser, Content: []model.Part{{Type: model.BlockText, Text: "first"}, {Type: model.BlockText, Text: "second"}}},
			{Role: model.RoleAssistant, Content: []model.Part{
				{Type: model.BlockReasoning, Text: "I should run ls."},
				{Type: model.BlockText, Text: "Running."},
				{Type: model.BlockToolCall, ID: "call_1", Name: "bash", Arguments: `{"command":"ls"}`},
			}},
			{Role: model.RoleTool, ToolCallID: "call_1", Content: []model.Part{{Type: model.BlockText, Text: "a.txt"}}},
			{Role: model.RoleAssistant, Content: []model.Part{
				{Type: model.BlockReasoning, Text: "a tool turn: sent back too"},
				{Type: model.BlockText, Text: "Done."},
			}},
			{Role: model.RoleUser, Content: []model.Part{{Type: model.BlockText, Text: "more"}}},
			{Role: model.RoleAssistant, Content: []model.Part{
				{Type: model.BlockToolCall, ID: "call_2", Name: "bash", Arguments: `{"command":"pwd"}`},
			}},
			{Role: model.RoleTool, ToolCallID: "call_2", Content: []model.Part{{Type: model.BlockText, Text: ""}}},
			{Role: model.RoleUser, Content: []model.Part{{Type: model.BlockText, Text: "again"}}},
		},
		Tools: []prompt.Tool{
			{Name: "bash", Description: "Run a command", Parameters: schema},
			{Name: "noargs"},
		},
		MaxTokens:   1000,
		Temperature: new(0.25),
		Stop:        []string{"END", "STOP"},
	}
	if _, _, err := collect(t, context.Background(), p, req); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	want := map[string]any{
		"model":            "deepseek-v4-flash",
		"stream":           true,
		"stream_options":   map[string]any{"include_usage": true},
		"thinking":         map[string]any{"type": "enabled"},
		"reasoning_effort": "high",
		"max_tokens":       float64(1000),
		"temperature":      0.25,
		"stop":             []any{"END", "STOP"},
		"messages": []any{
			map[string]any{"role": "system", "content": "You are a test."},
			map[string]any{"role": "user", "content": "hi"},
			map[string]any{"role": "assistant", "content": "Hello."},
			map[string]any{"role": "user", "content": "firstsecond"}, // joined with "", as the reference does
			map[string]any{"role": "assistant", "content": "Running.", "reasoning_content": "I should run ls.",
				"tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
					"function": map[string]any{"name": "bash", "arguments": `{"command":"ls"}`}}}},
			map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
			map[string]any{"role": "assistant", "content": "Done.", "reasoning_content": "a tool turn: sent back too"},
			map[string]any{"role": "user", "content": "more"},
			map[string]any{"role": "assistant", "content": "", "reasoning_content": "",
				"tool_calls": []any{map[string]any{"id": "call_2", "type": "function",
					"function": map[string]any{"name": "bash", "arguments": `{"command":"pwd"}`}}}},
			map[string]any{"role": "tool", "tool_call_id": "call_2", "content": "(no output)"},
			map[string]any{"role": "user", "content": "again"},
		},
		"tools": []any{
			map[string]any{"type": "function", "function": map[string]any{"name": "bash", "description": "Run a command",
				"parameters": map[string]any{"type": "object", "required": []any{"command"},
					"properties": map[string]any{"command": map[string]any{"type": "string"}}}}},
			map[string]any{"type": "function", "function": map[string]any{"name": "noargs", "description": "",
				"parameters": map[string]any{"type": "object", "properties": map[string]any{}}}},
		},
	}
	if !reflect.DeepEqual(body, want) {
		got, _ := json.MarshalIndent(body, "", " ")
		exp, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("request body:\n%s\nwant:\n%s", got, exp)
	}
}

func TestRequestDefaultsAndRejects(t *testing.T) {
	var body map[string]any
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, &body)
		startSSE(w)
		writeSSE(w, chunkJSON(`{"content":""}`, "stop"), "[DONE]")
	})
	p := newProvider(t, s, nil)
	if _, _, err := collect(t, context.Background(), p, simpleRequest()); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if body["model"] != DefaultModel {
		t.Errorf("model = %v, want the default %q", body["model"], DefaultModel)
	}
	for _, absent := range []string{"thinking", "reasoning_effort", "max_tokens", "tools"} {
		if _, ok := body[absent]; ok {
			t.Errorf("%s sent though unset", absent)
		}
	}

	bad := []*model.Request{
		{Messages: []model.Message{{Role: "robot"}}},
		{Messages: []model.Message{{Role: model.RoleUser, Content: []model.Part{{Type: model.BlockToolCall, ID: "x", Name: "y"}}}}},
		{Messages: []model.Message{{Role: model.RoleTool, Content: []model.Part{{Type: model.BlockText, Text: "no id"}}}}},
		{Messages: []model.Message{{Role: model.RoleAssistant, Content: []model.Part{{Type: model.BlockToolCall, Name: "bash"}}}}},
		{Tools: []prompt.Tool{{Name: "bad", Parameters: json.RawMessage(`{"type":`)}}},
		{Tools: []prompt.Tool{{Description: "no name"}}},
	}
	calls := s.calls.Load()
	for i, req := range bad {
		if err := p.Generate(context.Background(), req, func(model.Chunk) error { return nil }); err == nil {
			t.Errorf("bad request %d accepted", i)
		}
	}
	if s.calls.Load() != calls {
		t.Error("a bad request reached the server")
	}
}

func TestRetryAfter429(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {
		if call == 1 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":{"message":"Rate limit reached","type":"rate_limit_error","code":"rate_limit"}}`)
			return
		}
		startSSE(w)
		writeSSE(w, contentDelta("ok"), chunkJSON(`{"content":""}`, "stop"), "[DONE]")
	})
	sleep := &fakeSleep{}
	p := newProvider(t, s, sleep)
	_, acc, err := collect(t, context.Background(), p, simpleRequest())
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if got := sleep.got(); !reflect.DeepEqual(got, []time.Duration{2 * time.Second}) {
		t.Fatalf("slept %v, want the Retry-After of 2s", got)
	}
	if s.calls.Load() != 2 || acc.Parts()[0].Text != "ok" {
		t.Fatalf("calls = %d, parts = %+v", s.calls.Load(), acc.Parts())
	}
}

func TestRetryAfterHTTPDate(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {
		if call == 1 {
			w.Header().Set("Retry-After", now.Add(7*time.Second).Format(http.TimeFormat))
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		startSSE(w)
		writeSSE(w, chunkJSON(`{"content":""}`, "stop"), "[DONE]")
	})
	sleep := &fakeSleep{}
	p := newProvider(t, s, sleep, func(c *Options) { c.Now = func() time.Time { return now } })
	if _, _, err := collect(t, context.Background(), p, simpleRequest()); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if got := sleep.got(); !reflect.DeepEqual(got, []time.Duration{7 * time.Second}) {
		t.Fatalf("slept %v, want 7s", got)
	}
}

func TestRetryAfterBeyondLimitGivesUp(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	sleep := &fakeSleep{}
	p := newProvider(t, s, sleep)
	_, _, err := collect(t, context.Background(), p, simpleRequest())
	var apiErr *model.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusTooManyRequests {
		t.Fatalf("err = %v, want a 429 APIError", err)
	}
	if s.calls.Load() != 1 || len(sleep.got()) != 0 {
		t.Fatalf("calls = %d, sleeps = %v: a Retry-After of an hour must not be waited for", s.calls.Load(), sleep.got())
	}
}

func TestServerErrorsRetriedWithBackoff(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {
		if call <= 2 {
			http.Error(w, "upstream overloaded", http.StatusBadGateway)
			return
		}
		startSSE(w)
		writeSSE(w, chunkJSON(`{"content":"x"}`, "stop"), "[DONE]")
	})
	sleep := &fakeSleep{}
	base := 100 * time.Millisecond
	p := newProvider(t, s, sleep, func(c *Options) { c.RetryBaseDelay = base })
	if _, _, err := collect(t, context.Background(), p, simpleRequest()); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	got := sleep.got()
	if len(got) != 2 {
		t.Fatalf("slept %v, want two backoffs", got)
	}
	for i, d := range got {
		hi := base << i
		if d < hi/2 || d > hi {
			t.Errorf("backoff %d = %s, want within [%s, %s]", i+1, d, hi/2, hi)
		}
	}
}

func TestRetriesExhausted(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"error":{"message":"Internal error","type":"server_error","code":500}}`)
	})
	sleep := &fakeSleep{}
	p := newProvider(t, s, sleep, func(c *Options) { c.MaxRetries = 2 })
	_, _, err := collect(t, context.Background(), p, simpleRequest())
	var apiErr *model.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v, want an APIError", err)
	}
	if apiErr.Status != 500 || apiErr.Message != "Internal error" || apiErr.Code != "500" {
		t.Fatalf("APIError = %+v", apiErr)
	}
	if !strings.Contains(err.Error(), "after 3 attempts") || s.calls.Load() != 3 {
		t.Fatalf("err = %v after %d calls, want 3 attempts", err, s.calls.Load())
	}
}

func TestClientErrorNotRetried(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":{"message":"Authentication Fails (no such user)","type":"authentication_error","param":null,"code":"invalid_request_error"}}`)
	})
	sleep := &fakeSleep{}
	p := newProvider(t, s, sleep)
	_, _, err := collect(t, context.Background(), p, simpleRequest())
	var apiErr *model.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v, want an APIError", err)
	}
	want := model.APIError{Status: 401, Code: "invalid_request_error", Message: "Authentication Fails (no such user)"}
	if *apiErr != want || s.calls.Load() != 1 || len(sleep.got()) != 0 {
		t.Fatalf("APIError = %+v after %d calls", apiErr, s.calls.Load())
	}
}

func TestConnectionFailureBeforeFirstByteRetried(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {
		switch call {
		case 1: // drop the connection without an answer
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			conn.Close()
		case 2: // headers, then an empty body
			startSSE(w)
		default:
			startSSE(w)
			writeSSE(w, chunkJSON(`{"content":"x"}`, "stop"), "[DONE]")
		}
	})
	sleep := &fakeSleep{}
	p := newProvider(t, s, sleep)
	if _, _, err := collect(t, context.Background(), p, simpleRequest()); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if s.calls.Load() != 3 || len(sleep.got()) != 2 {
		t.Fatalf("calls = %d, sleeps = %v, want 3 calls", s.calls.Load(), sleep.got())
	}
}

func TestCutStreamNotRetried(t *testing.T) {
	tests := map[string]func(w http.ResponseWriter){
		"eof without done": func(w http.ResponseWriter) {
			writeSSE(w, reasoningDelta("thinking"), contentDelta("par"))
		},
		"eof inside an event": func(w http.ResponseWriter) {
			writeSSE(w, contentDelta("par"))
			fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{"content":"ti`)
		},
		"connection dropped": func(w http.ResponseWriter) {
			writeSSE(w, contentDelta("par"))
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err == nil {
				buf.WriteString("7\r\ndata: {") // a chunk of the chunked body, then gone
				buf.Flush()
				conn.Close()
			}
		},
	}
	for name, write := range tests {
		t.Run(name, func(t *testing.T) {
			s := newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {
				startSSE(w)
				write(w)
			})
			sleep := &fakeSleep{}
			p := newProvider(t, s, sleep)
			_, acc, err := collect(t, context.Background(), p, simpleRequest())
			if !errors.Is(err, model.ErrStreamCut) {
				t.Fatalf("err = %v, want ErrStreamCut", err)
			}
			if s.calls.Load() != 1 {
				t.Fatalf("%d calls: a stream that began must not be retried", s.calls.Load())
			}
			if text := acc.Parts(); len(text) == 0 || !strings.HasPrefix(text[len(text)-1].Text, "par") {
				t.Fatalf("partial content lost: %+v", text)
			}
		})
	}
}

// [DONE] with no finish_reason before it is a whole answer that stopped,
// as the reference reads it (llm-deepseek/src/translate.ts: pendingFinish
// ?? {kind: 'stop'}).
func TestDoneWithoutFinishIsStop(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {
		startSSE(w)
		writeSSE(w, contentDelta("par"), "[DONE]")
	})
	p := newProvider(t, s, nil)
	chunks, acc, err := collect(t, context.Background(), p, simpleRequest())
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if r, _ := acc.FinishReason(); r != (model.FinishReason{Kind: model.FinishStop}) {
		t.Fatalf("finish = %+v, want stop", r)
	}
	if last := chunks[len(chunks)-1]; last.Type != model.ChunkFinish {
		t.Fatalf("last chunk = %+v", last)
	}
}

func TestFinishedStreamWithoutDone(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {
		startSSE(w)
		writeSSE(w, contentDelta("ok"), chunkJSON(`{"content":""}`, "length"), usageChunk)
	})
	p := newProvider(t, s, nil)
	_, acc, err := collect(t, context.Background(), p, simpleRequest())
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if r, _ := acc.FinishReason(); r.Kind != model.FinishMaxTokens {
		t.Fatalf("finish = %+v", r)
	}
}

func TestMalformedJSON(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {
		startSSE(w)
		writeSSE(w, contentDelta("a"), `{"choices":[{"index":0,"delta":{"content":"b"}}`, contentDelta("c"))
	})
	p := newProvider(t, s, nil)
	_, _, err := collect(t, context.Background(), p, simpleRequest())
	if !errors.Is(err, model.ErrMalformedStream) {
		t.Fatalf("err = %v, want ErrMalformedStream", err)
	}
	if !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), `"content\":\"b\"`) {
		t.Fatalf("error %q does not name the line and its text", err)
	}
}

func TestMalformedToolCall(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {
		startSSE(w)
		writeSSE(w, chunkJSON(`{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}`, ""))
	})
	p := newProvider(t, s, nil)
	_, _, err := collect(t, context.Background(), p, simpleRequest())
	if !errors.Is(err, model.ErrMalformedStream) || !strings.Contains(err.Error(), "lacks its id or name") {
		t.Fatalf("err = %v, want ErrMalformedStream about the missing id", err)
	}
}

func TestErrorEventInStream(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {
		startSSE(w)
		writeSSE(w, contentDelta("a"), `{"error":{"message":"server busy","type":"server_error","code":"overloaded"}}`)
	})
	p := newProvider(t, s, &fakeSleep{})
	_, _, err := collect(t, context.Background(), p, simpleRequest())
	var apiErr *model.APIError
	if !errors.As(err, &apiErr) || apiErr.Message != "server busy" || apiErr.Code != "overloaded" {
		t.Fatalf("err = %v, want the stream's APIError", err)
	}
	if s.calls.Load() != 1 {
		t.Fatal("an error after the stream began was retried")
	}
}

func TestEmitErrorIsReturned(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {
		startSSE(w)
		writeSSE(w, contentDelta("a"), contentDelta("b"), chunkJSON(`{}`, "stop"), "[DONE]")
	})
	p := newProvider(t, s, nil)
	stop := errors.New("consumer stops")
	n := 0
	err := p.Generate(context.Background(), simpleRequest(), func(model.Chunk) error {
		n++
		if n == 2 {
			return stop
		}
		return nil
	})
	if err != stop || n != 2 {
		t.Fatalf("Generate = %v after %d chunks, want the emit error after 2", err, n)
	}
}

func TestFinishReasons(t *testing.T) {
	for raw, want := range map[string]model.FinishReason{
		"stop":                         {Kind: model.FinishStop},
		"tool_calls":                   {Kind: model.FinishToolCalls},
		"length":                       {Kind: model.FinishMaxTokens},
		"content_filter":               {Kind: model.FinishError, Message: "model stopped: content_filter", Code: "CONTENT_FILTER"},
		"insufficient_system_resource": {Kind: model.FinishError, Message: "model stopped: insufficient_system_resource", Code: "INSUFFICIENT_SYSTEM_RESOURCE"},
		"function_call":                {Kind: model.FinishError, Message: "model stopped: function_call", Code: "FUNCTION_CALL"},
	} {
		if got := *finishReason(raw); got != want {
			t.Errorf("finishReason(%q) = %+v, want %+v", raw, got, want)
		}
	}
}

func TestUsageFallsBackToOpenAIFields(t *testing.T) {
	var u usagePayload
	if err := json.Unmarshal([]byte(`{"prompt_tokens":100,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":60}}`), &u); err != nil {
		t.Fatal(err)
	}
	if got, want := *u.usage(), (model.Usage{InputTokens: 40, CacheReadTokens: 60, OutputTokens: 7}); got != want {
		t.Fatalf("usage = %+v, want %+v", got, want)
	}
}

func TestCancelWhileStreaming(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {
		startSSE(w)
		writeSSE(w, contentDelta("partial"))
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	p := newProvider(t, s, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- p.Generate(ctx, simpleRequest(), func(c model.Chunk) error {
			if c.Type == model.ChunkTextDelta {
				cancel()
			}
			return nil
		})
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Generate = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Generate did not return after cancellation")
	}
}

func TestCancelWhileWaitingToRetry(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	ctx, cancel := context.WithCancel(context.Background())
	p := newProvider(t, s, nil, func(c *Options) {
		c.Sleep = func(context.Context, time.Duration) error {
			cancel()
			return ctx.Err()
		}
	})
	if err := p.Generate(ctx, simpleRequest(), func(model.Chunk) error { return nil }); err != context.Canceled {
		t.Fatalf("Generate = %v, want context.Canceled", err)
	}
}

func TestTimeouts(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	t.Run("idle", func(t *testing.T) {
		s := newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {
			startSSE(w)
			writeSSE(w, contentDelta("a"))
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		p := newProvider(t, s, nil, func(c *Options) { c.IdleTimeout = 50 * time.Millisecond })
		_, _, err := collect(t, context.Background(), p, simpleRequest())
		if !errors.Is(err, model.ErrStreamCut) || !strings.Contains(err.Error(), "no data for 50ms") {
			t.Fatalf("err = %v, want an idle stream cut", err)
		}
	})
	t.Run("header", func(t *testing.T) {
		s := newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		p := newProvider(t, s, nil, func(c *Options) {
			c.HeaderTimeout = 50 * time.Millisecond
			c.MaxRetries = -1
		})
		_, _, err := collect(t, context.Background(), p, simpleRequest())
		if err == nil || !strings.Contains(err.Error(), "no response within 50ms") {
			t.Fatalf("err = %v, want a header timeout", err)
		}
	})
}

func TestNewValidatesOptions(t *testing.T) {
	env := func(string) (string, bool) { return "k", true }
	if _, err := New(Options{LookupEnv: func(string) (string, bool) { return "", false }}); !errors.Is(err, ErrNoAPIKey) ||
		!strings.Contains(err.Error(), DefaultAPIKeyEnv) {
		t.Errorf("missing key: %v", err)
	}
	for _, opts := range []Options{
		{BaseURL: "ftp://example.com", LookupEnv: env},
		{BaseURL: "https://", LookupEnv: env},
		{BaseURL: "https://x/?q=1", LookupEnv: env},
		{Thinking: "sometimes", LookupEnv: env},
		{IdleTimeout: -time.Second, LookupEnv: env},
	} {
		if _, err := New(opts); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("New(%+v) = %v, want ErrInvalidOptions", opts, err)
		}
	}
	p, err := New(Options{LookupEnv: env})
	if err != nil {
		t.Fatal(err)
	}
	if p.endpoint != "https://api.deepseek.com/chat/completions" || p.Model() != DefaultModel {
		t.Errorf("defaults: endpoint %q, model %q", p.endpoint, p.Model())
	}
	if p.client == http.DefaultClient {
		t.Error("the provider uses http.DefaultClient")
	}
}

func TestClientNotModified(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {
		startSSE(w)
		writeSSE(w, chunkJSON(`{}`, "stop"), "[DONE]")
	})
	client := s.Client()
	before := *client
	defaultBefore := *http.DefaultClient
	p := newProvider(t, s, nil, func(c *Options) { c.HTTPClient = client })
	if _, _, err := collect(t, context.Background(), p, simpleRequest()); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, *client) || !reflect.DeepEqual(defaultBefore, *http.DefaultClient) {
		t.Fatal("Generate modified an http.Client")
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"3", 3 * time.Second, true},
		{" 1.5 ", 1500 * time.Millisecond, true},
		{now.Add(time.Minute).Format(http.TimeFormat), time.Minute, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
		{"99999999999999999999", time.Duration(1<<63 - 1), true},
		{"", 0, false},
		{"-1", 0, false},
		{"NaN", 0, false},
		{"1.2.3", 0, false},
		{"soon", 0, false},
	} {
		got, ok := parseRetryAfter(tt.in, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseRetryAfter(%q) = %s, %v; want %s, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// A cancelled step leaves calls that never ran without a result, as the
// reference records it; the request shows the model only the calls that
// ran, since the API refuses a tool call without a response.
func TestUnansweredToolCallsDropped(t *testing.T) {
	p := newProvider(t, newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {}), nil)
	body, err := p.encodeRequest(&model.Request{Model: "m", Messages: []model.Message{
		{Role: model.RoleUser, Content: []model.Part{{Type: model.BlockText, Text: "go"}}},
		{Role: model.RoleAssistant, Content: []model.Part{
			{Type: model.BlockToolCall, ID: "a", Name: "bash", Arguments: `{}`},
			{Type: model.BlockToolCall, ID: "b", Name: "bash", Arguments: `{}`},
		}},
		{Role: model.RoleTool, ToolCallID: "a", Content: []model.Part{{Type: model.BlockText, Text: "ran"}}},
		{Role: model.RoleUser, Content: []model.Part{{Type: model.BlockText, Text: "next"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","messages":[{"role":"user","content":"go"},` +
		`{"role":"assistant","content":"","reasoning_content":"","tool_calls":[{"id":"a","type":"function","function":{"name":"bash","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"a","content":"ran"},{"role":"user","content":"next"}],"stream":true,"stream_options":{"include_usage":true}}`
	if string(body) != want {
		t.Fatalf("body:\n%s\nwant:\n%s", body, want)
	}
}

func TestAssistantWithOnlyUnansweredCallsDropped(t *testing.T) {
	p := newProvider(t, newServer(t, func(w http.ResponseWriter, r *http.Request, call int) {}), nil)
	body, err := p.encodeRequest(&model.Request{Model: "m", Messages: []model.Message{
		{Role: model.RoleUser, Content: []model.Part{{Type: model.BlockText, Text: "go"}}},
		{Role: model.RoleAssistant, Content: []model.Part{
			{Type: model.BlockReasoning, Text: "hm"},
			{Type: model.BlockToolCall, ID: "a", Name: "bash", Arguments: `{}`},
		}},
		{Role: model.RoleUser, Content: []model.Part{{Type: model.BlockText, Text: "next"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","messages":[{"role":"user","content":"go"},{"role":"user","content":"next"}],"stream":true,"stream_options":{"include_usage":true}}`
	if string(body) != want {
		t.Fatalf("body:\n%s\nwant:\n%s", body, want)
	}
}
