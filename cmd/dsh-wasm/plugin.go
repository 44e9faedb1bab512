package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/guests"
	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/plugin"
	"github.com/spf13/cobra"
)

func newPluginCmd(s streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugin",
		Short: "Work with WebAssembly plugins",
		Long: `Work with dsh:host/v1 WebAssembly plugins. A plugin's SOURCE is a path
to a .wasm file or builtin:NAME for a plugin compiled into dsh-wasm (` + builtinList() + `).`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newPluginInspectCmd(s))
	return cmd
}

func builtinList() string {
	names := plugin.Builtins(guests.FS)
	for i, n := range names {
		names[i] = "builtin:" + n
	}
	return strings.Join(names, ", ")
}

func newPluginInspectCmd(s streams) *cobra.Command {
	var sets []string
	var deployment string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "inspect [--set KEY=VALUE]... SOURCE | inspect --config FILE NAME",
		Short: "Load a plugin in a throw-away host and print what it contributes",
		Long: `Inspect loads the plugin at SOURCE (a .wasm file, or builtin:NAME) in a
throw-away host with a fresh prompt registry, runs its dsh_init, and prints
what it registered as JSON:

  name           the plugin's name, derived from SOURCE
  sha256         the module's digest, as a config entry's sha256 pin
  abi            the dsh:host ABI version the plugin speaks
  sections       [{name, order, dynamic, text}] (text of static sections)
  variables      [name]
  tools          [{name, description, parameters}]
  subscriptions  [{event, mode}]
  capabilities   what the plugin declared it needs: {fs, exec, net, env}

Nothing is granted, and a plugin is never refused for its needs: they are
reported under capabilities.

--set KEY=VALUE sets one key of the plugin's config object. VALUE is
taken as JSON when it is valid JSON (42, true, "x", [1], {"a":1}) and as a
string otherwise; a key may be given once. Without --set the plugin gets {}.

With --config FILE, NAME is a plugin of that deployment file: it is loaded
with its config from the file, and the report adds what the deployment
grants it (grants: fs, exec, net, env, session events), the quotas it runs
under (limits: memory, call and init timeouts) and refusals: each declared
need its grants do not cover, which would refuse the plugin at load.

Exit status: 0 inspected; 1 the plugin was refused (unreadable source, not
a dsh:host/v1 module, failing init); 2 usage.`,
		Example: `  dsh-wasm plugin inspect builtin:facts
  dsh-wasm plugin inspect --set platform=linux/amd64 --set timezone=UTC builtin:facts
  dsh-wasm plugin inspect ./my-plugin.wasm --set 'tools=["echo"]'
  dsh-wasm plugin inspect --config examples/coding-agent/dsh.yml tool-bash`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Errors a plugin logs while it loads (a malformed hook
			// file, say) are always shown; -v shows the rest.
			logger := slog.New(slog.NewTextHandler(s.err, &slog.HandlerOptions{Level: slog.LevelError}))
			if verbose {
				logger = slog.New(slog.NewTextHandler(s.err, &slog.HandlerOptions{Level: slog.LevelDebug}))
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if deployment != "" {
				if len(sets) > 0 {
					return usagef("--set and --config FILE do not mix: the deployment file gives the plugin its config")
				}
				report, err := inspectDeployed(ctx, s.g, deployment, args[0], logger)
				if err != nil {
					return err
				}
				return writeJSON(s.out, report)
			}
			config, err := configObject(sets)
			if err != nil {
				return err
			}
			report, err := inspectPlugin(ctx, s.g, plugin.Spec{Source: args[0], Config: config, Inspect: true}, logger)
			if err != nil {
				return err
			}
			return writeJSON(s.out, report)
		},
	}
	cmd.Flags().StringArrayVar(&sets, "set", nil, "set config key `KEY=VALUE`; VALUE is JSON if valid, else a string (repeatable)")
	cmd.Flags().StringVar(&deployment, "config", "", "inspect plugin NAME of the deployment `FILE`")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "write the plugin's whole log to standard error (errors are always written)")
	return cmd
}

// configObject builds the plugin's config object from --set KEY=VALUE
// flags; nil when there are none (the host then passes {}).
func configObject(kvs []string) (json.RawMessage, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	obj := make(map[string]json.RawMessage, len(kvs))
	for _, kv := range kvs {
		key, value, ok := strings.Cut(kv, "=")
		if !ok || key == "" {
			return nil, usagef("--set %q: want KEY=VALUE", kv)
		}
		if _, dup := obj[key]; dup {
			return nil, usagef("--set %q: key %q is given more than once", kv, key)
		}
		if json.Valid([]byte(value)) {
			obj[key] = json.RawMessage(value)
			continue
		}
		b, err := json.Marshal(value)
		if err != nil {
			return nil, fmt.Errorf("--set %q: encode value: %w", kv, err)
		}
		obj[key] = b
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	return b, nil
}

// inspectReport is what inspect prints.
type inspectReport struct {
	Name          string                     `json:"name"`
	SHA256        string                     `json:"sha256"`
	ABI           int                        `json:"abi"`
	Sections      []inspectSection           `json:"sections"`
	Variables     []string                   `json:"variables"`
	Tools         []inspectTool              `json:"tools"`
	Subscriptions []hostfns.SubscribeRequest `json:"subscriptions"`
	Capabilities  hostfns.Capabilities       `json:"capabilities"`
}

type inspectSection struct {
	Name    string `json:"name"`
	Order   int    `json:"order"`
	Dynamic bool   `json:"dynamic"`
	Text    string `json:"text,omitempty"`
}

type inspectTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// inspectPlugin loads spec alone in a deployment of its own, as it would
// load in any deployment (after the harness's sections and variables),
// closed before returning, compiling through the cache the global flags
// choose.
func inspectPlugin(ctx context.Context, g *globals, spec plugin.Spec, logger *slog.Logger) (_ *inspectReport, err error) {
	cache := g.openCache(logger)
	d, err := deploy.New(ctx, deploy.Options{Logger: logger, Cache: cache, Plugins: []plugin.Spec{spec},
		SessionsDir: os.TempDir()}) // no session is made
	if err != nil {
		cache.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	defer func() {
		bg := context.WithoutCancel(ctx)
		if cerr := errors.Join(d.Close(bg), cache.Close(bg)); cerr != nil && err == nil {
			err = fmt.Errorf("close the inspection: %w", cerr)
		}
	}()
	name := spec.Name
	if name == "" {
		name = plugin.NameFromSource(spec.Source)
	}
	p := d.Host().Plugin(name)
	if p == nil {
		return nil, fmt.Errorf("plugin %q did not stay loaded", name)
	}
	c := p.Contribution()
	r := &inspectReport{
		Name:          p.Name(),
		SHA256:        "sha256:" + p.Digest(),
		ABI:           hostfns.ABIVersion, // Load refuses any other version
		Sections:      make([]inspectSection, 0, len(c.Sections)),
		Variables:     c.Variables,
		Tools:         make([]inspectTool, 0, len(c.Tools)),
		Subscriptions: c.Subscriptions,
		Capabilities:  p.Capabilities(),
	}
	for _, s := range c.Sections {
		r.Sections = append(r.Sections, inspectSection{Name: s.Name, Order: s.Order, Dynamic: s.Dynamic, Text: s.Text})
	}
	for _, t := range c.Tools {
		r.Tools = append(r.Tools, inspectTool{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	return r, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
