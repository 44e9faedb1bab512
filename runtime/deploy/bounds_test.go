package deploy_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/agent"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// A session's turns run under the deployment's limits: a section that
// misses limits.assembly_timeout fails the turn at that deadline (not the
// loop's 5 s default), and a prompt over limits.prompt_bytes fails it.
func TestSessionTurnsHonourLimits(t *testing.T) {
	provider, err := scripted.Provider([]scripted.Answer{{Text: "done"}, {Text: "done"}})
	if err != nil {
		t.Fatal(err)
	}
	slow := prompt.Section{Name: "embedder:slow", Order: 10, Dynamic: func(ctx context.Context, _ prompt.AssembleContext) (string, error) {
		<-ctx.Done()
		return "", context.Cause(ctx)
	}}
	d := open(t, deploy.Options{Model: "m1", Persona: "P.", Provider: provider, Sections: []prompt.Section{slow},
		Limits: deploy.Limits{AssemblyTimeout: 100 * time.Millisecond}})
	ctx := context.Background()
	s, err := d.NewSession(ctx, deploy.SessionOptions{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := s.Prompt(ctx, "go")
	took := time.Since(start)
	var te *deploy.TurnError
	if !errors.As(err, &te) || res.End.Kind != session.EndError || !errors.Is(res.Err, agent.ErrAssemblyTimeout) || !strings.Contains(res.Err.Error(), "embedder:slow") {
		t.Fatalf("a turn with a section past a 100ms assembly_timeout: %+v, %v, %v", res.End, res.Err, err)
	}
	if took > 3*time.Second {
		t.Errorf("the turn took %v: the deployment's assembly_timeout did not apply", took)
	}

	d = open(t, deploy.Options{Model: "m1", Persona: strings.Repeat("x", 2000), Provider: provider, Limits: deploy.Limits{PromptBytes: 1000}})
	s, err = d.NewSession(ctx, deploy.SessionOptions{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	res, err = s.Prompt(ctx, "go")
	if !errors.As(err, &te) || res.End.Kind != session.EndError || !errors.Is(res.Err, prompt.ErrPromptQuota) {
		t.Fatalf("a 2000-byte persona under prompt_bytes 1000: %+v, %v, %v", res.End, res.Err, err)
	}
}
