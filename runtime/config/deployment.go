package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// A deployment file describes one agent deployment:
//
//	model: deepseek-v4-flash
//	provider:
//	  base_url: https://api.deepseek.com   # the default
//	  api_key_env: DEEPSEEK_API_KEY         # the default; the key itself never appears here
//	  thinking: enabled                     # enabled | disabled | true | false
//	  reasoning_effort: high
//	persona: |
//	  You are a coding agent powered by the {{model}} model.
//	plugins:
//	  - source: ../../guests/tool-fs.wasm   # relative to this file
//	    grants: {fs: [{path: workspace, mode: rw}]}
//	  - {name: facts2, source: builtin:facts}
//	compaction: {context_window: 128000}
//	sessions: ~/.local/share/dsh-wasm/sessions   # default: the XDG data dir
//	limits: {assembly_timeout: 5s, prompt_bytes: 256KiB, step_output_bytes: 16MiB,
//	         step_output_time: 30m, tool_argument_bytes: 4MiB}
//
// Decoding is as strict as for plugin entries: unknown and duplicate keys,
// wrong types and malformed values are refused, and every error names
// FILE:LINE and the key. Relative paths (plugin sources, sessions) resolve
// against the file's directory. Secrets are never read from the file:
// provider.api_key_env names the environment variable that holds the key.

// DefaultAPIKeyEnv is provider.api_key_env when the file names none.
const DefaultAPIKeyEnv = "DEEPSEEK_API_KEY"

// Deployment is a decoded deployment file.
type Deployment struct {
	// File is the path the deployment was read from, and Dir its
	// directory, against which relative paths were resolved.
	File string `json:"-"`
	Dir  string `json:"-"`

	// Model is the model every agent runs unless a session overrides it.
	Model string `json:"model"`
	// Provider configures the live model provider.
	Provider Provider `json:"provider"`
	// Persona is the deployment:persona section's template ({{model}},
	// {{cwd}} and any registered variable).
	Persona string `json:"persona"`
	// Plugins load in order.
	Plugins []Plugin `json:"plugins"`
	// Compaction, when set, summarises long conversations.
	Compaction *Compaction `json:"compaction,omitempty"`
	// Sessions is the absolute directory sessions persist under; empty
	// means the XDG data dir.
	Sessions string `json:"sessions,omitempty"`
	// Limits are deployment-wide bounds.
	Limits DeploymentLimits `json:"limits"`
	// Store, when set, keeps sessions in PostgreSQL (see serve.go).
	Store *Store `json:"store,omitempty"`
	// Serve configures `dsh-wasm serve`.
	Serve *Serve `json:"serve,omitempty"`
	// HTTP bounds the connections of serve and mcp --listen (http.go).
	HTTP HTTP `json:"http,omitzero"`
	// Subagents configures the subagent providers.
	Subagents Subagents `json:"subagents,omitzero"`
}

// Provider configures the OpenAI-compatible streaming provider.
type Provider struct {
	// BaseURL is the API root; empty means the provider's default.
	BaseURL string `json:"base_url,omitempty"`
	// APIKeyEnv names the environment variable holding the key.
	APIKeyEnv string `json:"api_key_env"`
	// Thinking is "enabled", "disabled" or empty (the server's default).
	Thinking string `json:"thinking,omitempty"`
	// ReasoningEffort, when set, is sent as reasoning_effort.
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// MaxRetries, when set, is how often a failed request is retried
	// before its stream began (0 disables retries).
	MaxRetries *int `json:"max_retries,omitempty"`
	// HeaderTimeout and IdleTimeout bound the wait for a stream's first
	// byte and the silence inside it.
	HeaderTimeout time.Duration `json:"header_timeout,omitempty"`
	IdleTimeout   time.Duration `json:"idle_timeout,omitempty"`
}

// Plugin is one plugin of a deployment: an Entry and an optional name, so
// that one module can load twice under two names.
type Plugin struct {
	// Name is the plugin's name; empty derives it from the source.
	Name string `json:"name,omitempty"`
	// Line is where the entry starts in the file, for later errors.
	Line int `json:"-"`
	Entry
}

// Compaction configures conversation compaction (see the agent loop).
type Compaction struct {
	ContextWindow int     `json:"context_window"`
	TriggerRatio  float64 `json:"trigger_ratio,omitempty"`
	RetainTokens  int     `json:"retain_tokens,omitempty"`
	Instructions  string  `json:"instructions,omitempty"`
}

// DeploymentLimits are the deployment-wide bounds; zero fields take the
// runtime's defaults. This is the file's shape; deploy.Limits is the Go
// form an embedder sets, and deploy.Open translates one to the other.
type DeploymentLimits struct {
	// AssemblyTimeout is the deadline of one prompt assembly, all dynamic
	// sections and variables of a step together.
	AssemblyTimeout time.Duration `json:"assembly_timeout,omitempty"`
	// PromptBytes caps the whole rendered system prompt.
	PromptBytes ByteSize `json:"prompt_bytes,omitempty"`
	// StepOutputBytes bounds what one step's model stream may carry.
	StepOutputBytes ByteSize `json:"step_output_bytes,omitempty"`
	// StepOutputTime bounds one step's model call, request to finish.
	StepOutputTime time.Duration `json:"step_output_time,omitempty"`
	// ToolArgumentBytes bounds the arguments of one tool call the model
	// streams.
	ToolArgumentBytes ByteSize `json:"tool_argument_bytes,omitempty"`
}

// Bounds of deployment values.
const (
	MaxDeploymentPromptBytes = 16 * MiB
	MaxStepOutputBytes       = 1 * GiB // limits.step_output_bytes, limits.tool_argument_bytes
	MaxContextWindow         = 100_000_000
)

// LoadDeployment reads and decodes the deployment file at path.
func LoadDeployment(path string) (*Deployment, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot read the deployment file", Err: err}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot resolve the file's directory", Err: err}
	}
	return DecodeDeployment(path, filepath.Dir(abs), data)
}

// DecodeDeployment decodes a deployment file's contents. file names it in
// errors; dir is the absolute directory relative paths resolve against.
// Errors are *Error values naming FILE:LINE and the key, joined with
// errors.Join.
func DecodeDeployment(file, dir string, data []byte) (*Deployment, error) {
	if !filepath.IsAbs(dir) {
		return nil, &Error{File: file, Msg: fmt.Sprintf("the file's directory %q is not absolute", dir)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: file, Msg: "empty document: want a mapping with at least model and plugins"}
		}
		return nil, WithFile(yamlError(err), file)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := 0
		if err == nil {
			line = extra.Line
		}
		return nil, &Error{File: file, Line: line, Msg: "more than one YAML document"}
	}
	d := &decoder{file: file, budget: maxConfigNodes}
	dep := d.deployment(&doc, dir)
	if len(d.errs) > 0 {
		return nil, errors.Join(d.errs...)
	}
	dep.File, dep.Dir = file, dir
	return dep, nil
}

var (
	modelNameRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$`)
	effortRE     = regexp.MustCompile(`^[a-z]{1,16}$`)
	pluginNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
)

func (d *decoder) deployment(node *yaml.Node, dir string) *Deployment {
	dep := &Deployment{Provider: Provider{APIKeyEnv: DefaultAPIKeyEnv}}
	n := resolve(node)
	if isNull(n) {
		d.fail(node, "", "empty deployment: want a mapping with at least model and plugins")
		return dep
	}
	haveModel := false
	d.fields(n, "", map[string]func(*yaml.Node, string){
		"model": func(v *yaml.Node, f string) {
			haveModel = true
			if s, ok := d.str(v, f); ok {
				if !modelNameRE.MatchString(s) {
					d.fail(v, f, "bad model name %q", s)
				}
				dep.Model = s
			}
		},
		"provider": func(v *yaml.Node, f string) { dep.Provider = d.provider(v, f) },
		"persona": func(v *yaml.Node, f string) {
			if s, ok := d.str(v, f); ok {
				dep.Persona = s
			}
		},
		"plugins": func(v *yaml.Node, f string) {
			names := map[string]int{}
			d.list(v, f, func(item *yaml.Node, f string) {
				p, ok := d.plugin(item, f, dir)
				if !ok {
					return
				}
				name := p.Name
				if name == "" {
					name = nameFromSource(p.Source)
				}
				if line, dup := names[name]; dup {
					d.fail(item, f, "plugin name %q is already used by the entry at line %d; give this one a name", name, line)
					return
				}
				names[name] = item.Line
				dep.Plugins = append(dep.Plugins, p)
			})
		},
		"compaction": func(v *yaml.Node, f string) { dep.Compaction = d.compaction(v, f) },
		"sessions": func(v *yaml.Node, f string) {
			if s, ok := d.str(v, f); ok {
				p, msg := resolvePath(s, dir)
				if msg != "" {
					d.fail(v, f, "%s", msg)
				}
				dep.Sessions = p
			}
		},
		"limits":    func(v *yaml.Node, f string) { dep.Limits = d.deploymentLimits(v, f) },
		"store":     func(v *yaml.Node, f string) { dep.Store = d.store(v, f) },
		"serve":     func(v *yaml.Node, f string) { dep.Serve = d.serve(v, f, dir) },
		"http":      func(v *yaml.Node, f string) { dep.HTTP = d.http(v, f) },
		"subagents": func(v *yaml.Node, f string) { dep.Subagents = d.subagents(v, f) },
	})
	if n.Kind == yaml.MappingNode && !haveModel {
		d.fail(n, "model", "missing (the model every agent runs, e.g. deepseek-v4-flash)")
	}
	return dep
}

func (d *decoder) provider(n *yaml.Node, field string) Provider {
	p := Provider{APIKeyEnv: DefaultAPIKeyEnv}
	if !isNull(n) && n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := resolve(n.Content[i]); k.Kind == yaml.ScalarNode && k.Value == "model" {
				d.fail(k, join(field, "model"), "the model is set once, by the top-level model key; remove it here")
				n = withoutKey(n, "model")
				break
			}
		}
	}
	d.fields(n, field, map[string]func(*yaml.Node, string){
		"base_url": func(v *yaml.Node, f string) {
			if s, ok := d.str(v, f); ok {
				if msg := checkBaseURL(s); msg != "" {
					d.fail(v, f, "%s", msg)
				}
				p.BaseURL = s
			}
		},
		"api_key_env": func(v *yaml.Node, f string) {
			if s, ok := d.str(v, f); ok {
				if msg := checkEnvName(s); msg != "" {
					d.fail(v, f, "%s (name the environment variable that holds the key; the key never goes in this file)", msg)
				}
				p.APIKeyEnv = s
			}
		},
		"thinking": func(v *yaml.Node, f string) {
			if v != nil && v.Kind == yaml.ScalarNode && v.ShortTag() == "!!bool" {
				if d.boolean(v, f) {
					p.Thinking = "enabled"
				} else {
					p.Thinking = "disabled"
				}
				return
			}
			if s, ok := d.str(v, f); ok {
				if s != "enabled" && s != "disabled" {
					d.fail(v, f, "want enabled, disabled, true or false, got %q", s)
				}
				p.Thinking = s
			}
		},
		"reasoning_effort": func(v *yaml.Node, f string) {
			if s, ok := d.str(v, f); ok {
				if !effortRE.MatchString(s) {
					d.fail(v, f, "want a word such as low, medium or high, got %q", s)
				}
				p.ReasoningEffort = s
			}
		},
		"max_retries": func(v *yaml.Node, f string) {
			if r, ok := d.integer(v, f, 0, 100); ok {
				p.MaxRetries = &r
			}
		},
		"header_timeout": func(v *yaml.Node, f string) { p.HeaderTimeout = d.duration(v, f) },
		"idle_timeout":   func(v *yaml.Node, f string) { p.IdleTimeout = d.duration(v, f) },
	})
	return p
}

// withoutKey returns a copy of mapping n without key (already reported).
func withoutKey(n *yaml.Node, key string) *yaml.Node {
	c := *n
	c.Content = nil
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := resolve(n.Content[i]); k.Kind == yaml.ScalarNode && k.Value == key {
			continue
		}
		c.Content = append(c.Content, n.Content[i], n.Content[i+1])
	}
	return &c
}

func checkBaseURL(s string) string {
	if !strings.HasPrefix(s, "https://") && !strings.HasPrefix(s, "http://") {
		return fmt.Sprintf("base URL %q must start with https:// or http://", s)
	}
	if strings.ContainsAny(s, " \t\r\n?#") {
		return fmt.Sprintf("base URL %q may not contain spaces, a query or a fragment", s)
	}
	if at := strings.Index(s, "@"); at >= 0 && at < strings.IndexByte(s[8:]+"/", '/')+8 {
		return "base URL may not carry credentials; name them in api_key_env"
	}
	return ""
}

func (d *decoder) plugin(n *yaml.Node, field, dir string) (Plugin, bool) {
	if isNull(n) || n.Kind != yaml.MappingNode {
		d.fail(n, field, "want a plugin entry mapping like {source: builtin:facts}, got %s", describeOrNothing(n))
		return Plugin{}, false
	}
	p := Plugin{Line: n.Line}
	before := len(d.errs)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := resolve(n.Content[i])
		if k.Kind != yaml.ScalarNode || k.Value != "name" {
			continue
		}
		v := resolve(n.Content[i+1])
		if s, ok := d.str(v, join(field, "name")); ok {
			if !pluginNameRE.MatchString(s) {
				d.fail(v, join(field, "name"), "bad plugin name %q: want lower-case letters, digits, '.', '-' and '_', starting with a letter or digit", s)
			}
			p.Name = s
		}
	}
	sub := &decoder{file: d.file, budget: d.budget}
	e := sub.entry(withoutKey(n, "name"))
	d.budget = sub.budget
	for _, err := range sub.errs {
		if ce, ok := err.(*Error); ok {
			if ce.Field == "" {
				ce.Field = field
			} else {
				ce.Field = join(field, ce.Field)
			}
		}
		d.errs = append(d.errs, err)
	}
	if len(d.errs) > before {
		return Plugin{}, false
	}
	e.ApplyDefaults()
	if _, builtin := e.Builtin(); !builtin {
		src, msg := resolvePath(e.Source, dir)
		if msg != "" {
			d.fail(n, join(field, "source"), "%s", msg)
			return Plugin{}, false
		}
		e.Source = src
	}
	p.Entry = e
	return p, true
}

// nameFromSource mirrors the plugin host's derivation of a name:
// builtin:facts is "facts", /x/my-tool.wasm is "my-tool".
func nameFromSource(source string) string {
	if name, ok := strings.CutPrefix(source, BuiltinPrefix); ok {
		return name
	}
	return strings.ToLower(strings.TrimSuffix(filepath.Base(source), filepath.Ext(source)))
}

// resolvePath makes p absolute against dir; "~/" is the home directory.
func resolvePath(p, dir string) (string, string) {
	if p == "" {
		return "", "empty path"
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Sprintf("%q: no home directory: %v", p, err)
		}
		return filepath.Join(home, rest), ""
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p), ""
	}
	return filepath.Join(dir, p), ""
}

func (d *decoder) compaction(n *yaml.Node, field string) *Compaction {
	if isNull(n) {
		return nil
	}
	c := &Compaction{}
	have := false
	d.fields(n, field, map[string]func(*yaml.Node, string){
		"context_window": func(v *yaml.Node, f string) {
			have = true
			c.ContextWindow, _ = d.integer(v, f, 1024, MaxContextWindow)
		},
		"trigger_ratio": func(v *yaml.Node, f string) { c.TriggerRatio = d.ratio(v, f) },
		"retain_tokens": func(v *yaml.Node, f string) { c.RetainTokens, _ = d.integer(v, f, 1, MaxContextWindow) },
		"instructions": func(v *yaml.Node, f string) {
			if s, ok := d.str(v, f); ok {
				c.Instructions = s
			}
		},
	})
	if n.Kind == yaml.MappingNode && !have {
		d.fail(n, join(field, "context_window"), "missing (the model's context window in tokens)")
	}
	if c.RetainTokens != 0 && c.ContextWindow != 0 && c.RetainTokens >= c.ContextWindow {
		d.fail(n, join(field, "retain_tokens"), "%d must be less than context_window %d", c.RetainTokens, c.ContextWindow)
	}
	return c
}

func (d *decoder) deploymentLimits(n *yaml.Node, field string) DeploymentLimits {
	var l DeploymentLimits
	d.fields(n, field, map[string]func(*yaml.Node, string){
		"assembly_timeout": func(v *yaml.Node, f string) { l.AssemblyTimeout = d.duration(v, f) },
		"prompt_bytes":     func(v *yaml.Node, f string) { l.PromptBytes = d.size(v, f, 1, MaxDeploymentPromptBytes) },
		"step_output_bytes": func(v *yaml.Node, f string) {
			l.StepOutputBytes = d.size(v, f, 1, MaxStepOutputBytes)
		},
		"step_output_time": func(v *yaml.Node, f string) { l.StepOutputTime = d.duration(v, f) },
		"tool_argument_bytes": func(v *yaml.Node, f string) {
			l.ToolArgumentBytes = d.size(v, f, 1, MaxStepOutputBytes)
		},
	})
	return l
}

func (d *decoder) integer(n *yaml.Node, field string, lo, hi int) (int, bool) {
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		d.fail(n, field, "want an integer, got %s", describeOrNothing(n))
		return 0, false
	}
	var v int
	if err := n.Decode(&v); err != nil {
		d.fail(n, field, "bad integer %q", n.Value)
		return 0, false
	}
	if v < lo || v > hi {
		d.fail(n, field, "%d is out of range [%d, %d]", v, lo, hi)
		return 0, false
	}
	return v, true
}

func (d *decoder) ratio(n *yaml.Node, field string) float64 {
	if n == nil || n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!float" && n.ShortTag() != "!!int") {
		d.fail(n, field, "want a number between 0 and 1, got %s", describeOrNothing(n))
		return 0
	}
	var v float64
	if err := n.Decode(&v); err != nil || v <= 0 || v >= 1 {
		d.fail(n, field, "want a number strictly between 0 and 1, got %s", n.Value)
		return 0
	}
	return v
}

// MarshalJSON writes durations as a person writes them ("45s").
func (p Provider) MarshalJSON() ([]byte, error) {
	type plain Provider
	return json.Marshal(struct {
		plain
		HeaderTimeout string `json:"header_timeout,omitempty"`
		IdleTimeout   string `json:"idle_timeout,omitempty"`
	}{plain(p), durationText(p.HeaderTimeout), durationText(p.IdleTimeout)})
}

// MarshalJSON writes the duration and size as a person writes them.
func (l DeploymentLimits) MarshalJSON() ([]byte, error) {
	out := struct {
		AssemblyTimeout   string `json:"assembly_timeout,omitempty"`
		PromptBytes       string `json:"prompt_bytes,omitempty"`
		StepOutputBytes   string `json:"step_output_bytes,omitempty"`
		StepOutputTime    string `json:"step_output_time,omitempty"`
		ToolArgumentBytes string `json:"tool_argument_bytes,omitempty"`
	}{AssemblyTimeout: durationText(l.AssemblyTimeout), StepOutputTime: durationText(l.StepOutputTime)}
	size := func(b ByteSize) string {
		if b == 0 {
			return ""
		}
		return b.String()
	}
	out.PromptBytes, out.StepOutputBytes, out.ToolArgumentBytes = size(l.PromptBytes), size(l.StepOutputBytes), size(l.ToolArgumentBytes)
	return json.Marshal(out)
}

func durationText(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}
