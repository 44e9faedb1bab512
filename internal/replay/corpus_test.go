package replay

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/testcorpus"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
)

// recordedMessages reads the assistant/message events after the seed,
// keyed by (turn, step).
func recordedMessages(t *testing.T, path string, seed int) map[[2]int][]model.Part {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	msgs := map[[2]int][]model.Part{}
	events := -1 // the header is not an event
	for sc.Scan() {
		events++
		if events == 0 || events <= seed {
			continue
		}
		var ev struct {
			Type string `json:"type"`
			Data struct {
				Turn, Step int
				Content    []model.Part
			} `json:"data"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if ev.Type == "assistant/message" {
			msgs[[2]int{ev.Data.Turn, ev.Data.Step}] = ev.Data.Content
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return msgs
}

// TestCorpusScriptsLoad opens every scenario, replays every recorded step
// through the provider and checks the stream against the recorded
// assistant message.
func TestCorpusScriptsLoad(t *testing.T) {
	root := testcorpus.Sessions(t)
	scenarios, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(scenarios) == 0 {
		t.Fatal("no scenarios in the corpus")
	}
	for _, sc := range scenarios {
		t.Run(sc.Name(), func(t *testing.T) {
			dir := filepath.Join(root, sc.Name())
			p, err := Open(filepath.Join(dir, "session.jsonl"), Options{})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			children, _ := filepath.Glob(filepath.Join(dir, "session.*.jsonl"))
			scripts := p.Scripts()
			if len(scripts) != 1+len(children) {
				t.Fatalf("%d scripts, want parent + %d children", len(scripts), len(children))
			}
			for i, s := range scripts {
				msgs := recordedMessages(t, s.Name, s.SeedLength)
				finished := 0
				for _, st := range s.Steps {
					if st.Finished() {
						finished++
					}
				}
				if finished != len(msgs) {
					t.Errorf("%s: %d finished steps, %d assistant messages", s.Name, finished, len(msgs))
				}
				if p.hasOverride && i == 0 {
					continue // the parent answers from the override
				}
				session := "live-" + filepath.Base(s.Name)
				for _, st := range s.Steps {
					var acc model.Accumulator
					err := p.Generate(context.Background(), &model.Request{Meta: model.RequestMeta{
						SessionID: session, Turn: st.Turn, Step: st.Step}}, acc.Add)
					if !st.Finished() {
						if !errors.Is(err, model.ErrStreamCut) {
							t.Errorf("%s turn %d step %d: unfinished recording gave %v", s.Name, st.Turn, st.Step, err)
						}
						continue
					}
					if err != nil {
						t.Fatalf("%s turn %d step %d: %v", s.Name, st.Turn, st.Step, err)
					}
					if err := acc.Complete(); err != nil {
						t.Fatalf("%s turn %d step %d: %v", s.Name, st.Turn, st.Step, err)
					}
					want := msgs[[2]int{st.Turn, st.Step}]
					if got := acc.Parts(); !reflect.DeepEqual(got, want) {
						t.Errorf("%s turn %d step %d: replayed parts %+v, recorded message %+v", s.Name, st.Turn, st.Step, got, want)
					}
				}
			}
		})
	}
}

func TestCorpusCancelOverrideHangs(t *testing.T) {
	p, err := Open(filepath.Join(testcorpus.Sessions(t), "cancel", "session.jsonl"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.hasOverride || len(p.override) != 1 || p.override[0].Kind != KindHang {
		t.Fatalf("override not loaded: %+v", p.override)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	partial := make(chan struct{})
	done := make(chan error, 1)
	var got []model.Chunk
	go func() {
		done <- p.Generate(ctx, &model.Request{Meta: model.RequestMeta{SessionID: "s", Turn: 1, Step: 1}},
			func(c model.Chunk) error {
				got = append(got, c)
				if c.Type == model.ChunkTextDelta && strings.Contains(c.Text, "partial") {
					close(partial)
				}
				return nil
			})
	}()
	select {
	case <-partial:
	case err := <-done:
		t.Fatalf("Generate returned %v before streaming partial", err)
	case <-time.After(5 * time.Second):
		t.Fatal("no partial text")
	}
	select {
	case err := <-done:
		t.Fatalf("Generate returned %v without being cancelled", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Generate = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Generate did not return after cancellation")
	}
	if len(got) != 2 || got[0].Type != model.ChunkBlockStart || got[0].BlockType != model.BlockText {
		t.Fatalf("chunks = %+v, want a text block with partial", got)
	}
	// The override had one entry: a second call has no answer.
	err = p.Generate(context.Background(), &model.Request{Meta: model.RequestMeta{SessionID: "s", Turn: 2, Step: 1}},
		func(model.Chunk) error { return nil })
	if !errors.Is(err, model.ErrNoScript) {
		t.Fatalf("second call = %v, want ErrNoScript", err)
	}
}

// answer replays one call and returns the concatenated text it streamed.
func answer(t *testing.T, p *Provider, session string, turn, step int) (string, error) {
	t.Helper()
	var acc model.Accumulator
	err := p.Generate(context.Background(), &model.Request{Meta: model.RequestMeta{SessionID: session, Turn: turn, Step: step}}, acc.Add)
	var text strings.Builder
	for _, part := range acc.Parts() {
		switch part.Type {
		case model.BlockText:
			text.WriteString(part.Text)
		case model.BlockToolCall:
			text.WriteString("call:" + part.Name)
		}
	}
	return text.String(), err
}

func TestCorpusSubagentSpawnBinding(t *testing.T) {
	p, err := Open(filepath.Join(testcorpus.Sessions(t), "subagent-spawn", "session.jsonl"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	scripts := p.Scripts()
	if len(scripts) != 2 || scripts[1].ParentSessionID != scripts[0].SessionID {
		t.Fatalf("scripts: %+v", scripts)
	}
	// The parent calls first and asks for the subagent; then the child.
	if got, err := answer(t, p, "parent", 1, 1); err != nil || got != "call:subagent" {
		t.Fatalf("parent step 1 = %q, %v; want the subagent call", got, err)
	}
	childText, err := answer(t, p, "child", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := stepText(t, scripts[1], 1, 1)
	if childText != want || childText == "" {
		t.Fatalf("child answer %q, want the child's recorded %q", childText, want)
	}
	if got, err := answer(t, p, "parent", 1, 2); err != nil || got != stepText(t, scripts[0], 1, 2) {
		t.Fatalf("parent step 2 = %q, %v", got, err)
	}
	if _, err := answer(t, p, "third", 1, 1); !errors.Is(err, model.ErrNoScript) {
		t.Fatalf("a third session got %v, want ErrNoScript", err)
	}
}

func stepText(t *testing.T, s *Script, turn, step int) string {
	t.Helper()
	st, ok := s.Lookup(turn, step)
	if !ok {
		t.Fatalf("%s has no turn %d step %d", s.Name, turn, step)
	}
	var acc model.Accumulator
	for _, c := range st.Chunks {
		if err := acc.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	var text strings.Builder
	for _, part := range acc.Parts() {
		if part.Type == model.BlockText {
			text.WriteString(part.Text)
		}
	}
	return text.String()
}

func TestCorpusSubagentForkStartsAfterSeed(t *testing.T) {
	p, err := Open(filepath.Join(testcorpus.Sessions(t), "subagent-fork", "session.jsonl"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	scripts := p.Scripts()
	if len(scripts) != 2 {
		t.Fatalf("%d scripts, want 2", len(scripts))
	}
	fork := scripts[1]
	if fork.SeedLength == 0 || len(fork.Steps) == 0 || fork.Steps[0].Turn != 2 || fork.Steps[0].Step != 1 {
		t.Fatalf("fork script starts at %+v (seed %d), want turn 2 step 1", fork.Steps, fork.SeedLength)
	}
	if got, err := answer(t, p, "parent", 1, 1); err != nil || got != "OK" {
		t.Fatalf("parent turn 1 = %q, %v", got, err)
	}
	if got, err := answer(t, p, "parent", 2, 1); err != nil || got != "call:subagent_fork" {
		t.Fatalf("parent turn 2 = %q, %v", got, err)
	}
	// The child's seeded turn 1 is not its script.
	if _, err := answer(t, p, "fork", 1, 1); !errors.Is(err, model.ErrNoScript) {
		t.Fatalf("fork turn 1 = %v, want ErrNoScript", err)
	}
	if got, err := answer(t, p, "fork", 2, 1); err != nil || got != "MARMALADE" {
		t.Fatalf("fork turn 2 = %q, %v; want MARMALADE", got, err)
	}
}

func TestCorpusMissingStep(t *testing.T) {
	p, err := Open(filepath.Join(testcorpus.Sessions(t), "text-turn", "session.jsonl"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = answer(t, p, "sess-42", 3, 7)
	if !errors.Is(err, model.ErrNoScript) {
		t.Fatalf("err = %v, want ErrNoScript", err)
	}
	for _, want := range []string{`"sess-42"`, "turn 3", "step 7"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}
