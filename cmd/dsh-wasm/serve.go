package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dsh-wasm/dsh-wasm/guests"
	"github.com/dsh-wasm/dsh-wasm/internal/frontend/httpapi"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/session/filestore"
	"github.com/dsh-wasm/dsh-wasm/runtime/session/pgstore"
)

type serveFlags struct {
	deploymentFlags
	listen  string
	verbose bool
}

func newServeCmd(s streams) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve --config FILE --listen ADDR",
		Short: "Serve the deployment's agents over HTTP to many clients",
		Long: `Serve runs the deployment as an HTTP API (see docs/DEPLOY.md):

  POST /v1/sessions               {"cwd": "DIR"}: a session, DIR relative to the tenant's workspace root
  POST /v1/sessions/{id}/prompt   {"text": "..."}: one turn, its events as Server-Sent Events
  POST /v1/sessions/{id}/cancel   cancels the session's running turn, on any worker
  GET  /v1/sessions/{id}          the session as JSONL
  GET  /v1/sessions               the tenant's sessions
  GET  /healthz, /readyz, /metrics

The deployment file's serve section names the workspaces directory and
where the token-to-tenant map is (a file or an environment variable,
never argv). With a store section, sessions live in PostgreSQL, whose
DSN is read from the environment variable it names, and any number of
workers can share them; without one, sessions are JSONL files of this
worker alone.

SIGTERM or SIGINT stops accepting work, waits up to 30s for running
turns, then exits.`,
		Example: `  DSH_DATABASE_URL=postgres://... dsh-wasm serve --config dsh.yml --listen 127.0.0.1:8080`,
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmdContext(cmd), s, &f)
		},
	}
	f.add(cmd, true)
	cmd.Flags().StringVar(&f.listen, "listen", "127.0.0.1:8080", "the `ADDR` to listen on (host:port; port 0 picks one)")
	cmd.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "write the plugins' log to standard error")
	return cmd
}

// openStore opens the store the deployment names: PostgreSQL when it has
// a store section, else nil (the deployment's JSONL store).
func openStore(ctx context.Context, cfg *config.Deployment, opts pgstore.Options) (*pgstore.Store, error) {
	if cfg.Store == nil {
		return nil, nil
	}
	dsn := os.Getenv(cfg.Store.DSNEnv)
	if dsn == "" {
		return nil, fmt.Errorf("%s: store: the environment variable %s (the PostgreSQL DSN) is not set", cfg.File, cfg.Store.DSNEnv)
	}
	opts.LeaseTTL = cfg.Store.LeaseTTL
	st, err := pgstore.Open(ctx, dsn, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: store: %w", cfg.File, err)
	}
	return st, nil
}

func loadTokens(cfg *config.Serve) (map[string]string, error) {
	if cfg.TokensEnv != "" {
		v := os.Getenv(cfg.TokensEnv)
		if v == "" {
			return nil, fmt.Errorf("serve: the environment variable %s (the token-to-tenant map) is not set", cfg.TokensEnv)
		}
		return httpapi.ParseTokens([]byte(v), "$"+cfg.TokensEnv)
	}
	data, err := os.ReadFile(cfg.TokensFile)
	if err != nil {
		return nil, fmt.Errorf("serve: tokens: %w", err)
	}
	return httpapi.ParseTokens(data, cfg.TokensFile)
}

func serve(ctx context.Context, s streams, f *serveFlags) error {
	if f.config == "" {
		return usagef("--config FILE is required: the deployment to serve")
	}
	cfg, err := config.LoadDeployment(f.config)
	if err != nil {
		return err
	}
	if cfg.Serve == nil {
		return fmt.Errorf("%s: no serve section (workspaces and tokens_file or tokens_env)", f.config)
	}
	if f.baseURL != "" {
		cfg.Provider.BaseURL = f.baseURL
	}
	tokens, err := loadTokens(cfg.Serve)
	if err != nil {
		return err
	}
	// The bearer tokens are secrets too, wherever the map came from.
	red := s.g.redactor(cfg, slices.Collect(maps.Keys(tokens))...)
	logger := stderrLogger(s, f.verbose)
	pg, err := openStore(ctx, cfg, pgstore.Options{Logger: logger})
	if err != nil {
		return err
	}
	var store session.Storage
	if pg != nil {
		defer pg.Close()
		store = pg
	}
	cache := s.g.openCache(logger)
	defer cache.Close(context.WithoutCancel(ctx))
	d, err := deploy.OpenConfig(ctx, cfg, deploy.Options{Logger: logger, Cache: cache, Store: store, Redactor: red, Builtins: guests.All()})
	if err != nil {
		return fmt.Errorf("open %s: %w", f.config, err)
	}
	defer d.Close(context.WithoutCancel(ctx))
	defer compileInBackground(d, logger)()
	hc := httpapi.Config{Deployment: d, Workspaces: cfg.Serve.Workspaces, Tokens: tokens,
		MaxTurns: cfg.Serve.MaxTurns, MaxTenantTurns: cfg.Serve.MaxTenantTurns, Logger: logger}
	if pg != nil {
		hc.Canceller, hc.Ready, hc.TenantSlots = pg, pg.Ping, pg.TurnSlots()
	}
	srv, err := httpapi.New(hc)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if pg != nil {
		ready := make(chan struct{})
		lctx, lcancel := context.WithCancel(context.WithoutCancel(ctx))
		defer lcancel()
		go pg.Listen(lctx, ready, func(id, reason string) { srv.CancelLocal(id, reason) })
		select {
		case <-ready:
		case <-time.After(30 * time.Second):
			return errors.New("serve: cannot LISTEN for cancels on the store")
		}
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	storeName := "JSONL"
	if pg != nil {
		storeName = "PostgreSQL"
	}
	fmt.Fprintf(s.err, "dsh-wasm: serving on http://%s (sessions in %s)\n", ln.Addr(), storeName)
	hs, capped := newHTTPServer(ln, srv.Handler(), cfg.HTTP)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(capped) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	srv.Drain()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}

func newSessionCmd(s streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Work with the sessions of a deployment's store",
		Args:  usageArgs(cobra.NoArgs),
	}
	var cfgFile string
	export := &cobra.Command{
		Use:   "export ID --config FILE",
		Short: "Print a session as JSONL, from whichever store the deployment uses",
		Long: `Export prints the session with the given ID as a JSONL session file: the
header line, then one event a line, byte for byte as the JSONL store
writes it, whether the deployment keeps sessions in files or in
PostgreSQL (the DSN is read from the environment variable the file names).`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmdContext(cmd)
			if cfgFile == "" {
				return usagef("--config FILE is required: the deployment whose store holds the session")
			}
			cfg, err := config.LoadDeployment(cfgFile)
			if err != nil {
				return err
			}
			s.g.redactor(cfg)
			pg, err := openStore(ctx, cfg, pgstore.Options{})
			if err != nil {
				return err
			}
			var st session.Storage
			if pg != nil {
				defer pg.Close()
				st = pg
			} else {
				dir := cfg.Sessions
				if dir == "" {
					if dir, err = deploy.DefaultSessionsDir(); err != nil {
						return err
					}
				}
				st = filestore.New(dir, filestore.Options{})
			}
			return st.Export(args[0], s.out)
		},
	}
	export.Flags().StringVar(&cfgFile, "config", "", "the deployment `FILE` (YAML)")
	cmd.AddCommand(export)
	return cmd
}
