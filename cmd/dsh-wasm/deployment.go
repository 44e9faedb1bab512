package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dsh-wasm/dsh-wasm/guests"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/redact"
)

// deploymentFlags are the flags of every command that reads a deployment
// file.
type deploymentFlags struct {
	config  string
	baseURL string
}

func (f *deploymentFlags) add(cmd *cobra.Command, withBaseURL bool) {
	cmd.Flags().StringVar(&f.config, "config", "", "the deployment `FILE` (YAML)")
	if withBaseURL {
		cmd.Flags().StringVar(&f.baseURL, "base-url", "", "the model API's base `URL`, overriding provider.base_url")
	}
}

// opened is an open deployment and the compilation cache it uses.
type opened struct {
	*deploy.Deployment
	cfg   *config.Deployment
	cache interface{ Close(context.Context) error }
	// stopCompile stops compileInBackground and waits for it.
	stopCompile func()
}

// Close closes the deployment, then its cache.
func (o *opened) Close(ctx context.Context) error {
	if o.stopCompile != nil {
		o.stopCompile()
	}
	return errors.Join(o.Deployment.Close(ctx), o.cache.Close(ctx))
}

// compileInBackground compiles the plugins that loaded lazily, one at a
// time, while the command goes on: a command that runs agents would
// otherwise pay each plugin's compilation at its first tool call. Close
// stops it (after the compilation under way). Failures are logged; the
// plugin's first call reports them too.
func (o *opened) compileInBackground(logger *slog.Logger) {
	o.stopCompile = compileInBackground(o.Deployment, logger)
}

// compileInBackground starts h.CompileAll and returns what stops it and
// waits for it, at most compileStopWait.
func compileInBackground(d *deploy.Deployment, logger *slog.Logger) (stop func()) {
	return runInBackground(d.Compile, compileStopWait, logger)
}

// compileStopWait bounds how long a command that ends waits for a
// compilation under way: wazero cannot stop one, and the process is about
// to end.
const compileStopWait = time.Second

// runInBackground runs compile until it returns or stop is called; stop
// cancels it and waits for it at most wait. A failure is logged unless
// stop caused it.
func runInBackground(compile func(context.Context) error, wait time.Duration, logger *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := compile(ctx); err != nil && ctx.Err() == nil {
			logger.Warn("compile plugins in the background", "err", err)
		}
	}()
	return func() {
		cancel()
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		}
	}
}

// open reads the deployment file and opens it: plugins loaded, nothing
// else started. Diagnostics go to logger (standard error). From here on
// standard error redacts the secrets the file names, and those given
// (a command's own tokens).
func (f *deploymentFlags) open(ctx context.Context, g *globals, logger *slog.Logger, secrets ...string) (*opened, error) {
	if f.config == "" {
		return nil, usagef("--config FILE is required: the deployment to run")
	}
	cfg, err := config.LoadDeployment(f.config)
	if err != nil {
		return nil, err
	}
	if f.baseURL != "" {
		if !strings.HasPrefix(f.baseURL, "http://") && !strings.HasPrefix(f.baseURL, "https://") {
			return nil, usagef("--base-url %q: want an http:// or https:// URL", f.baseURL)
		}
		cfg.Provider.BaseURL = f.baseURL
	}
	red := g.redactor(cfg, secrets...)
	cache := g.openCache(logger)
	d, err := deploy.OpenConfig(ctx, cfg, deploy.Options{Logger: logger, Cache: cache, Redactor: red, Builtins: guests.All()})
	if err != nil {
		cache.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("open %s: %w", f.config, err)
	}
	return &opened{Deployment: d, cfg: cfg, cache: cache}, nil
}

// redactor is the invocation's one Redactor: the secrets cfg names
// (config.Deployment.Secrets) and those the command adds. Standard error
// redacts them from now on; the deployment is given the same Redactor.
func (g *globals) redactor(cfg *config.Deployment, more ...string) *redact.Redactor {
	r := redact.New(append(cfg.Secrets(nil), more...)...)
	g.secrets(r)
	return r
}

// stderrLogger logs warnings and errors to w, or everything with verbose.
func stderrLogger(s streams, verbose bool) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(s.err, &slog.HandlerOptions{Level: level}))
}

func cmdContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// version is the module version the binary was built from, or "dev".
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
