package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/dsh-wasm/dsh-wasm/internal/frontend/acpagent"
)

func newACPCmd(s streams) *cobra.Command {
	var df deploymentFlags
	var replay string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "acp --config FILE [--replay FILE] [--base-url URL]",
		Short: "Serve a deployment as an Agent Client Protocol agent on stdio",
		Long: `ACP serves the deployment in --config as an agent of the Agent Client
Protocol (JSON-RPC, one message a line) on standard input and output, for
editors such as Zed. Standard output carries protocol frames only; logs and
the plugins' output go to standard error.

Each session/new gives a session whose working directory is the client's
cwd; non-empty mcpServers or additionalDirectories are refused.
session/load replays a persisted session's history as updates.

--replay FILE answers every session's model from a recorded session file
instead of the live provider (standard error says so).

Exit status: 0 when the client closed the connection; 1 the deployment
failed; 2 usage.`,
		Example: `  dsh-wasm acp --config examples/acp-agent/dsh.yml`,
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmdContext(cmd)
			logger := stderrLogger(s, verbose)
			d, err := df.open(ctx, s.g, logger)
			if err != nil {
				return err
			}
			defer d.Close(ctx)
			d.compileInBackground(logger)
			if replay != "" {
				fmt.Fprintf(s.err, "dsh-wasm: the model is a replay of %s; no live model is called\n", replay)
			}
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			return acpagent.Serve(ctx, d.Deployment, s.in, s.out, acpagent.Options{
				Replay: replay, Logger: logger})
		},
	}
	df.add(cmd, true)
	cmd.Flags().StringVar(&replay, "replay", "", "answer from the recorded session `FILE` instead of the live model")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "write debug logs to standard error")
	return cmd
}
