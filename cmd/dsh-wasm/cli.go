package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/redact"
)

// usageError marks an error as the caller's misuse of the command line.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// streams are the process's standard streams, passed down explicitly so
// that tests run commands in-process.
type streams struct {
	in       io.Reader
	out, err io.Writer
	g        *globals
}

// globals are the root command's persistent flags, and the invocation's
// standard error.
type globals struct {
	cacheDir string
	noCache  bool
	// stderr is the process's standard error with the deployment's
	// secrets redacted once a command has read the deployment (secrets);
	// nil when the streams were given without one (tests of one command).
	stderr *secretWriter
}

// secretWriter is standard error: every log line, diagnostic and the
// final error of the invocation pass through it. Until the deployment is
// read it passes bytes through; then it redacts them with the
// deployment's Redactor, holding back a tail that may begin a secret
// until the next write or Flush.
type secretWriter struct {
	w  io.Writer
	mu sync.Mutex
	rw *redact.Writer
}

func (s *secretWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	rw := s.rw
	s.mu.Unlock()
	if rw == nil {
		return s.w.Write(p)
	}
	return rw.Write(p)
}

// Flush writes what is held back.
func (s *secretWriter) Flush() error {
	s.mu.Lock()
	rw := s.rw
	s.mu.Unlock()
	if rw == nil {
		return nil
	}
	return rw.Flush()
}

// secrets makes standard error redact r's secrets from now on.
func (g *globals) secrets(r *redact.Redactor) {
	if g.stderr == nil || r.Empty() {
		return
	}
	g.stderr.mu.Lock()
	defer g.stderr.mu.Unlock()
	g.stderr.rw = r.Writer(g.stderr.w)
}

// openCache opens the compilation cache the flags and environment choose:
// --no-cache (or DSH_WASM_CACHE=off) compiles every time, --cache-dir (or
// DSH_WASM_CACHE_DIR) names the directory, and the default is under the
// user cache dir. A cache that cannot be opened falls back to memory:
// nothing the CLI does may depend on a writable cache.
func (g *globals) openCache(logger *slog.Logger) *deploy.Cache {
	if g.noCache {
		return deploy.NoCache()
	}
	var c *deploy.Cache
	var err error
	if g.cacheDir != "" {
		c, err = deploy.NewCache(g.cacheDir)
	} else {
		c, err = deploy.DefaultCache()
	}
	if err != nil {
		logger.Warn("compilation cache unavailable; compiling in memory", "err", err)
		c, _ = deploy.NewCache("")
	}
	return c
}

func newRoot(s streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "dsh-wasm",
		Short: "Run AI agents whose tools are sandboxed WebAssembly plugins",
		Long: `dsh-wasm runs AI agents. Their tools and prompt contributors are
WebAssembly plugins that can do only what the operator grants them.`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	if s.g == nil {
		s.g = &globals{}
	}
	root.PersistentFlags().StringVar(&s.g.cacheDir, "cache-dir", "", "compilation cache `DIR` (default $"+deploy.EnvCacheDir+" or the user cache dir)")
	root.PersistentFlags().BoolVar(&s.g.noCache, "no-cache", false, "compile plugins every time; do not read or write the compilation cache")
	root.AddCommand(newRenderCmd(s))
	root.AddCommand(newPluginCmd(s))
	root.AddCommand(newRunCmd(s))
	root.AddCommand(newACPCmd(s))
	root.AddCommand(newPromptCmd(s))
	root.AddCommand(newToolsCmd(s))
	root.AddCommand(newServeCmd(s))
	root.AddCommand(newSessionCmd(s))
	root.AddCommand(newMCPCmd(s))
	return root
}

// run executes the command line args and returns the exit status.
func run(args []string, in io.Reader, out, errOut io.Writer) int {
	stderr := &secretWriter{w: errOut}
	defer stderr.Flush()
	errOut = stderr
	root := newRoot(streams{in: in, out: out, err: errOut, g: &globals{stderr: stderr}})
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	var ue usageError
	// Cobra reports an unknown subcommand itself, as a plain error.
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command") {
		fmt.Fprintf(errOut, "error: %s (see '%s --help')\n", oneLine(err.Error()), cmd.CommandPath())
		return 2
	}
	fmt.Fprintln(errOut, "error: "+oneLine(err.Error()))
	return 1
}

// usageArgs wraps a positional-argument validator so that its failures are
// usage errors.
func usageArgs(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := v(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

func oneLine(s string) string {
	return strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(s)
}
