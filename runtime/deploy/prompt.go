package deploy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// PromptOptions say whose prompt to assemble: an agent with this cwd
// (none when empty: the {{cwd}} variable then has no value) and model
// (the deployment's when empty).
type PromptOptions struct {
	// Cwd is the agent's working directory; empty for none.
	Cwd string
	// Model is the agent's model; empty means the deployment's.
	Model string
}

// Prompt is one assembled system prompt, as the model would receive it
// on a session's first step, and where each part came from.
type Prompt struct {
	// System is the rendered system prompt, byte for byte.
	System string
	// Sections lists every assembled section in render order, including
	// those that render empty (and are dropped from System).
	Sections []PartInfo
	// Tools lists the tools exactly as the model is told about them, in
	// order.
	Tools []prompt.Tool
	// ToolInfo describes each tool of Tools, as Sections does sections.
	ToolInfo []PartInfo
}

// PartInfo describes one section or tool of a prompt.
type PartInfo struct {
	// Name is the section's or the tool's name.
	Name string `json:"name"`
	// Order is a section's order, or a tool's position (from 0).
	Order int `json:"order"`
	// Owner: OwnerHarness, OwnerDeployment, "plugin NAME", or "" for a
	// part an assemble hook added.
	Owner string `json:"owner"`
	// Bytes is the rendered section's size, or the size of the tool's
	// JSON as sent; Tokens estimates it as bytes/4, rounded up.
	Bytes int `json:"bytes"`
	// Tokens estimates Bytes as bytes/4, rounded up.
	Tokens int `json:"tokens"`
	// Variables are the {{names}} the text references, in order of
	// first use.
	Variables []string `json:"variables"`
}

// prompterID starts the agent id each prompt inspection assembles as;
// its plugin instances are released when it is done.
const prompterID = "deploy:prompt"

// SystemPrompt assembles and renders the system prompt an agent with
// opts would receive, and says where each part came from. A render error
// names the section and the variable.
func (d *Deployment) SystemPrompt(ctx context.Context, opts PromptOptions) (*Prompt, error) {
	asm, err := d.assemble(ctx, opts)
	if err != nil {
		return nil, err
	}
	system, err := prompt.Render(asm)
	if err != nil {
		return nil, fmt.Errorf("deploy: render the prompt: %w", err)
	}
	if limit := d.opts.Limits.PromptBytes; limit > 0 && int64(len(system)) > limit {
		return nil, fmt.Errorf("%w: the system prompt is %d bytes, over limits.prompt_bytes (%d)", ErrLimit, len(system), limit)
	}
	p := &Prompt{System: system}
	for _, s := range asm.Sections {
		text, err := prompt.RenderText(s.Name, s.Text, asm.Variables)
		if err != nil {
			return nil, fmt.Errorf("deploy: render the prompt: %w", err)
		}
		p.Sections = append(p.Sections, PartInfo{Name: s.Name, Order: s.Order,
			Owner: d.Owner("section", s.Name), Bytes: len(text), Tokens: tokens(len(text)),
			Variables: references(s.Text)})
	}
	if p.Tools, p.ToolInfo, err = d.toolSpecs(asm); err != nil {
		return nil, err
	}
	return p, nil
}

// Tools returns the tools an agent with opts is given, exactly as the
// model receives them. Unlike SystemPrompt it renders nothing, so a
// prompt that cannot render (no cwd, say) does not hide the tools.
func (d *Deployment) Tools(ctx context.Context, opts PromptOptions) ([]prompt.Tool, error) {
	asm, err := d.assemble(ctx, opts)
	if err != nil {
		return nil, err
	}
	specs, _, err := d.toolSpecs(asm)
	return specs, err
}

func (d *Deployment) assemble(ctx context.Context, opts PromptOptions) (*prompt.Assembly, error) {
	// Each inspection is an agent of its own: concurrent ones neither
	// share instances nor end each other's.
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("deploy: agent id: %w", err)
	}
	id := prompterID + "-" + hex.EncodeToString(b[:])
	facts := &prompt.AgentFacts{ID: id, Model: opts.Model}
	if facts.Model == "" {
		facts.Model = d.opts.Model
	}
	if opts.Cwd != "" {
		// Opened once, like a session's: the instances reach the
		// workspace through this descriptor.
		dir, err := openCwd(opts.Cwd)
		if err != nil {
			return nil, err
		}
		defer dir.Close()
		facts.Cwd = dir.Name()
		unbind, err := d.host.BindWorkdir(id, dir.Name(), dir.Root())
		if err != nil {
			return nil, fmt.Errorf("deploy: assemble the prompt: %w", err)
		}
		defer unbind()
	}
	defer d.host.EndAgent(context.WithoutCancel(ctx), id)
	if t := d.opts.Limits.AssemblyTimeout; t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	asm, err := d.reg.Assemble(prompt.WithAgent(ctx, facts), prompt.AssembleContext{Agent: facts})
	if err != nil {
		if ctx.Err() != nil && d.opts.Limits.AssemblyTimeout > 0 {
			return nil, fmt.Errorf("%w: assembling the prompt took longer than limits.assembly_timeout (%v): %w",
				ErrLimit, d.opts.Limits.AssemblyTimeout, err)
		}
		return nil, fmt.Errorf("deploy: assemble the prompt: %w", err)
	}
	return asm, nil
}

// toolSpecs are the assembly's tools as the model receives them (flat,
// not the wire wrapper of any provider; the agent loop sends the same).
func (d *Deployment) toolSpecs(asm *prompt.Assembly) ([]prompt.Tool, []PartInfo, error) {
	specs := []prompt.Tool{}
	var info []PartInfo
	for i, t := range asm.Tools {
		spec := t.Sent()
		b, err := json.Marshal(spec)
		if err != nil {
			return nil, nil, fmt.Errorf("deploy: tool %s: %w", t.Name, err)
		}
		specs = append(specs, spec)
		info = append(info, PartInfo{Name: t.Name, Order: i, Owner: d.Owner("tool", t.Name),
			Bytes: len(b), Tokens: tokens(len(b)), Variables: references(t.Description)})
	}
	return specs, info, nil
}

func tokens(n int) int { return (n + 3) / 4 }

var refPattern = regexp.MustCompile(`\{\{([a-z][a-z0-9_]*)\}\}`)

// references lists the variable names text references, in order of first
// use; never nil.
func references(text string) []string {
	out := []string{}
	if !strings.Contains(text, "{{") {
		return out
	}
	for _, m := range refPattern.FindAllStringSubmatch(text, -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}
