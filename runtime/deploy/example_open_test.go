package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
)

// Open a deployment from its file, prompt, and check the error: a turn
// that ran but did not complete (here the model refused the request, as
// on an HTTP 400) is a *deploy.TurnError carrying the recorded end, and
// the result still holds what the turn did.
func ExampleOpen() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "deploy-open-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "dsh.yml")
	yml := "model: m1\npersona: You are a careful assistant.\nsessions: sessions\n"
	if err := os.WriteFile(file, []byte(yml), 0o600); err != nil {
		fmt.Println(err)
		return
	}

	// The file's provider is DeepSeek; this example brings a model of
	// its own that rejects every request.
	refuse := model.ProviderFunc(func(context.Context, *model.Request, func(model.Chunk) error) error {
		return errors.New("400 Bad Request: context too long")
	})
	d, err := deploy.Open(ctx, file, deploy.Options{Provider: refuse})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close(ctx)
	s, err := d.NewSession(ctx, deploy.SessionOptions{Cwd: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close(ctx)

	res, err := s.Prompt(ctx, "Summarize the repository.")
	var te *deploy.TurnError
	switch {
	case errors.As(err, &te):
		fmt.Println("turn", te.Turn, "ended", te.End.Kind, "after", res.Steps, "step")
	case err != nil:
		fmt.Println("no turn ran:", err)
	default:
		fmt.Println(res.Text)
	}
	// Output: turn 1 ended error after 1 step
}
