// Command record writes examples/coding-agent/demo.jsonl: a session of the
// coding agent whose model is a script, recorded through the replay
// recorder while the real Wasm tools act in a temporary workspace. The
// README's first command replays it, so a fresh clone runs the agent
// offline, without a key.
//
//	go run ./examples/coding-agent/record
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dsh-wasm/dsh-wasm/guests"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
)

// Prompt is the prompt the demo answers; the README uses it.
const Prompt = "Write a shell script hello.sh that greets the user, run it, and tell me what it printed."

// answers is the scripted model: plan, write, run, answer.
var answers = []scripted.Answer{
	{
		Reasoning: "The user wants a greeting script. I will plan the three steps, then write the file.",
		Calls: []scripted.Call{{ID: "call_todo", Name: "todo_write", Arguments: `{"todos":[` +
			`{"content":"Write hello.sh","status":"in_progress"},` +
			`{"content":"Run hello.sh","status":"pending"},` +
			`{"content":"Report the output","status":"pending"}]}`}},
		Usage: &model.Usage{InputTokens: 2150, OutputTokens: 96, ReasoningTokens: 24},
	},
	{
		Text: "I'll write the script first.",
		Calls: []scripted.Call{{ID: "call_write", Name: "write",
			Arguments: `{"file_path":"hello.sh","content":"#!/bin/sh\necho \"Hello from dsh-wasm!\"\n"}`}},
		Usage: &model.Usage{InputTokens: 310, CacheReadTokens: 2150, OutputTokens: 58},
	},
	{
		Calls: []scripted.Call{{ID: "call_bash", Name: "bash",
			Arguments: `{"command":"sh hello.sh","description":"Run the greeting script"}`}},
		Usage: &model.Usage{InputTokens: 120, CacheReadTokens: 2460, OutputTokens: 31},
	},
	{
		Reasoning: "The script ran and printed its greeting; the plan is done.",
		Text: "Done. I created `hello.sh`:\n\n```sh\n#!/bin/sh\necho \"Hello from dsh-wasm!\"\n```\n\n" +
			"Running it with `sh hello.sh` printed **Hello from dsh-wasm!** and exited with status 0.",
		Usage: &model.Usage{InputTokens: 140, CacheReadTokens: 2580, OutputTokens: 75, ReasoningTokens: 14},
	},
}

func main() {
	if err := record(); err != nil {
		fmt.Fprintln(os.Stderr, "record:", err)
		os.Exit(1)
	}
}

func record() error {
	ctx := context.Background()
	here := filepath.Join("examples", "coding-agent")
	tmp, err := os.MkdirTemp("", "dsh-demo")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	workspace := filepath.Join(tmp, "workspace")
	if err := os.Mkdir(workspace, 0o755); err != nil {
		return err
	}
	inner, err := scripted.Provider(answers)
	if err != nil {
		return err
	}
	out, err := os.Create(filepath.Join(here, "demo.jsonl"))
	if err != nil {
		return err
	}
	rec := deploy.NewRecorder(inner, out)
	d, err := deploy.Open(ctx, filepath.Join(here, "dsh.yml"), deploy.Options{
		Provider: rec, SessionsDir: filepath.Join(tmp, "sessions"),
		// dsh.yml loads built-in plugins, which are opt-in.
		Builtins: guests.All()})
	if err != nil {
		return err
	}
	defer d.Close(ctx)
	s, err := d.NewSession(ctx, deploy.SessionOptions{Cwd: workspace})
	if err != nil {
		return err
	}
	// A turn that did not complete is a *deploy.TurnError: a recording
	// of a failed demo is no demo.
	res, err := s.Prompt(ctx, Prompt)
	if err != nil {
		return err
	}
	if err := s.Close(ctx); err != nil {
		return err
	}
	if err := rec.Close(); err != nil {
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	fmt.Printf("recorded %d steps; the agent answered:\n%s\n", res.Steps, res.Text)
	return nil
}
