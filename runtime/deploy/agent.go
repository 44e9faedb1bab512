package deploy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

// AgentOptions describe an agent identity that calls tools without a
// model session: a client of a tool server such as `dsh-wasm mcp`.
type AgentOptions struct {
	// Cwd is the agent's working directory: what `workspace` fs grants
	// resolve to and the {{cwd}} variable. Empty means none: workspace
	// grants then mount nothing.
	Cwd string
	// Model is the {{model}} variable; empty means the deployment's.
	Model string
	// Prefix starts the agent's id ("mcp" gives "mcp-1a2b…"); empty
	// means "agent".
	Prefix string
}

// Agent is one agent identity on a deployment, outside any model
// session: its own plugin instances and plugin state, under the
// plugins' grants, until Close. Safe for concurrent use.
type Agent struct {
	d     *Deployment
	facts prompt.AgentFacts
	// release lets go of the opened cwd, if any.
	release func()

	mu     sync.Mutex
	closed bool
}

// NewAgent makes an agent identity with a fresh random id, which is also
// its state's session key, so two agents never share instances or state.
func (d *Deployment) NewAgent(opts AgentOptions) (*Agent, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("deploy: agent id: %w", err)
	}
	prefix := opts.Prefix
	if prefix == "" {
		prefix = "agent"
	}
	id := prefix + "-" + hex.EncodeToString(b[:])
	model := opts.Model
	if model == "" {
		model = d.opts.Model
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	a := &Agent{d: d, facts: prompt.AgentFacts{ID: id, Session: id, Model: model}, release: func() {}}
	if opts.Cwd != "" {
		// Opened once, here: the agent's instances reach it through
		// this descriptor for as long as the agent lives.
		dir, err := openCwd(opts.Cwd)
		if err != nil {
			return nil, err
		}
		a.facts.Cwd = dir.Name()
		if d.host == nil {
			dir.Close()
			return a, nil
		}
		unbind, err := d.host.BindWorkdir(id, dir.Name(), dir.Root())
		dir.Close() // the host holds its own handle
		if err != nil {
			return nil, fmt.Errorf("deploy: new agent: %w", err)
		}
		a.release = unbind
	}
	return a, nil
}

// Facts returns the agent's facts (id, model, cwd).
func (a *Agent) Facts() prompt.AgentFacts { return a.facts }

// CallTool runs the tool called name with args (a JSON object) in the
// agent's own instance of the plugin that registered it, under that
// plugin's grants, call timeout and memory limit; a native tool runs in
// process. Cancelling ctx interrupts the guest. The tool's own failure is
// a result with IsError; a returned error says the call could not be made
// or the plugin failed (no such tool, a trap, the budget, cancellation).
// The result and the error are redacted with the deployment's secrets.
func (a *Agent) CallTool(ctx context.Context, name string, args []byte) (tool.Result, error) {
	a.mu.Lock()
	closed := a.closed
	a.mu.Unlock()
	if closed {
		return tool.Result{}, ErrClosed
	}
	facts := a.facts
	// No session records this call: its result goes straight to the
	// caller (an MCP client), so it is redacted here, as a session's
	// tool/result is when recorded.
	red := a.d.opts.Redactor
	res, err := runner{a.d}.CallTool(ctx, &facts, name, args)
	if err != nil {
		return tool.Result{}, red.Error(err)
	}
	res.Text = red.String(res.Text)
	return res, nil
}

// Assemble assembles the prompt as this agent's next model request would
// see it, under limits.assembly_timeout: sections sorted, dynamic text
// resolved, every variable's value for this agent. Nothing is rendered:
// prompt.RenderText renders a section strictly.
func (a *Agent) Assemble(ctx context.Context) (*prompt.Assembly, error) {
	facts := a.facts
	if t := a.d.opts.Limits.AssemblyTimeout; t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	asm, err := a.d.reg.Assemble(prompt.WithAgent(ctx, &facts), prompt.AssembleContext{Agent: &facts})
	if err != nil {
		return nil, fmt.Errorf("deploy: assemble the prompt: %w", err)
	}
	return asm, nil
}

// Close releases the agent's plugin instances. Calls after Close fail
// with ErrClosed. Close is idempotent.
func (a *Agent) Close(ctx context.Context) {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.closed = true
	a.mu.Unlock()
	a.d.host.EndAgent(context.WithoutCancel(ctx), a.facts.ID)
	a.release()
}

// Changes says what a registry change touched.
type Changes struct {
	Tools    bool // a tool was registered or unregistered
	Sections bool // a prompt section was registered or unregistered
}

// errBarrier ends the empty update Watch uses to wait for a change to
// become visible.
var errBarrier = errors.New("deploy: barrier")

// Watch calls fn after tools or prompt sections change (a plugin
// registering or unregistering them, a reload), once the change is
// visible to Tools and Assemble. Changes that arrive together may be
// reported in one call; fn runs on its own goroutine, one call at a time.
// The returned function stops the watch.
func (d *Deployment) Watch(fn func(Changes)) (stop func()) {
	var mu sync.Mutex
	var pending Changes
	wake := make(chan struct{}, 1)
	done := make(chan struct{})
	remove := d.reg.OnChange(func(c prompt.Change) error {
		mu.Lock()
		switch c.Kind {
		case prompt.ToolAdded, prompt.ToolRemoved:
			pending.Tools = true
		case prompt.SectionAdded, prompt.SectionRemoved:
			pending.Sections = true
		default:
			mu.Unlock()
			return nil
		}
		mu.Unlock()
		select {
		case wake <- struct{}{}:
		default:
		}
		return nil
	})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-wake:
			}
			// Listeners run inside the registry's update, before it is
			// visible: an empty update waits for that one to finish.
			_ = d.reg.Update(func(*prompt.Tx) error { return errBarrier })
			mu.Lock()
			c := pending
			pending = Changes{}
			mu.Unlock()
			if c.Tools || c.Sections {
				fn(c)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			remove()
			close(done)
		})
	}
}
