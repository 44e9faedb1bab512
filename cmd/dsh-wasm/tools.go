package main

import (
	"github.com/spf13/cobra"

	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
)

func newToolsCmd(s streams) *cobra.Command {
	var df deploymentFlags
	var verbose bool
	cmd := &cobra.Command{
		Use:   "tools --config FILE",
		Short: "Print the tools a deployment's agent is given, as the model receives them",
		Long: `Tools loads the deployment and prints a JSON array with one flat
{name, description, parameters} per tool, in the order the model receives
them: exactly what the model is told, not any provider's wire wrapper.

Exit status: 0 printed; 1 the deployment failed; 2 usage.`,
		Example: `  dsh-wasm tools --config examples/coding-agent/dsh.yml`,
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmdContext(cmd)
			d, err := df.open(ctx, s.g, stderrLogger(s, verbose))
			if err != nil {
				return err
			}
			defer d.Close(ctx)
			tools, err := d.Tools(ctx, deploy.PromptOptions{})
			if err != nil {
				return err
			}
			return writeJSON(s.out, tools)
		},
	}
	df.add(cmd, false)
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "write the plugins' log to standard error")
	return cmd
}
