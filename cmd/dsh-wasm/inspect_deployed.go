package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
)

// deployedReport is what inspect --config FILE NAME prints: the plugin's
// own report, and what the deployment gives it.
type deployedReport struct {
	*inspectReport
	Source string `json:"source"`
	// Grants are the deployment's grants, as the file spells them.
	Grants map[string]any `json:"grants"`
	// Limits are the quotas the plugin runs under.
	Limits deployedLimits `json:"limits"`
	// Refusals lists each declared need the grants do not cover; a
	// plugin with any is refused at load.
	Refusals []string `json:"refusals"`
}

type deployedLimits struct {
	Memory      string `json:"memory"`
	MemoryPages uint32 `json:"memory_pages"`
	CallTimeout string `json:"call_timeout"`
	InitTimeout string `json:"init_timeout"`
}

// inspectDeployed inspects plugin name of the deployment file.
func inspectDeployed(ctx context.Context, g *globals, file, name string, logger *slog.Logger, render bool) (*deployedReport, error) {
	dep, err := config.LoadDeployment(file)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range dep.Plugins {
		n := p.Name
		if n == "" {
			n = deploy.PluginNameFromSource(p.Source)
		}
		names = append(names, n)
		if n != name {
			continue
		}
		spec, err := deploy.PluginSpecFromEntry(n, p.Entry)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", file, p.Line, err)
		}
		spec.Inspect = true // report refusals instead of failing on them
		r, err := inspectPlugin(ctx, g, spec, logger, render)
		if err != nil {
			return nil, err
		}
		out := &deployedReport{inspectReport: r, Source: p.Source, Refusals: []string{}}
		b, err := yaml.Marshal(p.Grants)
		if err != nil {
			return nil, fmt.Errorf("encode grants: %w", err)
		}
		out.Grants = map[string]any{}
		if err := yaml.Unmarshal(b, &out.Grants); err != nil {
			return nil, fmt.Errorf("encode grants: %w", err)
		}
		l := p.Grants.Limits
		out.Limits = deployedLimits{Memory: l.Memory.String(), MemoryPages: l.MemoryPages(),
			CallTimeout: l.CallTimeout.String(), InitTimeout: l.InitTimeout.String()}
		// The same check a load makes (plugin.checkGrants), over every
		// declared need.
		if err := p.Grants.Check(n, r.Capabilities); err != nil {
			var joined interface{ Unwrap() []error }
			if errors.As(err, &joined) {
				for _, e := range joined.Unwrap() {
					out.Refusals = append(out.Refusals, e.Error())
				}
			} else {
				out.Refusals = append(out.Refusals, err.Error())
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s has no plugin %q (it has %s)", file, name, strings.Join(names, ", "))
}
