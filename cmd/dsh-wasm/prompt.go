package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
)

func newPromptCmd(s streams) *cobra.Command {
	var df deploymentFlags
	var cwd, model string
	var explain, verbose bool
	cmd := &cobra.Command{
		Use:   "prompt --config FILE [--cwd DIR] [--model NAME] [--explain]",
		Short: "Print the exact system prompt a deployment's agent would receive",
		Long: `Prompt loads the deployment and prints, byte for byte, the system prompt
the model receives on a session's first step: no newline is added.

There is no default working directory: without --cwd the agent has none,
and a prompt that references {{cwd}} fails with the section and variable
named.

--explain lists instead each section in render order and then each tool
as the model is told about it: its name, its order, its owner (the
harness, the deployment, or plugin NAME), its size in bytes and estimated
tokens (bytes/4), and the variables it references.

Exit status: 0 printed; 1 the deployment or the prompt failed; 2 usage.`,
		Example: `  dsh-wasm prompt --config examples/coding-agent/dsh.yml --cwd .
  dsh-wasm prompt --config examples/acp-agent/dsh.yml --cwd . --explain`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmdContext(cmd)
			d, err := df.open(ctx, s.g, stderrLogger(s, verbose))
			if err != nil {
				return err
			}
			defer d.Close(ctx)
			p, err := d.SystemPrompt(ctx, deploy.PromptOptions{Cwd: cwd, Model: model})
			if err != nil {
				return err
			}
			if explain {
				return writeExplain(s.out, p)
			}
			_, err = io.WriteString(s.out, p.System)
			return err
		},
	}
	df.add(cmd, false)
	cmd.Flags().StringVar(&cwd, "cwd", "", "the agent's working `DIR` (none when absent)")
	cmd.Flags().StringVar(&model, "model", "", "the model `NAME`, overriding the deployment's")
	cmd.Flags().BoolVar(&explain, "explain", false, "list the sections and tools with their owners and sizes instead")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "write the plugins' log to standard error")
	return cmd
}

// writeExplain prints the parts of a prompt as two aligned tables.
func writeExplain(w io.Writer, p *deploy.Prompt) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")) }
	var bytes, tokens int
	table := func(title string, parts []deploy.PartInfo) {
		fmt.Fprintln(tw, title)
		row("ORDER", "NAME", "OWNER", "BYTES", "TOKENS", "VARIABLES")
		for _, s := range parts {
			vars := "-"
			if len(s.Variables) > 0 {
				vars = strings.Join(s.Variables, ",")
			}
			row(fmt.Sprint(s.Order), s.Name, ownerText(s.Owner), fmt.Sprint(s.Bytes), fmt.Sprint(s.Tokens), vars)
			bytes += s.Bytes
			tokens += s.Tokens
		}
	}
	table("SECTIONS", p.Sections)
	fmt.Fprintln(tw, "")
	table("TOOLS", p.ToolInfo)
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nsystem prompt: %d bytes, ~%d tokens; sections and tools: %d bytes, ~%d tokens\n",
		len(p.System), (len(p.System)+3)/4, bytes, tokens)
	return err
}

func ownerText(o string) string {
	if o == "" {
		return "(assemble hook)"
	}
	return o
}
