package deploy

import (
	"context"
	"fmt"

	"github.com/dsh-wasm/dsh-wasm/guests"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/deepseek"
	"github.com/dsh-wasm/dsh-wasm/runtime/redact"
)

// Open reads the deployment file at path and opens it (OpenConfig).
func Open(ctx context.Context, path string, extra Options) (*Deployment, error) {
	cfg, err := config.LoadDeployment(path)
	if err != nil {
		return nil, err
	}
	return OpenConfig(ctx, cfg, extra)
}

// OpenConfig opens a decoded deployment file. extra adds what only Go can
// give: native tools and sections, a logger, a cache, a provider of the
// embedder's own. Its Model, Persona, SessionsDir, Compaction and Limits,
// when set, override the file's; its Plugins load after the file's.
//
// The live provider is the file's provider section, made at the first
// session that needs it, so a missing key fails only that session, with
// an error naming the environment variable.
//
// A builtin:facts entry without a config gets this host's facts
// (platform and time zone), which a Wasm guest cannot learn itself.
func OpenConfig(ctx context.Context, cfg *config.Deployment, extra Options) (*Deployment, error) {
	opts, err := optionsFromConfig(cfg)
	if err != nil {
		return nil, err
	}
	if extra.Model != "" {
		opts.Model = extra.Model
	}
	if extra.Persona != "" {
		opts.Persona = extra.Persona
	}
	if extra.Provider != nil || extra.NewProvider != nil {
		opts.Provider, opts.NewProvider = extra.Provider, extra.NewProvider
	}
	if extra.SessionsDir != "" {
		opts.SessionsDir = extra.SessionsDir
	}
	if extra.Store != nil {
		opts.Store = extra.Store
	}
	if extra.Tenants != "" {
		opts.Tenants = extra.Tenants
	}
	if extra.Compaction != nil {
		opts.Compaction = extra.Compaction
	}
	if extra.Limits != (Limits{}) {
		opts.Limits = extra.Limits
	}
	if extra.SubagentDepth != 0 {
		opts.SubagentDepth = extra.SubagentDepth
	}
	opts.ACPProviders = append(opts.ACPProviders, extra.ACPProviders...)
	opts.Plugins = append(opts.Plugins, extra.Plugins...)
	opts.Sections, opts.Tools = extra.Sections, extra.Tools
	opts.MaxSteps, opts.Logger, opts.Builtins, opts.Cache = extra.MaxSteps, extra.Logger, extra.Builtins, extra.Cache
	// The file names the secrets (config.Deployment.SecretEnv); a caller
	// that knows more of them (serve's tokens) passes its own Redactor,
	// built from the same list.
	opts.Redactor = extra.Redactor
	if opts.Redactor == nil {
		opts.Redactor = redact.New(cfg.Secrets(nil)...)
	}
	return New(ctx, opts)
}

func optionsFromConfig(cfg *config.Deployment) (Options, error) {
	opts := Options{
		Model:       cfg.Model,
		Persona:     cfg.Persona,
		SessionsDir: cfg.Sessions,
		Limits: Limits{AssemblyTimeout: cfg.Limits.AssemblyTimeout, PromptBytes: int64(cfg.Limits.PromptBytes),
			StepOutputBytes: int64(cfg.Limits.StepOutputBytes), StepOutputTime: cfg.Limits.StepOutputTime,
			ToolArgumentBytes: int64(cfg.Limits.ToolArgumentBytes)},
	}
	if cfg.Serve != nil {
		opts.Tenants = cfg.Serve.Workspaces
	}
	opts.SubagentDepth = cfg.Subagents.MaxDepth
	for _, a := range cfg.Subagents.ACP {
		opts.ACPProviders = append(opts.ACPProviders, ACPProviderOptions{Name: a.Name, Command: a.Command, AllowPermissions: a.AllowPermissions})
	}
	for _, p := range cfg.Plugins {
		e := p.Entry
		if name, ok := e.Builtin(); ok && name == "facts" && len(e.Config) == 0 {
			hf := guests.HostFacts()
			e.Config = map[string]any{"platform": hf.Platform}
			if hf.Timezone != "" {
				e.Config["timezone"] = hf.Timezone
			}
		}
		spec, err := PluginSpecFromEntry(p.Name, e)
		if err != nil {
			return Options{}, fmt.Errorf("%s:%d: plugin %s: %w", cfg.File, p.Line, p.Source, err)
		}
		opts.Plugins = append(opts.Plugins, spec)
	}
	if c := cfg.Compaction; c != nil {
		opts.Compaction = &CompactionOptions{ContextWindow: c.ContextWindow, TriggerRatio: c.TriggerRatio,
			RetainTokens: c.RetainTokens, Instructions: c.Instructions}
	}
	dc := providerOptions(cfg)
	opts.NewProvider = func() (model.Provider, error) {
		p, err := deepseek.New(dc)
		if err != nil {
			return nil, fmt.Errorf("%s: provider: %w", cfg.File, err)
		}
		return p, nil
	}
	return opts, nil
}

// providerOptions translates the deployment file's provider section, the
// one YAML shape of the provider, into the provider's Go options.
func providerOptions(cfg *config.Deployment) deepseek.Options {
	pc := cfg.Provider
	o := deepseek.Options{
		BaseURL:         pc.BaseURL,
		APIKeyEnv:       pc.APIKeyEnv,
		Model:           cfg.Model,
		Thinking:        deepseek.ThinkingMode(pc.Thinking),
		ReasoningEffort: pc.ReasoningEffort,
		HeaderTimeout:   pc.HeaderTimeout,
		IdleTimeout:     pc.IdleTimeout,
	}
	if pc.MaxRetries != nil {
		o.MaxRetries = *pc.MaxRetries
		if o.MaxRetries == 0 {
			o.MaxRetries = -1 // the file's 0 disables retries; Options' 0 is the default
		}
	}
	return o
}
