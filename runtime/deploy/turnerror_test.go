package deploy_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/agent"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// A turn that ran but did not complete is a *TurnError carrying its end
// and cause, beside a result that still says what the turn did; a
// completed turn is no error.
func TestPromptTurnError(t *testing.T) {
	ctx := context.Background()
	upstream := errors.New("400 Bad Request: context too long")
	cases := []struct {
		name     string
		provider model.Provider
		maxSteps int
		end      string
		cause    error
	}{
		{"model 400", model.ProviderFunc(func(context.Context, *model.Request, func(model.Chunk) error) error { return upstream }),
			0, session.EndError, agent.ErrModel},
		{"step cap", &scripted.Tools{Calls: []scripted.Call{{Name: "missing_tool", Arguments: "{}"}}},
			1, session.EndMaxTokens, agent.ErrStepCap},
		{"completed", &scripted.Tools{Answer: func(*model.Request) string { return "all done" }},
			0, session.EndCompleted, nil},
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
