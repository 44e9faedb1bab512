package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// runFlags are run's flags.
type runFlags struct {
	deploymentFlags
	prompt, cwd, model, replay, resume string
	json, verbose                      bool
}

func newRunCmd(s streams) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run --config FILE [-p PROMPT] [--cwd DIR] [--model NAME] [--base-url URL] [--replay FILE] [--resume ID] [--json]",
		Short: "Run an agent of a deployment, interactively or for one prompt",
		Long: `Run starts an agent of the deployment in --config.

Interactive when standard input is a terminal and there is no -p: a
terminal UI with streamed Markdown answers, dimmed reasoning, a card per
tool call and the token usage of each turn. Ctrl-C cancels the running
turn; a second Ctrl-C, or /exit, quits.

Headless with -p PROMPT (or with the prompt on standard input when it is
not a terminal): one turn, the final answer on standard output. With
--json, standard output carries instead one JSON object a line: the
session's header, then each event the turn records, in the session file's
format (see docs/ARCHITECTURE.md), so a consumer parses one schema
everywhere.

--replay FILE answers the model from a recorded session file (with the
child sessions and replay.override.json beside it) instead of the live
provider; standard error says so. Sessions persist under the deployment's
sessions root; --resume ID continues one.

The live provider reads its key from the environment variable the
deployment names (DEEPSEEK_API_KEY by default); a missing key is an error
naming the variable, and only live runs need one.

Exit status: 0 the turn completed; 1 it ended otherwise (error, cancelled,
rejected, max tokens) or the run failed; 2 usage.`,
		Example: `  dsh-wasm run --config examples/coding-agent/dsh.yml
  dsh-wasm run --config examples/coding-agent/dsh.yml -p "List the files here."
  dsh-wasm run --config examples/coding-agent/dsh.yml --replay examples/coding-agent/demo.jsonl -p "…" --json`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAgent(cmdContext(cmd), s, &f)
		},
	}
	f.add(cmd, true)
	cmd.Flags().StringVarP(&f.prompt, "prompt", "p", "", "run one turn on `PROMPT` and exit (headless)")
	cmd.Flags().StringVar(&f.cwd, "cwd", "", "the agent's working `DIR` (default: the current directory)")
	cmd.Flags().StringVar(&f.model, "model", "", "the model `NAME`, overriding the deployment's")
	cmd.Flags().StringVar(&f.replay, "replay", "", "answer from the recorded session `FILE` instead of the live model")
	cmd.Flags().StringVar(&f.resume, "resume", "", "continue the session with this `ID`")
	cmd.Flags().BoolVar(&f.json, "json", false, "headless: print the session's events, one JSON object a line")
	cmd.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "write the plugins' log to standard error")
	return cmd
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func runAgent(ctx context.Context, s streams, f *runFlags) error {
	interactive := f.prompt == "" && isTerminal(s.in)
	if !interactive && f.prompt == "" {
		b, err := io.ReadAll(io.LimitReader(s.in, 1<<20))
		if err != nil {
			return fmt.Errorf("read the prompt from standard input: %w", err)
		}
		f.prompt = strings.TrimSpace(string(b))
		if f.prompt == "" {
			return usagef("no prompt: give -p PROMPT, or a prompt on standard input, or run in a terminal")
		}
	}
	if interactive && f.json {
		return usagef("--json needs -p PROMPT (headless)")
	}
	cwd := f.cwd
	if cwd == "" && f.resume == "" {
		var err error
		if cwd, err = os.Getwd(); err != nil {
			return fmt.Errorf("no working directory: %w", err)
		}
	}
	logger := stderrLogger(s, f.verbose)
	d, err := f.open(ctx, s.g, logger)
	if err != nil {
		return err
	}
	defer d.Close(context.WithoutCancel(ctx))
	d.compileInBackground(logger)
	if f.replay != "" {
		fmt.Fprintf(s.err, "dsh-wasm: the model is a replay of %s; no live model is called\n", f.replay)
	}
	sess, err := d.NewSession(ctx, deploy.SessionOptions{Cwd: cwd, Model: f.model, Resume: f.resume, Replay: f.replay})
	if err != nil {
		return err
	}
	defer sess.Close(context.WithoutCancel(ctx))
	if interactive {
		return runInteractive(ctx, s, sess, f.replay)
	}
	return runHeadless(ctx, s, sess, f)
}

// runHeadless runs one turn. The first interrupt cancels the turn, which
// then ends "aborted"; a second one stops waiting.
func runHeadless(ctx context.Context, s streams, sess *deploy.Session, f *runFlags) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case <-sigs:
			sess.Cancel("interrupted")
		case <-ctx.Done():
			return
		}
		select {
		case <-sigs:
			stop()
		case <-ctx.Done():
		}
	}()

	var printed chan error
	if f.json {
		h, err := json.Marshal(sess.Header())
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(s.out, "%s\n", h); err != nil {
			return err
		}
		stream := sess.Follow()
		printed = make(chan error, 1)
		go func() { printed <- printEvents(ctx, s.out, stream) }()
	} else {
		fmt.Fprintf(s.err, "dsh-wasm: session %s\n", sess.ID())
	}
	res, err := sess.Prompt(ctx, f.prompt)
	// A turn that ran but did not complete (a *deploy.TurnError) prints
	// its events and text like any other; then its error ends the
	// command. Any other error means no turn ran.
	var te *deploy.TurnError
	noTurn := err != nil && !errors.As(err, &te)
	if printed != nil {
		if noTurn {
			stop()
		}
		if perr := <-printed; perr != nil && !noTurn && !errors.Is(perr, context.Canceled) {
			return fmt.Errorf("write events: %w", perr)
		}
	}
	if noTurn {
		return err
	}
	if !f.json && res.Text != "" {
		text := res.Text
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		if _, err := io.WriteString(s.out, text); err != nil {
			return err
		}
	}
	return err
}

// printEvents writes each event as a JSON line until the turn's end.
func printEvents(ctx context.Context, w io.Writer, st *deploy.Stream) error {
	for {
		e, err := st.Next(ctx)
		if err != nil {
			return err
		}
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "%s\n", b); err != nil {
			return err
		}
		if e.Type == session.TypeTurnEnd {
			return nil
		}
	}
}
