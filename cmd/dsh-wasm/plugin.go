package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/guests"
	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
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
	cmd.AddCommand(newPluginCallCmd(s))
	cmd.AddCommand(newPluginNewCmd(s))
	return cmd
}

func builtinList() string {
	names := deploy.BuiltinPlugins(guests.All())
	for i, n := range names {
		names[i] = "builtin:" + n
	}
	return strings.Join(names, ", ")
}

func newPluginInspectCmd(s streams) *cobra.Command {
	var sets []string
	var deployment string
	var verbose, render bool
	cmd := &cobra.Command{
		Use:   "inspect [--set KEY=VALUE]... SOURCE | inspect --config FILE NAME",
		Short: "Load a plugin in a throw-away host and print what it contributes",
		Long: `Inspect loads the plugin at SOURCE (a .wasm file, or builtin:NAME) in a
throw-away host with a fresh prompt registry, runs its dsh_init, and prints
what it registered as JSON:

  name           the plugin's name, derived from SOURCE
  sha256         the module's digest, as a config entry's sha256 pin
  abi            the dsh:host ABI version the plugin speaks (0 for a
                 community plugin)
  plugin_abi     dsh, or the community ABI detected: hyper-mcp-v1,
                 hyper-mcp-v2 or mcp-run
  sections       [{name, order, dynamic, text}] (text of static sections)
  variables      [name]
  tools          [{name, description, parameters}]
  subscriptions  [{event, mode}]
  capabilities   what the plugin declared it needs: {fs, exec, net, env}
  prompt_order   [lo, hi], the section orders its grants allow (default
                 [1, 9223372036854775807]: after the persona)
  events         the waterfalls its grants let it join (none by default)
  dangling       [{section, owner, variable}]: references of its static
                 sections that neither the harness nor the plugin provides;
                 another plugin of the deployment must, or the deployment's
                 load fails (with an assemble hook loaded, the render fails)
  exec           if it were granted exec, what this machine holds its
                 commands to with the default limits: {mode (the kill
                 mode), processes, memory, file_bytes (each {limit, by} or
                 {limit, unenforced: why}), capabilities, agent_proc, scope}
  bounds         the limits it runs under and its quota use: memory, call,
                 init and wall-clock timeouts, host bytes per call, prompt
                 bytes (and those its registrations hold), log bytes per
                 minute, registrations, state per session (docs/SECURITY.md)
  log            what the plugin logged at info level and above while it
                 loaded, as "LEVEL message" (why it left a tool out, say);
                 absent when it logged nothing

The host registers the harness's sections and variables first, as a
deployment does, so a plugin claiming one of their names is refused.
Nothing is granted, and a plugin is never refused for its needs: they are
reported under capabilities. Inspect also assembles the prompt once for an
agent in the current directory, so a section or variable export that
answers bad output (a wrong status byte, say) fails inspect; any other
assembly failure is reported as assembly_error. --render adds
variable_values (null when a variable has no value) and rendered_sections,
the plugin's sections rendered strictly.

--set KEY=VALUE sets one key of the plugin's config object. VALUE is
taken as JSON when it is valid JSON (42, true, "x", [1], {"a":1}) and as a
string otherwise; a key may be given once. Without --set the plugin gets {}.

With --config FILE, NAME is a plugin of that deployment file: it is loaded
with its config from the file, and the report adds what the deployment
grants it (grants: fs, exec, net, env, session events...), the quotas it
runs under (limits: memory, call and init timeouts) and refusals: each
declared need its grants do not cover, which would refuse it at load.

Exit status: 0 inspected; 1 the plugin was refused (unreadable source, not
a dsh:host/v1 module, failing init); 2 usage.`,
		Example: `  dsh-wasm plugin inspect builtin:facts
  dsh-wasm plugin inspect --set platform=linux/amd64 --set timezone=UTC builtin:facts
  dsh-wasm plugin inspect ./my-plugin.wasm --set 'tools=["echo"]'
  dsh-wasm plugin inspect --config examples/coding-agent/dsh.yml tool-bash`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Warnings and errors a plugin logs while it loads (a hook
			// file's skipped group, say) are always shown; -v shows the
			// rest.
			logger := slog.New(slog.NewTextHandler(s.err, &slog.HandlerOptions{Level: slog.LevelWarn}))
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
				report, err := inspectDeployed(ctx, s.g, deployment, args[0], logger, render)
				if err != nil {
					return err
				}
				return writeJSON(s.out, report)
			}
			config, err := configObject(sets)
			if err != nil {
				return err
			}
			report, err := inspectPlugin(ctx, s.g, deploy.PluginSpec{Source: args[0], Config: config, Inspect: true}, logger, render)
			if err != nil {
				return err
			}
			return writeJSON(s.out, report)
		},
	}
	cmd.Flags().StringArrayVar(&sets, "set", nil, "set config key `KEY=VALUE`; VALUE is JSON if valid, else a string (repeatable)")
	cmd.Flags().StringVar(&deployment, "config", "", "inspect plugin NAME of the deployment `FILE`")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "write the plugin's whole log to standard error (errors are always written)")
	cmd.Flags().BoolVar(&render, "render", false, "also print the variables' values and the plugin's rendered sections")
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
	PluginABI     string                     `json:"plugin_abi"`
	Sections      []inspectSection           `json:"sections"`
	Variables     []string                   `json:"variables"`
	Tools         []prompt.Tool              `json:"tools"`
	Subscriptions []hostfns.SubscribeRequest `json:"subscriptions"`
	Capabilities  hostfns.Capabilities       `json:"capabilities"`
	PromptOrder   [2]int                     `json:"prompt_order"`
	Events        []string                   `json:"events"`
	Dangling      []prompt.Dangling          `json:"dangling"`
	// Exec is what this machine holds commands to under the default exec
	// limits, apart from the kill mode (deploy.ExecEnforced).
	Exec          deploy.ExecEnforcement `json:"exec"`
	AssemblyError string                 `json:"assembly_error,omitempty"`
	Bounds        deploy.PluginBounds    `json:"bounds"`
	// Log is what the plugin logged at info and above while it loaded.
	Log []string `json:"log,omitempty"`
	*deploy.PluginRender
}

type inspectSection struct {
	Name    string `json:"name"`
	Order   int    `json:"order"`
	Dynamic bool   `json:"dynamic"`
	Text    string `json:"text,omitempty"`
}

// inspectPlugin loads spec in a host of its own (a one-plugin deployment:
// cliHost), closed before returning, compiling through the cache the
// global flags choose.
func inspectPlugin(ctx context.Context, g *globals, spec deploy.PluginSpec, logger *slog.Logger, render bool) (_ *inspectReport, err error) {
	col := &loadLog{next: logger.Handler(), lines: new([]string)}
	d, closeHost, err := cliHost(ctx, g, slog.New(col))
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := closeHost(); cerr != nil && err == nil {
			err = fmt.Errorf("close plugin host: %w", cerr)
		}
	}()
	p, err := d.LoadPlugin(ctx, spec)
	if err != nil {
		return nil, err
	}
	r := reportOf(p)
	r.Log = *col.lines
	rr, err := d.RenderPlugin(ctx, p.Name, cliAgent("inspect"))
	switch {
	case errors.Is(err, deploy.ErrPluginBadOutput):
		return nil, err
	case err != nil:
		r.AssemblyError = err.Error()
	case render:
		r.PluginRender = rr
	}
	return r, nil
}

// loadLog passes records on to next and keeps the messages at info
// level and above of the records a plugin logged (those with a plugin
// attribute): what inspect reports as log.
type loadLog struct {
	next   slog.Handler
	plugin bool
	lines  *[]string
}

func (l *loadLog) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= slog.LevelInfo || l.next.Enabled(ctx, level)
}

func (l *loadLog) Handle(ctx context.Context, r slog.Record) error {
	if l.plugin && r.Level >= slog.LevelInfo {
		*l.lines = append(*l.lines, r.Level.String()+" "+r.Message)
	}
	if l.next.Enabled(ctx, r.Level) {
		return l.next.Handle(ctx, r)
	}
	return nil
}

func (l *loadLog) WithAttrs(as []slog.Attr) slog.Handler {
	c := *l
	c.next = l.next.WithAttrs(as)
	for _, a := range as {
		c.plugin = c.plugin || a.Key == "plugin"
	}
	return &c
}

func (l *loadLog) WithGroup(name string) slog.Handler {
	c := *l
	c.next = l.next.WithGroup(name)
	return &c
}

// reportOf describes a loaded plugin.
func reportOf(p *deploy.PluginReport) *inspectReport {
	r := &inspectReport{
		Name:          p.Name,
		SHA256:        "sha256:" + p.Digest,
		PluginABI:     p.ABI,
		Sections:      make([]inspectSection, 0, len(p.Sections)),
		Variables:     p.Variables,
		Tools:         p.Tools,
		Subscriptions: p.Subscriptions,
		Capabilities:  p.Capabilities,
		Bounds:        p.Bounds,
		PromptOrder:   p.PromptOrder,
		Events:        p.Events,
		Dangling:      p.Dangling,
		Exec:          deploy.ExecEnforced(),
		ABI:           p.ABIVersion,
	}
	if r.Events == nil {
		r.Events = []string{}
	}
	if r.Dangling == nil {
		r.Dangling = []prompt.Dangling{}
	}
	for _, s := range p.Sections {
		r.Sections = append(r.Sections, inspectSection{Name: s.Name, Order: s.Order, Dynamic: s.Dynamic, Text: s.Text})
	}
	return r
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
