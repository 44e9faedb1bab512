package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/dsh-wasm/dsh-wasm/guests"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
	"github.com/spf13/cobra"
)

// errToolFailed: the tool answered with an error result; its text is on
// standard output.
var errToolFailed = errors.New("the tool answered with an error result")

func newPluginCallCmd(s streams) *cobra.Command {
	var sets []string
	var agentID string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "call [--agent ID] [--set KEY=VALUE]... SOURCE TOOL [ARGS]",
		Short: "Load a plugin in a throw-away host and call one of its tools",
		Long: `Call loads the plugin at SOURCE (a .wasm file, or builtin:NAME) in a
throw-away host, as inspect does, and calls its tool TOOL with ARGS, a JSON
object (default {}), for one agent whose working directory is the current
directory. It prints the tool's result on standard output.

The plugin may be a dsh:host/v1 plugin or a community plugin (hyper-mcp v1
or v2, mcp.run); its ABI is detected. Nothing is granted: a tool that needs
files, commands or the network gets the same refusal it would get from a
deployment that grants nothing.

--set KEY=VALUE sets one key of the plugin's config object; VALUE is JSON
when it is valid JSON and a string otherwise. --agent names the agent the
call is for (default "cli").

Exit status: 0 the tool answered; 1 it answered with an error result, or
the call failed (no such tool, a trap, the compute budget); 2 usage.`,
		Example: `  dsh-wasm plugin call ./reverse.wasm reverse '{"text":"hello"}'
  dsh-wasm plugin call --set greeting=Hi ./hello.wasm greet '{"name":"Ann"}'`,
		Args: usageArgs(cobra.RangeArgs(2, 3)),
		RunE: func(cmd *cobra.Command, args []string) error {
			config, err := configObject(sets)
			if err != nil {
				return err
			}
			toolArgs := []byte("{}")
			if len(args) == 3 {
				toolArgs = []byte(args[2])
				var obj map[string]json.RawMessage
				if err := json.Unmarshal(toolArgs, &obj); err != nil {
					return usagef("ARGS %q: want a JSON object: %v", args[2], err)
				}
			}
			logger := slog.New(slog.DiscardHandler)
			if verbose {
				logger = slog.New(slog.NewTextHandler(s.err, &slog.HandlerOptions{Level: slog.LevelDebug}))
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			res, err := callPlugin(ctx, s.g, args[0], config, agentID, args[1], toolArgs, logger)
			if err != nil {
				return err
			}
			fmt.Fprintln(s.out, res.Text)
			if res.IsError {
				return errToolFailed
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&sets, "set", nil, "set config key `KEY=VALUE`; VALUE is JSON if valid, else a string (repeatable)")
	cmd.Flags().StringVar(&agentID, "agent", "cli", "the `ID` of the agent the call is for")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "write the plugin's log to standard error")
	return cmd
}

// cliHost is a throw-away deployment for one command, with the harness's
// sections and the built-in variables registered and no plugin; close
// releases it and the cache.
func cliHost(ctx context.Context, g *globals, logger *slog.Logger) (*deploy.Deployment, func() error, error) {
	// A deployment with no plugins: the harness's sections and variables
	// are registered first, as in any deployment, and the caller loads
	// the one plugin it looks at. No session is made; the store's
	// directory is an empty one of its own, since it is host state that
	// no grant may lie in (a shared one such as the temp dir would hold
	// every workspace under it).
	cache := g.openCache(logger)
	sessions, err := os.MkdirTemp("", "dsh-wasm-cli-sessions-")
	if err != nil {
		cache.Close(context.WithoutCancel(ctx))
		return nil, nil, err
	}
	d, err := deploy.New(ctx, deploy.Options{Logger: logger, Cache: cache, SessionsDir: sessions, Builtins: guests.All()})
	if err != nil {
		cache.Close(context.WithoutCancel(ctx))
		os.RemoveAll(sessions)
		return nil, nil, err
	}
	return d, func() error {
		bg := context.WithoutCancel(ctx)
		defer os.RemoveAll(sessions)
		return errors.Join(d.Close(bg), cache.Close(bg))
	}, nil
}

func cliAgent(id string) *prompt.AgentFacts {
	cwd, _ := os.Getwd()
	return &prompt.AgentFacts{ID: id, Session: "cli-" + id, Model: "cli", Cwd: cwd}
}

func callPlugin(ctx context.Context, g *globals, source string, config json.RawMessage, agentID, toolName string, args []byte, logger *slog.Logger) (_ tool.Result, err error) {
	d, closeHost, err := cliHost(ctx, g, logger)
	if err != nil {
		return tool.Result{}, err
	}
	defer func() {
		if cerr := closeHost(); cerr != nil && err == nil {
			err = fmt.Errorf("close plugin host: %w", cerr)
		}
	}()
	p, err := d.LoadPlugin(ctx, deploy.PluginSpec{Source: source, Config: config, Inspect: true})
	if err != nil {
		return tool.Result{}, err
	}
	if !hasTool(p, toolName) {
		names := []string{}
		for _, t := range p.Tools {
			names = append(names, t.Name)
		}
		return tool.Result{}, fmt.Errorf("plugin %q has no tool %q (it has %v)", p.Name, toolName, names)
	}
	return d.CallTool(ctx, cliAgent(agentID), toolName, args)
}

func hasTool(p *deploy.PluginReport, name string) bool {
	for _, t := range p.Tools {
		if t.Name == name {
			return true
		}
	}
	return false
}
