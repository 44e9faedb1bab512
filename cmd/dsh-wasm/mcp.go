package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dsh-wasm/dsh-wasm/internal/frontend/mcpserver"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

// defaultTokenEnv is the environment variable the HTTP transport's bearer
// tokens are read from; a token is never taken from the command line,
// where other users' ps would show it.
const defaultTokenEnv = "DSH_WASM_MCP_TOKEN"

func newMCPCmd(s streams) *cobra.Command {
	var df deploymentFlags
	var cwd, listen, tokenEnv string
	var allowHosts, allowOrigins []string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "mcp --config FILE [--cwd DIR] [--listen ADDR]",
		Short: "Serve a deployment's Wasm tools as a Model Context Protocol server",
		Long: `MCP serves the tools of the deployment in --config to MCP clients (Claude
Desktop, Cursor, Codex, …), with the names, descriptions and input schemas
that "dsh-wasm tools" prints. Each MCP session is its own agent: its own
plugin instances and state, under the plugins' grants, call timeouts and
memory limits. A client's cancellation interrupts the guest. The plugins'
prompt sections are offered as MCP prompts (tool:bash, …).

--cwd DIR is the workspace: what "workspace" fs grants resolve to (default:
the current directory).

Without --listen the server speaks on standard input and output, which
carry protocol frames only; logs go to standard error and, during a call,
to the calling client as notifications/message at the level it chose.

--listen ADDR serves streamable HTTP at ADDR (e.g. 127.0.0.1:8765; a
bare port or ":PORT" binds loopback, every interface needs 0.0.0.0 or ::).
Loopback addresses serve without a token; any other address needs bearer
tokens in the environment variable --token-env names (default
` + defaultTokenEnv + `; comma-separated for several), which loopback then
requires too. A session is tied to the token that opened it. Requests
whose Host is not this server's, or whose Origin is another site's, are
refused (DNS rebinding); --allow-host and --allow-origin add names.

Exit status: 0 when the client disconnected or on SIGINT/SIGTERM; 1 the
deployment or the listener failed; 2 usage.`,
		Example: `  dsh-wasm mcp --config examples/coding-agent/dsh.yml --cwd ~/src/project
  DSH_WASM_MCP_TOKEN=$(openssl rand -hex 32) dsh-wasm mcp --config dsh.yml --listen 0.0.0.0:8765`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmdContext(cmd)
			var tokens []string
			for _, t := range strings.Split(os.Getenv(tokenEnv), ",") {
				if t = strings.TrimSpace(t); t != "" {
					tokens = append(tokens, t)
				}
			}
			if listen != "" {
				var err error
				if listen, err = loopbackByDefault(listen); err != nil {
					return err
				}
				if err := mcpserver.CheckListen(listen, tokens); err != nil {
					return usagef("--listen %s: needs a bearer token in $%s: anyone who reaches a non-loopback port could run the deployment's tools", listen, tokenEnv)
				}
			}
			if cwd == "" {
				wd, err := os.Getwd()
				if err != nil {
					return fmt.Errorf("the workspace: %w", err)
				}
				cwd = wd
			}
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelDebug
			}
			logs := mcpserver.NewLogHandler(slog.NewTextHandler(s.err, &slog.HandlerOptions{Level: level}))
			logger := slog.New(logs)
			d, err := df.open(ctx, s.g, logger, tokens...)
			if err != nil {
				return err
			}
			defer d.Close(context.WithoutCancel(ctx))
			d.compileInBackground(logger)
			srv, err := mcpserver.New(ctx, mcpserver.Options{Deployment: d.Deployment, Workspace: cwd,
				Name: "dsh-wasm", Version: version(), Logger: logger})
			if err != nil {
				return err
			}
			defer srv.Close(context.WithoutCancel(ctx))
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			if listen == "" {
				err := srv.Serve(ctx, s.in, s.out)
				if ctx.Err() != nil || errors.Is(err, context.Canceled) {
					return nil
				}
				return err
			}
			return serveMCPHTTP(ctx, s, srv, listen, d.cfg.HTTP, mcpserver.HTTPOptions{Tokens: tokens,
				AllowedHosts: allowHosts, AllowedOrigins: allowOrigins})
		},
	}
	df.add(cmd, false)
	cmd.Flags().StringVar(&cwd, "cwd", "", "the workspace `DIR` that workspace grants resolve to (default: the current directory)")
	cmd.Flags().StringVar(&listen, "listen", "", "serve streamable HTTP on `ADDR` (host:port) instead of stdio")
	cmd.Flags().StringVar(&tokenEnv, "token-env", defaultTokenEnv, "the environment variable `NAME` holding the HTTP bearer tokens")
	cmd.Flags().StringArrayVar(&allowHosts, "allow-host", nil, "a further `NAME` the HTTP Host header may carry")
	cmd.Flags().StringArrayVar(&allowOrigins, "allow-origin", nil, "a further `ORIGIN` (scheme://host:port) HTTP requests may come from")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "write debug logs to standard error")
	return cmd
}

// loopbackByDefault completes a listen address without a host (":8765",
// "8765") to loopback: serving every interface must be asked for by
// name (0.0.0.0, ::).
func loopbackByDefault(addr string) (string, error) {
	if !strings.Contains(addr, ":") {
		addr = ":" + addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return "", usagef("--listen %q: want HOST:PORT or PORT", addr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// serveMCPHTTP listens on addr and serves until ctx ends. A line on
// standard error names the address bound (a :0 port resolved).
func serveMCPHTTP(ctx context.Context, s streams, srv *mcpserver.Server, addr string, lim config.HTTP, opts mcpserver.HTTPOptions) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	opts.Addr = ln.Addr().String()
	if host, _, _ := net.SplitHostPort(addr); host == "localhost" {
		_, port, _ := net.SplitHostPort(opts.Addr)
		opts.Addr = net.JoinHostPort("localhost", port)
	}
	h, err := srv.HTTPHandler(opts)
	if err != nil {
		ln.Close()
		return err
	}
	hs, capped := newHTTPServer(ln, h, lim)
	fmt.Fprintf(s.err, "dsh-wasm: MCP on http://%s/\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(capped) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve MCP over HTTP: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	return nil
}
