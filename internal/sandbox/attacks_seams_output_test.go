package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/agent"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/session/filestore"
)

// The model's output is the seam between the provider's stream and the
// loop's record (issue 25, item 7): in serve one tenant's prompt chooses
// what the model sends, and the loop keeps every chunk it takes. The
// step's output bounds (agent.OutputBounds, one owner: the accumulator
// counts, the loop's one path to the model applies the time bound) must
// hold whatever shape the flood takes: not only long deltas but empty
// ones, repeated names, a bloated finish or block-end, many calls each
// under its own bound, a trickle.
func init() { seamGroups = append(seamGroups, outputAttacks) }

// outputBound is the step's byte bound in these attacks.
const outputBound = 1 << 20

func outputAttacks() []hostileAttack {
	return []hostileAttack{
		{name: "model-empty-delta-flood", run: func(e *env) string {
			// Deltas carrying nothing cost nothing by their content, but
			// each is a session record.
			return e.outputAttack(func(emit func(model.Chunk) error) error {
				if err := emit(model.Chunk{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockReasoning}); err != nil {
					return err
				}
				for range 10_000_000 {
					if err := emit(model.Chunk{Type: model.ChunkReasoningDelta, Index: 0}); err != nil {
						return err
					}
				}
				return nil
			}, "passed 1048576 bytes")
		}},
		{name: "model-repeated-call-name", run: func(e *env) string {
			// A tool call may repeat its id and name on every delta (they
			// must be equal); a 32 KiB name repeated is a flood with no
			// arguments at all.
			name := strings.Repeat("n", 32<<10)
			return e.outputAttack(func(emit func(model.Chunk) error) error {
				if err := emit(model.Chunk{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockToolCall}); err != nil {
					return err
				}
				for range 100_000 {
					if err := emit(model.Chunk{Type: model.ChunkToolCallDelta, Index: 0, ID: "c", Name: name}); err != nil {
						return err
					}
				}
				return nil
			}, "passed 1048576 bytes")
		}},
		{name: "model-bloated-finish", run: func(e *env) string {
			// The finish chunk's message is recorded too.
			return e.outputAttack(func(emit func(model.Chunk) error) error {
				return emit(model.Chunk{Type: model.ChunkFinish, Reason: &model.FinishReason{
					Kind: model.FinishError, Message: strings.Repeat("m", 8<<20)}})
			}, "passed 1048576 bytes")
		}},
		{name: "model-bloated-block-end", run: func(e *env) string {
			// A block-end carries the finished block: one far larger than
			// what its deltas built must not be recorded.
			return e.outputAttack(func(emit func(model.Chunk) error) error {
				for _, c := range []model.Chunk{
					{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockText},
					{Type: model.ChunkTextDelta, Index: 0, Text: "hi"},
					{Type: model.ChunkBlockEnd, Index: 0, Block: &model.Part{Type: model.BlockText, Text: strings.Repeat("b", 8<<20)}},
				} {
					if err := emit(c); err != nil {
						return err
					}
				}
				return nil
			}, "passed 1048576 bytes")
		}},
		{name: "model-many-calls-under-their-bound", run: func(e *env) string {
			// Each call stays under the per-call argument bound; together
			// they pass the step's.
			piece := `{"x":"` + strings.Repeat("a", 200<<10) + `"}`
			return e.outputAttack(func(emit func(model.Chunk) error) error {
				for i := range 1000 {
					for _, c := range []model.Chunk{
						{Type: model.ChunkBlockStart, Index: i, BlockType: model.BlockToolCall},
						{Type: model.ChunkToolCallDelta, Index: i, ID: fmt.Sprint("c", i), Name: "read", ArgumentsDelta: piece},
						{Type: model.ChunkBlockEnd, Index: i},
					} {
						if err := emit(c); err != nil {
							return err
						}
					}
				}
				return emit(model.Chunk{Type: model.ChunkFinish, Reason: &model.FinishReason{Kind: model.FinishToolCalls}})
			}, "passed 1048576 bytes")
		}},
		{name: "model-reasoning-trickle", run: func(e *env) string {
			// A byte of reasoning every few milliseconds: never idle,
			// never large, never done.
			return e.outputAttack(func(emit func(model.Chunk) error) error {
				if err := emit(model.Chunk{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockReasoning}); err != nil {
					return err
				}
				for range 100_000 {
					time.Sleep(5 * time.Millisecond)
					if err := emit(model.Chunk{Type: model.ChunkReasoningDelta, Index: 0, Text: "."}); err != nil {
						return err
					}
				}
				return nil
			}, "took longer than 1s")
		}},
	}
}

// outputAttack runs one turn whose model streams what stream emits, under
// a 1 MiB step bound, 512 KiB per call and 1 s, and checks the step
// ended as an output-limit error naming want, with the session file
// holding at most the bound (and a little for the turn's other records).
func (e *env) outputAttack(stream func(emit func(model.Chunk) error) error, want string) string {
	e.t.Helper()
	store := filestore.New(filepath.Join(e.base, "sessions"), filestore.Options{})
	sess, err := store.Create(session.Header{Cwd: e.ws})
	if err != nil {
		e.t.Fatalf("session: %v", err)
	}
	path := sess.Path()
	defer sess.Close()
	provider := model.ProviderFunc(func(ctx context.Context, _ *model.Request, emit func(model.Chunk) error) error {
		return stream(func(c model.Chunk) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			return emit(c)
		})
	})
	a, err := agent.New(e.ctx, agent.Options{ID: "flood-" + randomToken(e.t)[:8], Model: "m", Session: sess, Provider: provider,
		Registry: e.host.Registry(), Bus: e.host.Bus(), Tools: e.host, Logger: slog.New(captureHandler{c: e.logs}),
		Output: agent.OutputBounds{StepBytes: outputBound, StepTime: time.Second, ToolArgumentBytes: outputBound / 2}})
	if err != nil {
		e.t.Fatalf("agent: %v", err)
	}
	defer a.Close(e.ctx)
	start := time.Now()
	res, err := a.Prompt(e.ctx, "flood")
	took := time.Since(start)
	e.recordErr(err)
	e.recordErr(res.Err)
	if err != nil {
		e.t.Fatalf("the turn did not run: %v", err)
	}
	if res.End.Kind != session.EndError || res.End.Code != agent.CodeOutputLimit || !errors.Is(res.Err, model.ErrOutputLimit) ||
		!strings.Contains(res.End.Message, want) {
		e.t.Errorf("the turn ended %+v (%v), want an %s error naming %q", res.End, res.Err, agent.CodeOutputLimit, want)
	}
	if err := sess.Close(); err != nil {
		e.t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		e.t.Fatal(err)
	}
	if fi.Size() > outputBound+64<<10 {
		e.t.Errorf("the session file holds %d bytes under a %d-byte bound", fi.Size(), outputBound)
	}
	return fmt.Sprintf("step ended %s after %v; session %d KiB", res.End.Code, took.Round(time.Millisecond), fi.Size()>>10)
}

func init() { seamGroups = append(seamGroups, escapeAttacks) }

func escapeAttacks() []hostileAttack {
	return []hostileAttack{
		{name: "model-escape-bloat", run: func(e *env) string {
			// Control characters take six bytes each once a session
			// records them: a bound on raw bytes would store six times
			// the bound.
			piece := strings.Repeat("\x01", 64<<10)
			return e.outputAttack(func(emit func(model.Chunk) error) error {
				if err := emit(model.Chunk{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockText}); err != nil {
					return err
				}
				for range 1000 {
					if err := emit(model.Chunk{Type: model.ChunkTextDelta, Index: 0, Text: piece}); err != nil {
						return err
					}
				}
				return nil
			}, "passed 1048576 bytes")
		}},
	}
}
