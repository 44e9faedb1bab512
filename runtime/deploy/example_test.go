package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

// A deployment with one native Go tool and a model that calls it once,
// then answers with the result it was sent.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "deploy-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	upper := deploy.Tool{
		Tool: prompt.Tool{
			Name:        "upper",
			Description: "Upper-case a text.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`),
		},
		Run: func(_ context.Context, c deploy.ToolCall) (tool.Result, error) {
			var a struct{ Text string }
			if err := json.Unmarshal(c.Args, &a); err != nil {
				return tool.Result{}, err
			}
			return tool.Result{Text: strings.ToUpper(a.Text)}, nil
		},
	}
	d, err := deploy.New(ctx, deploy.Options{
		Model:       "deepseek-v4-flash",
		Persona:     "You are powered by the {{model}} model.",
		Provider:    model.ProviderFunc(callThenAnswer),
		Tools:       []deploy.Tool{upper},
		SessionsDir: filepath.Join(dir, "sessions"),
	})
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
	res, err := s.Prompt(ctx, "Shout hello.")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.End.Kind, res.Steps, res.Text)
	// Output: completed 2 HELLO!
}

// callThenAnswer calls upper on its first step and answers with the
// tool's result on the next.
func callThenAnswer(_ context.Context, req *model.Request, emit func(model.Chunk) error) error {
	last := req.Messages[len(req.Messages)-1]
	var chunks []model.Chunk
	if last.Role == model.RoleTool {
		text := last.Content[0].Text + "!"
		chunks = []model.Chunk{
			{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockText},
			{Type: model.ChunkTextDelta, Index: 0, Text: text},
			{Type: model.ChunkBlockEnd, Index: 0, Block: &model.Part{Type: model.BlockText, Text: text}},
			{Type: model.ChunkFinish, Reason: &model.FinishReason{Kind: model.FinishStop}},
		}
	} else {
		args := `{"text":"hello"}`
		chunks = []model.Chunk{
			{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockToolCall},
			{Type: model.ChunkToolCallDelta, Index: 0, ID: "c1", Name: "upper", ArgumentsDelta: args},
			{Type: model.ChunkBlockEnd, Index: 0, Block: &model.Part{Type: model.BlockToolCall, ID: "c1", Name: "upper", Arguments: args}},
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
