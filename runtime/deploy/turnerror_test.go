package deploy_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/runtime/agent"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// answer streams one step's chunks: a text, or one tool call when name
// is set.
func answer(emit func(model.Chunk) error, text, name string) error {
	chunks := []model.Chunk{
		{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockText},
		{Type: model.ChunkTextDelta, Index: 0, Text: text},
		{Type: model.ChunkBlockEnd, Index: 0, Block: &model.Part{Type: model.BlockText, Text: text}},
		{Type: model.ChunkFinish, Reason: &model.FinishReason{Kind: model.FinishStop}},
	}
	if name != "" {
		chunks = []model.Chunk{
			{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockToolCall},
			{Type: model.ChunkToolCallDelta, Index: 0, ID: "c1", Name: name, ArgumentsDelta: "{}"},
			{Type: model.ChunkBlockEnd, Index: 0, Block: &model.Part{Type: model.BlockToolCall, ID: "c1", Name: name, Arguments: "{}"}},
			{Type: model.ChunkFinish, Reason: &model.FinishReason{Kind: model.FinishToolCalls}},
		}
	}
	for _, c := range chunks {
		if err := emit(c); err != nil {
			return err
		}
	}
	return nil
}

// A turn that ran but did not complete is a *TurnError carrying its end
// and cause, beside a result that still says what the turn did; a
// completed turn is no error.
func TestPromptTurnError(t *testing.T) {
	ctx := context.Background()
	upstream := errors.New("400 Bad Request: context too long")
	cases := []struct {
		name     string
		provider model.ProviderFunc
		maxSteps int
		end      string
		cause    error
	}{
		{"model 400", func(context.Context, *model.Request, func(model.Chunk) error) error { return upstream },
			0, session.EndError, agent.ErrModel},
		{"step cap", func(_ context.Context, _ *model.Request, emit func(model.Chunk) error) error {
			return answer(emit, "", "missing_tool")
		}, 1, session.EndMaxTokens, agent.ErrStepCap},
		{"completed", func(_ context.Context, _ *model.Request, emit func(model.Chunk) error) error {
			return answer(emit, "all done", "")
		}, 0, session.EndCompleted, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := open(t, deploy.Options{Model: "m1", Provider: tc.provider, MaxSteps: tc.maxSteps})
			s, err := d.NewSession(ctx, deploy.SessionOptions{Cwd: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(ctx)
			res, err := s.Prompt(ctx, "go")
			if res.End.Kind != tc.end || res.Turn != 1 || res.Steps != max(tc.maxSteps, 1) {
				t.Fatalf("result %+v, want a turn 1 ended %s", res, tc.end)
			}
			if tc.cause == nil {
				if err != nil || res.Text != "all done" {
					t.Fatalf("a completed turn: %q, %v", res.Text, err)
				}
				return
			}
			var te *deploy.TurnError
			if !errors.As(err, &te) {
				t.Fatalf("err = %v (%T), want a *deploy.TurnError", err, err)
			}
			if te.Turn != 1 || te.End != res.End || !errors.Is(err, tc.cause) {
				t.Errorf("TurnError %+v (%v), want turn 1, end %+v, wrapping %v", te, err, res.End, tc.cause)
			}
			// The turn is recorded: its end is in the session's events.
			hist := s.History()
			if last := hist[len(hist)-1]; last.Type != session.TypeTurnEnd {
				t.Errorf("last recorded event %s, want %s", last.Type, session.TypeTurnEnd)
			}
		})
	}
}
