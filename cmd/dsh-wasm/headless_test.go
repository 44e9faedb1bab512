package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/replay"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// fakeDeepSeek is a local server speaking DeepSeek's streaming chat
// completions: the Nth request gets the Nth scripted answer, as SSE.
type fakeDeepSeek struct {
	t       *testing.T
	answers [][]string // per request: the delta objects of its chunks
	mu      sync.Mutex
	got     []map[string]any
	auth    []string
}

func (f *fakeDeepSeek) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/chat/completions" || r.Method != http.MethodPost {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	var req map[string]any
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	n := len(f.got)
	f.got = append(f.got, req)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.mu.Unlock()
	if n >= len(f.answers) {
		http.Error(w, `{"error":{"message":"no more answers"}}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for i, d := range f.answers[n] {
		finish := "null"
		if i == len(f.answers[n])-1 {
			finish = d
			d = `{"content":null,"reasoning_content":null}`
		}
		fmt.Fprintf(w, "data: {\"id\":\"c%d\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"deepseek-v4-flash\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", n, d, finish)
	}
	fmt.Fprint(w, "data: {\"id\":\"u\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"deepseek-v4-flash\",\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":10,\"prompt_cache_hit_tokens\":60,\"prompt_cache_miss_tokens\":40}}\n\n")
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func reasoning(s string) string { return fmt.Sprintf(`{"content":null,"reasoning_content":%q}`, s) }
func content(s string) string   { return fmt.Sprintf(`{"content":%q,"reasoning_content":null}`, s) }
func toolCall(id, name, args string) string {
	return fmt.Sprintf(`{"content":null,"reasoning_content":null,"tool_calls":[{"index":0,"id":%q,"type":"function","function":{"name":%q,"arguments":%q}}]}`, id, name, args)
}

// A headless run against a local DeepSeek-shaped server, not a replay:
// the model runs bash (which fails with exit 3), then reads a file, then
// answers. The server sees the system prompt, the tools, the tool results
// (the exit-code marker included) and the reasoning sent back; standard
// output is exactly the answer.
func TestHeadlessRunAgainstLocalDeepSeek(t *testing.T) {
	needTool(t, "bwrap", "the example's bash grant runs commands in bubblewrap")
	fake := &fakeDeepSeek{t: t, answers: [][]string{
		{reasoning("I should look around first."), toolCall("call_1", "bash", `{"command":"echo probing; exit 3","description":"Probe"}`), `"tool_calls"`},
		{reasoning("The probe failed; read the notes."), toolCall("call_2", "read", `{"file_path":"notes.txt"}`), `"tool_calls"`},
		{reasoning("I have what I need."), content("The notes say: "), content("**ship it**."), `"stop"`},
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	cwd := t.TempDir()
	if err := os.WriteFile(filepath.Join(cwd, "notes.txt"), []byte("ship it\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("DEEPSEEK_API_KEY", "sk-test-123")

	code, out, errOut := runCLI(t, "", "run", "--config", exampleConfig("coding-agent"), "--cwd", cwd,
		"--base-url", srv.URL, "-p", "What do the notes say?")
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut)
	}
	if out != "The notes say: **ship it**.\n" {
		t.Errorf("stdout = %q", out)
	}
	if len(fake.got) != 3 {
		t.Fatalf("the server got %d requests, want 3", len(fake.got))
	}
	for i, a := range fake.auth {
		if a != "Bearer sk-test-123" {
			t.Errorf("request %d: Authorization %q", i+1, a)
		}
	}

	// The system prompt is the one `prompt` prints for this cwd.
	code, system, errOut := runCLI(t, "", "prompt", "--config", exampleConfig("coding-agent"), "--cwd", cwd)
	if code != 0 {
		t.Fatalf("prompt: exit %d: %s", code, errOut)
	}
	type message struct {
		Role             string `json:"role"`
		Content          any    `json:"content"`
		ReasoningContent string `json:"reasoning_content"`
		ToolCallID       string `json:"tool_call_id"`
	}
	var reqs []struct {
		Model    string    `json:"model"`
		Messages []message `json:"messages"`
		Tools    []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	b, _ := json.Marshal(fake.got)
	if err := json.Unmarshal(b, &reqs); err != nil {
		t.Fatal(err)
	}
	for i, r := range reqs {
		if r.Model != "deepseek-v4-flash" {
			t.Errorf("request %d: model %q", i+1, r.Model)
		}
		if len(r.Messages) == 0 || r.Messages[0].Role != "system" || r.Messages[0].Content != system {
			t.Errorf("request %d: first message is not the system prompt", i+1)
		}
		var names []string
		for _, tl := range r.Tools {
			names = append(names, tl.Function.Name)
		}
		// With the model's key set, the example's web plugin offers
		// web_search too (DeepSeek's search, the same key).
		if got := strings.Join(names, ","); got != "read,write,edit,bash,bash_output,bash_kill,todo_write,web_search,web_fetch,subagent,subagent_fork" {
			t.Errorf("request %d: tools %s", i+1, got)
		}
	}
	last := reqs[2].Messages
	var toolResults, reasons []string
	for _, m := range last {
		switch m.Role {
		case "tool":
			s, _ := m.Content.(string)
			toolResults = append(toolResults, m.ToolCallID+"="+s)
		case "assistant":
			reasons = append(reasons, m.ReasoningContent)
		}
	}
	if len(toolResults) != 2 || !strings.HasPrefix(toolResults[0], "call_1=probing\n") ||
		!strings.Contains(toolResults[0], "[exit code: 3]") {
		t.Errorf("bash result sent back = %q, want its output and the exit-code marker", toolResults)
	}
	if len(toolResults) == 2 && (!strings.HasPrefix(toolResults[1], "call_2=") || !strings.Contains(toolResults[1], "1: ship it")) {
		t.Errorf("read result sent back = %q", toolResults[1])
	}
	if strings.Join(reasons, "|") != "I should look around first.|The probe failed; read the notes." {
		t.Errorf("reasoning sent back = %q, want each tool turn's reasoning", reasons)
	}
}

// writeReplay writes a recording whose model calls are answered by
// entries (an override beside a header-only session file), and returns
// the session file's path.
func writeReplay(t *testing.T, entries ...replay.Entry) string {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "session.jsonl")
	if err := os.WriteFile(file, []byte(`{"type":"session","version":0,"id":"rec","createdAt":0}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, replay.OverrideFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// --json prints the session's own events, one per line, in the session
// file's format, starting with the header; a turn that ends in error
// exits 1 with the reason on stderr.
func TestHeadlessJSONAndErrorTurn(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	cwd := t.TempDir()
	rec := writeReplay(t,
		replay.Entry{Kind: replay.KindChunks, Chunks: scripted.Answer{Reasoning: "Easy.", Text: "Hello there."}.Chunks()})
	code, out, errOut := runCLI(t, "", "run", "--config", exampleConfig("coding-agent"), "--cwd", cwd,
		"--replay", rec, "-p", "hi", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "the model is a replay of "+rec) {
		t.Errorf("stderr does not say the model is a replay: %q", errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var h session.Header
	if err := json.Unmarshal([]byte(lines[0]), &h); err != nil || h.ID == "" || h.Cwd != cwd {
		t.Fatalf("first line %q is not the session header (%v)", lines[0], err)
	}
	var types []string
	for i, l := range lines[1:] {
		var e session.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line %d: %v", i+2, err)
		}
		if e.Seq != int64(i) {
			t.Errorf("line %d: seq %d, want %d", i+2, e.Seq, i)
		}
		types = append(types, e.Type)
	}
	if types[0] != session.TypeTurnStart || types[len(types)-1] != session.TypeTurnEnd || !slices.Contains(types, session.TypeAssistantMessage) {
		t.Errorf("event types = %v", types)
	}
	// The session persisted: resume it for a turn whose model fails. (A
	// replay answers each session's calls from its start.)
	failing := writeReplay(t, replay.Entry{Kind: replay.KindThrow, Message: "upstream exploded", Code: "SERVER", Status: 500,
		Chunks: scripted.Answer{Text: "half"}.Chunks()[:2]})
	code, out, errOut = runCLI(t, "", "run", "--config", exampleConfig("coding-agent"), "--resume", h.ID,
		"--replay", failing, "-p", "again")
	if code != 1 {
		t.Fatalf("error turn: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if !strings.Contains(errOut, "turn 2 ended error") || !strings.Contains(errOut, "upstream exploded") {
		t.Errorf("stderr = %q, want the turn's end and cause", errOut)
	}
}

// Without a key, a live run fails naming the variable; prompt and tools
// need none.
func TestLiveRunWithoutKeyNamesTheVariable(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("DEEPSEEK_API_KEY", "")
	code, _, errOut := runCLI(t, "", "run", "--config", exampleConfig("coding-agent"), "--cwd", t.TempDir(), "-p", "hi")
	if code != 1 || !strings.Contains(errOut, "$DEEPSEEK_API_KEY is not set") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}
