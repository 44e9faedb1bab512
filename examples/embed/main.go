// Command embed is a Go program that embeds a sandboxed agent with the
// runtime/deploy API: one native Go tool (word_count) beside one untrusted
// Wasm plugin (the built-in tool-fs, granted read-only access to the
// workspace and nothing else).
//
// By default the model is a small script, so the program runs offline;
// with -live it asks DeepSeek (the key in $DEEPSEEK_API_KEY).
//
//	go run ./examples/embed
//	go run ./examples/embed -live
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/guests"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/deepseek"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

func main() {
	live := flag.Bool("live", false, "ask DeepSeek instead of the scripted model")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *live); err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
}

// wordCount is a native tool: plain Go, called in-process.
var wordCount = deploy.Tool{
	Tool: prompt.Tool{
		Name:        "word_count",
		Description: "Count the words in a text.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
	},
	Run: func(_ context.Context, call deploy.ToolCall) (tool.Result, error) {
		var args struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(call.Args, &args); err != nil {
			return tool.Result{Text: "bad arguments: " + err.Error(), IsError: true}, nil
		}
		return tool.Result{Text: fmt.Sprint(len(strings.Fields(args.Text)))}, nil
	},
}

func run(ctx context.Context, out io.Writer, live bool) error {
	root, err := os.MkdirTemp("", "dsh-embed")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	workspace := filepath.Join(root, "workspace")
	if err := os.Mkdir(workspace, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(workspace, "motto.txt"), []byte("Sandbox every tool you did not write.\n"), 0o644); err != nil {
		return err
	}

	opts := deploy.Options{
		Model:       "deepseek-v4-flash",
		Persona:     "You are a careful assistant powered by the {{model}} model.",
		Provider:    scriptedModel{},
		Tools:       []deploy.Tool{wordCount},
		SessionsDir: filepath.Join(root, "sessions"),
		// The built-in plugins are opt-in: this program links tool-fs
		// alone, not all eight.
		Builtins: guests.ToolFS,
		Plugins: []deploy.PluginSpec{{
			Source: "builtin:tool-fs",
			// Untrusted: it may read the session's workspace, and that is all.
			Grants: &config.Grants{FS: []config.FSGrant{{Path: config.Workspace, Mode: config.ModeRO}}},
		}},
	}
	if live {
		opts.Provider = nil
		opts.NewProvider = func() (model.Provider, error) { return deepseek.New(deepseek.Options{}) }
	}
	d, err := deploy.New(ctx, opts)
	if err != nil {
		return err
	}
	defer d.Close(ctx)

	s, err := d.NewSession(ctx, deploy.SessionOptions{Cwd: workspace})
	if err != nil {
		return err
	}
	defer s.Close(ctx)
	stream := s.Follow()
	res, err := s.Prompt(ctx, "Read motto.txt and count its words.")
	if err != nil {
		return err
	}
	for e, ok := stream.TryNext(); ok; e, ok = stream.TryNext() {
		if e.Type == "tool/call" {
			var c struct{ Name string }
			json.Unmarshal(e.Data, &c)
			fmt.Fprintf(out, "tool: %s\n", c.Name)
		}
	}
	fmt.Fprintf(out, "turn %d ended %s after %d steps\n", res.Turn, res.End.Kind, res.Steps)
	fmt.Fprintln(out, res.Text)
	return nil
}

// scriptedModel stands in for a model: it reads the file with the Wasm
// tool, counts its words with the native one, then answers from the tool
// results it was sent.
type scriptedModel struct{}

func (scriptedModel) Generate(_ context.Context, req *model.Request, emit func(model.Chunk) error) error {
	var results []string
	for _, m := range req.Messages {
		if m.Role == model.RoleTool {
			for _, p := range m.Content {
				results = append(results, p.Text)
			}
		}
	}
	var reply []model.Chunk
	switch len(results) {
	case 0:
		reply = call("c1", "read", `{"file_path":"motto.txt"}`)
	case 1:
		line := ""
		for _, l := range strings.Split(results[0], "\n") {
			if _, text, ok := strings.Cut(l, "1: "); ok && strings.HasPrefix(l, "1: ") {
				line = text
			}
		}
		args, _ := json.Marshal(map[string]string{"text": line})
		reply = call("c2", "word_count", string(args))
	default:
		reply = text(fmt.Sprintf("motto.txt has %s words.", results[1]))
	}
	for _, c := range reply {
		if err := emit(c); err != nil {
			return err
		}
	}
	return nil
}

func call(id, name, args string) []model.Chunk {
	return []model.Chunk{
		{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockToolCall},
		{Type: model.ChunkToolCallDelta, Index: 0, ID: id, Name: name, ArgumentsDelta: args},
		{Type: model.ChunkBlockEnd, Index: 0, Block: &model.Part{Type: model.BlockToolCall, ID: id, Name: name, Arguments: args}},
		{Type: model.ChunkFinish, Reason: &model.FinishReason{Kind: model.FinishToolCalls}},
	}
}

func text(s string) []model.Chunk {
	return []model.Chunk{
		{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockText},
		{Type: model.ChunkTextDelta, Index: 0, Text: s},
		{Type: model.ChunkBlockEnd, Index: 0, Block: &model.Part{Type: model.BlockText, Text: s}},
		{Type: model.ChunkFinish, Reason: &model.FinishReason{Kind: model.FinishStop}},
	}
}
