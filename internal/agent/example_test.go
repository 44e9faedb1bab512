package agent_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/dsh-wasm/dsh-wasm/internal/agent"
	"github.com/dsh-wasm/dsh-wasm/internal/replay"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/session/filestore"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

// noTools is a ToolRunner without tools; a deployment passes its
// *plugin.Host.
type noTools struct{}

func (noTools) CallTool(context.Context, *prompt.AgentFacts, string, []byte) (tool.Result, error) {
	return tool.Result{}, errors.New("no tools")
}

func (noTools) EndAgent(context.Context, string) {}

// The loop on its own, wired by hand: a registry, the built-in variables
// and harness sections, a model, a session and a ToolRunner. Programs that
// run agents use runtime/deploy instead, where deploy.New does all of this
// (and loads the plugins) in one call; see its example.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "agent-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	// The prompt: built-in variables once per registry, then sections.
	reg := prompt.NewRegistry(nil)
	if _, err := agent.RegisterBuiltinVariables(reg); err != nil {
		fmt.Println(err)
		return
	}
	if _, _, err := prompt.RegisterHarnessSections(reg, "You are powered by the {{model}} model."); err != nil {
		fmt.Println(err)
		return
	}

	// A model that answers turn 1, step 1 from a script.
	provider, err := replay.New(&replay.Script{Name: "example", Steps: []replay.Step{{Turn: 1, Step: 1, Chunks: []model.Chunk{
		{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockText},
		{Type: model.ChunkTextDelta, Index: 0, Text: "PONG"},
		{Type: model.ChunkBlockEnd, Index: 0},
		{Type: model.ChunkFinish, Reason: &model.FinishReason{Kind: model.FinishStop}},
	}}}}, replay.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}

	sess, err := filestore.New(dir, filestore.Options{}).Create(session.Header{Cwd: "/home/me/project"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()

	a, err := agent.New(ctx, agent.Options{Model: "deepseek-v4-flash", Session: sess,
		Provider: provider, Registry: reg, Tools: noTools{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close(ctx)

	res, err := a.Prompt(ctx, "Reply with exactly the word PONG.")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.End.Kind, res.Text)
	// Output: completed PONG
}
