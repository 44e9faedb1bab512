package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/runtime/model"
)

// textAnswer is a finished answer consisting of one text block.
func textAnswer(text string) []model.Chunk {
	return []model.Chunk{
		{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockText},
		{Type: model.ChunkTextDelta, Index: 0, Text: text},
		{Type: model.ChunkBlockEnd, Index: 0, Block: &model.Part{Type: model.BlockText, Text: text}},
		{Type: model.ChunkUsage, Usage: &model.Usage{InputTokens: 3, OutputTokens: 1}},
		{Type: model.ChunkFinish, Reason: &model.FinishReason{Kind: model.FinishStop}},
	}
}

// sessionFile renders a session file: header fields, then steps given as
// (turn, step, text), with a user message event between steps.
func sessionFile(t *testing.T, header string, steps ...any) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"type":"session","version":0,` + header + "}\n")
	seq := 0
	for i := 0; i+2 < len(steps); i += 3 {
		turn, step, text := steps[i].(int), steps[i+1].(int), steps[i+2].(string)
		fmt.Fprintf(&b, `{"type":"user/message","seq":%d,"time":0,"data":{"content":[{"type":"text","text":"q"}]}}`+"\n", seq)
		seq++
		for _, c := range textAnswer(text) {
			ev := recordedEvent{Type: eventAssistantChunk, Seq: seq, Data: chunkEventJSON{Turn: turn, Step: step, Chunk: c}}
			line, err := jsonLine(ev)
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(line)
			seq++
		}
	}
	return b.String()
}

func jsonLine(v any) (string, error) {
	var buf bytes.Buffer
	err := jsonEncode(&buf, v)
	return buf.String(), err
}

func jsonEncode(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func replyText(t *testing.T, p model.Provider, session string, turn, step int) (string, error) {
	t.Helper()
	var acc model.Accumulator
	err := p.Generate(context.Background(), &model.Request{Meta: model.RequestMeta{SessionID: session, Turn: turn, Step: step}}, acc.Add)
	if err == nil {
		if cerr := acc.Complete(); cerr != nil {
			t.Fatalf("replayed stream incomplete: %v", cerr)
		}
	}
	var text strings.Builder
	for _, p := range acc.Parts() {
		text.WriteString(p.Text)
	}
	return text.String(), err
}

func TestOpenOrdersChildrenByCreatedAt(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"rec.jsonl":   sessionFile(t, `"id":"p","createdAt":100`, 1, 1, "parent"),
		"rec.1.jsonl": sessionFile(t, `"id":"late","createdAt":300,"parentSession":"p"`, 1, 1, "late child"),
		"rec.2.jsonl": sessionFile(t, `"id":"early","createdAt":200,"parentSession":"p"`, 1, 1, "early child"),
		// Not children of rec.jsonl:
		"rec.x.jsonl":   "not a session",
		"other.1.jsonl": "not a session",
	})
	p, err := Open(filepath.Join(dir, "rec.jsonl"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ session, want string }{
		{"A", "parent"}, {"B", "early child"}, {"C", "late child"}, {"A", "parent"},
	} {
		if got, err := replyText(t, p, tt.session, 1, 1); err != nil || got != tt.want {
			t.Fatalf("session %s = %q, %v; want %q", tt.session, got, err, tt.want)
		}
	}
	if _, err := replyText(t, p, "D", 1, 1); !errors.Is(err, model.ErrNoScript) || !strings.Contains(err.Error(), `"D"`) {
		t.Fatalf("fourth session = %v, want ErrNoScript naming it", err)
	}
}

func TestOpenOptions(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"session.jsonl":   sessionFile(t, `"id":"p","createdAt":0`, 1, 1, "recorded"),
		"session.1.jsonl": sessionFile(t, `"id":"c","createdAt":0`, 1, 1, "child"),
		OverrideFile:      `[{"kind":"chunks","chunks":` + mustJSON(t, textAnswer("from file")) + `}, {"kind":"chunks","chunks":[]}]`,
	})
	path := filepath.Join(dir, "session.jsonl")

	p, err := Open(path, Options{NoOverrideFile: true, NoChildFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Scripts()) != 1 || p.hasOverride {
		t.Fatal("NoOverrideFile and NoChildFiles still discovered files")
	}

	p, err = Open(path, Options{NoOverrideFile: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := replyText(t, p, "a", 1, 1); err != nil || got != "recorded" {
		t.Fatalf("NoOverrideFile: %q, %v", got, err)
	}
	if got, err := replyText(t, p, "b", 1, 1); err != nil || got != "child" {
		t.Fatalf("discovered child: %q, %v", got, err)
	}

	other, err := ReadScript(strings.NewReader(sessionFile(t, `"id":"x"`, 1, 1, "given child")), "given")
	if err != nil {
		t.Fatal(err)
	}
	p, err = Open(path, Options{Children: []*Script{other}, Override: []Entry{{Kind: KindChunks, Chunks: textAnswer("overridden")}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := replyText(t, p, "a", 9, 9); err != nil || got != "overridden" {
		t.Fatalf("override ignores turn and step: %q, %v", got, err)
	}
	if got, err := replyText(t, p, "b", 1, 1); err != nil || got != "given child" {
		t.Fatalf("Children: %q, %v", got, err)
	}

	// The discovered override file replaces the parent's script.
	p, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := replyText(t, p, "a", 1, 1); err != nil || got != "from file" {
		t.Fatalf("override file: %q, %v", got, err)
	}
	if _, err := replyText(t, p, "a", 1, 2); !errors.Is(err, model.ErrStreamCut) {
		t.Fatalf("override entry without a finish = %v, want ErrStreamCut", err)
	}
}

func TestThrowEntry(t *testing.T) {
	parent, err := ReadScript(strings.NewReader(sessionFile(t, `"id":"p"`)), "p")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := ReadOverride(strings.NewReader(`[
		{"kind":"chunks","chunks":`+mustJSON(t, textAnswer("first"))+`},
		{"kind":"throw","chunks":[{"type":"block-start","index":0,"blockType":"text"},{"type":"text-delta","index":0,"text":"half"}],
		 "message":"Internal server error","code":"server_error","status":500},
		{"kind":"throw","chunks":[],"message":"Authentication Fails","code":401}
	]`), "override")
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(parent, Options{Override: entries})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := replyText(t, p, "s", 1, 1); err != nil || got != "first" {
		t.Fatalf("call 1 = %q, %v", got, err)
	}
	got, err := replyText(t, p, "s", 1, 2)
	var apiErr *model.APIError
	if !errors.As(err, &apiErr) || *apiErr != (model.APIError{Status: 500, Code: "server_error", Message: "Internal server error"}) {
		t.Fatalf("call 2 error = %v", err)
	}
	if got != "half" {
		t.Fatalf("call 2 streamed %q before failing, want half", got)
	}
	_, err = replyText(t, p, "s", 2, 1)
	if !errors.As(err, &apiErr) || *apiErr != (model.APIError{Code: "401", Message: "Authentication Fails"}) {
		t.Fatalf("call 3 error = %v", err)
	}
	if _, err := replyText(t, p, "s", 2, 2); !errors.Is(err, model.ErrNoScript) || !strings.Contains(err.Error(), "call 4") {
		t.Fatalf("call 4 = %v, want ErrNoScript naming the call", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	s, err := jsonLine(v)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(s)
}

func TestReadOverrideRejects(t *testing.T) {
	for _, src := range []string{
		`{"kind":"hang"}`,
		`null`,
		`[{"kind":"sleep"}]`,
		`[{"kind":"hang","chunks":[{"type":"text-delta","index":0,"text":"x"}]}]`,
		`[{"kind":"throw","chunks":[]}]`,
		`[{"kind":"chunks","chunks":[{"type":"ping"}]}]`,
		`[{"kind":"chunks","chunk":[]}]`,
		`[{"kind":"throw","message":"m","code":{"a":1}}]`,
		`[] []`,
	} {
		if _, err := ReadOverride(strings.NewReader(src), "o"); !errors.Is(err, ErrBadRecording) {
			t.Errorf("ReadOverride(%s) = %v, want ErrBadRecording", src, err)
		}
	}
}

func TestEntryJSONRoundTrip(t *testing.T) {
	entries := []Entry{
		{Kind: KindChunks, Chunks: textAnswer("a")},
		{Kind: KindHang},
		{Kind: KindThrow, Message: "m", Code: "c", Status: 429},
	}
	back, err := ReadOverride(strings.NewReader(mustJSON(t, entries)), "rt")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, entries) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, entries)
	}
}

func TestReadScriptTolerance(t *testing.T) {
	good := sessionFile(t, `"id":"{{sessionId}}","createdAt":0,"cwd":"{{cwd}}"`, 1, 1, "x")
	// Unknown event types are skipped; a torn last line is ignored.
	src := good + `{"type":"compact/start","seq":99,"time":0,"data":{}}` + "\n" + `{"type":"assistant/chu`
	s, err := ReadScript(strings.NewReader(src), "torn")
	if err != nil {
		t.Fatalf("ReadScript: %v", err)
	}
	if s.SessionID != "{{sessionId}}" || len(s.Steps) != 1 || !s.Steps[0].Finished() {
		t.Fatalf("script = %+v", s)
	}

	for name, bad := range map[string]string{
		"empty":          "",
		"no header":      `{"type":"turn/start","seq":0,"time":0,"data":{}}` + "\n",
		"wrong version":  `{"type":"session","version":1,"id":"x"}` + "\n",
		"no version":     `{"type":"session","id":"x"}` + "\n",
		"torn mid-file":  good + `{"type":"assistant/chu` + "\n" + `{"type":"x","data":{}}` + "\n",
		"bad chunk type": `{"type":"session","version":0,"id":"x"}` + "\n" + `{"type":"assistant/chunk","seq":0,"time":0,"data":{"turn":1,"step":1,"chunk":{"type":"ping"}}}` + "\n",
		"chunk w/o step": `{"type":"session","version":0,"id":"x"}` + "\n" + `{"type":"assistant/chunk","seq":0,"time":0,"data":{"turn":1,"chunk":{"type":"usage","usage":{}}}}` + "\n",
		"seed too long":  `{"type":"session","version":0,"id":"x","seedLength":5}` + "\n",
		"negative seed":  `{"type":"session","version":0,"id":"x","seedLength":-1}` + "\n",
	} {
		if _, err := ReadScript(strings.NewReader(bad), name); !errors.Is(err, ErrBadRecording) {
			t.Errorf("%s: ReadScript = %v, want ErrBadRecording", name, err)
		}
	}
}

func TestUnfinishedRecordingIsCut(t *testing.T) {
	src := `{"type":"session","version":0,"id":"x"}
{"type":"assistant/chunk","seq":0,"time":0,"data":{"turn":1,"step":1,"chunk":{"type":"block-start","index":0,"blockType":"text"}}}
{"type":"assistant/chunk","seq":1,"time":0,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"par"}}}
`
	s, err := ReadScript(strings.NewReader(src), "cut")
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	err = p.Generate(context.Background(), &model.Request{Meta: model.RequestMeta{Turn: 1, Step: 1}},
		func(model.Chunk) error { n++; return nil })
	if !errors.Is(err, model.ErrStreamCut) || n != 2 {
		t.Fatalf("Generate = %v after %d chunks, want ErrStreamCut after 2", err, n)
	}
}

func TestEmitErrorAndCancellation(t *testing.T) {
	s, err := ReadScript(strings.NewReader(sessionFile(t, `"id":"x"`, 1, 1, "abc")), "s")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := New(s, Options{})
	stop := errors.New("stop")
	err = p.Generate(context.Background(), &model.Request{Meta: model.RequestMeta{Turn: 1, Step: 1}},
		func(model.Chunk) error { return stop })
	if err != stop {
		t.Fatalf("Generate = %v, want the emit error", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Generate(ctx, &model.Request{Meta: model.RequestMeta{Turn: 1, Step: 1}},
		func(model.Chunk) error { return nil }); err != context.Canceled {
		t.Fatalf("Generate with a cancelled ctx = %v", err)
	}
}

func TestReplayDoesNotShareChunks(t *testing.T) {
	s, err := ReadScript(strings.NewReader(sessionFile(t, `"id":"x"`, 1, 1, "abc")), "s")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := New(s, Options{})
	req := &model.Request{Meta: model.RequestMeta{Turn: 1, Step: 1}}
	_ = p.Generate(context.Background(), req, func(c model.Chunk) error {
		if c.Block != nil {
			c.Block.Text = "mutated"
		}
		return nil
	})
	if got, err := replyText(t, p, "", 1, 1); err != nil || got != "abc" {
		t.Fatalf("replay after a consumer mutated a chunk = %q, %v", got, err)
	}
}

func TestConcurrentSessions(t *testing.T) {
	const sessions = 8
	parent, err := ReadScript(strings.NewReader(sessionFile(t, `"id":"p","createdAt":0`, 1, 1, "s0", 1, 2, "s0b")), "p")
	if err != nil {
		t.Fatal(err)
	}
	var children []*Script
	for i := 1; i < sessions; i++ {
		c, err := ReadScript(strings.NewReader(sessionFile(t, fmt.Sprintf(`"id":"c%d","createdAt":%d`, i, i), 1, 1, fmt.Sprintf("s%d", i), 1, 2, fmt.Sprintf("s%db", i))), "c")
		if err != nil {
			t.Fatal(err)
		}
		children = append(children, c)
	}
	p, err := New(parent, Options{Children: children})
	if err != nil {
		t.Fatal(err)
	}
	// Bind in a known order, then hammer concurrently.
	for i := 0; i < sessions; i++ {
		if _, err := replyText(t, p, fmt.Sprint("live", i), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, sessions*20)
	for i := 0; i < sessions; i++ {
		for j := 0; j < 10; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var acc model.Accumulator
				err := p.Generate(context.Background(), &model.Request{Meta: model.RequestMeta{SessionID: fmt.Sprint("live", i), Turn: 1, Step: 2}}, acc.Add)
				if err == nil && (len(acc.Parts()) != 1 || acc.Parts()[0].Text != fmt.Sprintf("s%db", i)) {
					err = fmt.Errorf("session %d got %+v", i, acc.Parts())
				}
				if err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestNewRejectsInvalidOverride(t *testing.T) {
	parent, err := ReadScript(strings.NewReader(sessionFile(t, `"id":"p"`)), "p")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []Entry{{Kind: "nap"}, {Kind: KindThrow}, {Kind: KindHang, Message: "x"}} {
		if _, err := New(parent, Options{Override: []Entry{e}}); !errors.Is(err, ErrBadRecording) {
			t.Errorf("New with override %+v = %v, want ErrBadRecording", e, err)
		}
	}
	if _, err := New(nil, Options{}); err == nil {
		t.Error("New(nil) accepted")
	}
	if _, err := New(parent, Options{Children: []*Script{nil}}); err == nil {
		t.Error("nil child accepted")
	}
}

// Errors name the package once: an Entry decoded on its own says
// "replay: ", and an override file's error does not repeat it.
func TestOverrideErrorPrefix(t *testing.T) {
	var e Entry
	err := json.Unmarshal([]byte(`{"kind":"throw"}`), &e)
	if err == nil || err.Error() != "replay: override entry: a throw entry needs a message" {
		t.Errorf("Entry error = %v", err)
	}
	_, err = ReadOverride(strings.NewReader(`[{"kind":"throw"}]`), "o.json")
	if err == nil || err.Error() != "replay: bad recording: override o.json: entry 0: a throw entry needs a message" {
		t.Errorf("ReadOverride error = %v", err)
	}
}
