package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/spf13/cobra"
)

func newRenderCmd(s streams) *cobra.Command {
	var sets, unsets []string
	cmd := &cobra.Command{
		Use:   "render [--var NAME=VALUE]... [--unset NAME]... [FILE|-]",
		Short: "Render a prompt template with the strict renderer",
		Long: `Render reads a template from FILE, or from standard input when FILE is
"-" or absent, and renders it exactly as an agent's prompt section is
rendered. The template is the only section, called "template"; the only
variables are those given with --var and --unset.

--var NAME=VALUE splits at the first "="; --var NAME= sets the empty
string, which is a value. --unset NAME registers NAME with no value, so a
reference to it fails. The rendered text is written to standard output
exactly, with no newline added.

Exit status: 0 rendered; 1 a render or registration error; 2 usage.`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			source := "-"
			if len(args) == 1 {
				source = args[0]
			}
			vars := make([][2]string, 0, len(sets))
			for _, kv := range sets {
				name, value, ok := strings.Cut(kv, "=")
				if !ok {
					return usagef("--var %q: want NAME=VALUE", kv)
				}
				vars = append(vars, [2]string{name, value})
			}
			text, err := readTemplate(source, s.in)
			if err != nil {
				return err
			}
			out, err := renderTemplate(cmd.Context(), text, vars, unsets)
			if err != nil {
				return err
			}
			_, err = io.WriteString(s.out, out)
			return err
		},
	}
	cmd.Flags().StringArrayVar(&sets, "var", nil, "set variable `NAME=VALUE` (repeatable)")
	cmd.Flags().StringArrayVar(&unsets, "unset", nil, "register variable `NAME` with no value (repeatable)")
	return cmd
}

func readTemplate(source string, stdin io.Reader) (string, error) {
	var b []byte
	var err error
	if source == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(source)
	}
	if err != nil {
		return "", fmt.Errorf("read template: %w", err)
	}
	return string(b), nil
}

func renderTemplate(ctx context.Context, text string, vars [][2]string, unsets []string) (string, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	r := prompt.NewRegistry(nil)
	err := r.Update(func(tx *prompt.Tx) error {
		if _, err := tx.AddSection(prompt.Section{Name: "template", Text: text}); err != nil {
			return err
		}
		for _, kv := range vars {
			value := kv[1]
			if _, err := tx.AddVariable(kv[0], func(context.Context, prompt.AssembleContext) (string, bool, error) {
				return value, true, nil
			}); err != nil {
				return fmt.Errorf("--var: %w", err)
			}
		}
		for _, name := range unsets {
			if _, err := tx.AddVariable(name, func(context.Context, prompt.AssembleContext) (string, bool, error) {
				return "", false, nil
			}); err != nil {
				return fmt.Errorf("--unset: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	a, err := r.Assemble(ctx, prompt.AssembleContext{})
	if err != nil {
		return "", err
	}
	return prompt.Render(a)
}
