package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"unicode/utf8"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// Contribution is what a plugin registered. Its tools are as the
// registry holds them (prompt.Tool).
type Contribution struct {
	Sections      []hostfns.SectionRequest   `json:"sections"`
	Variables     []string                   `json:"variables"`
	Tools         []prompt.Tool              `json:"tools"`
	Subscriptions []hostfns.SubscribeRequest `json:"subscriptions"`
}

// reg is one registration: what it adds to the registry, and the
// disposer that takes it out. It is made by one of the constructors
// below and added only by contrib.register, which alone decides what it
// costs (promptBytes): no caller states a size.
type reg struct {
	kind string // section, variable, tool, hook
	name string
	d    prompt.Disposer
	// What is registered, by kind.
	sec      prompt.Section      // section (Owner is set by register)
	tool     prompt.Tool         // tool
	variable prompt.VariableFunc // variable
	hook     prompt.AssembleHook // hook
}

func sectionReg(s prompt.Section) *reg { return &reg{kind: "section", name: s.Name, sec: s} }
func toolReg(t prompt.Tool) *reg       { return &reg{kind: "tool", name: t.Name, tool: t} }
func variableReg(name string, fn prompt.VariableFunc) *reg {
	return &reg{kind: "variable", name: name, variable: fn}
}
func hookReg(event string, fn prompt.AssembleHook) *reg {
	return &reg{kind: "hook", name: event, hook: fn}
}

// promptBytes is the prompt text the registration holds in the host, the
// one measure of grants.limits.prompt_bytes' static part: a static
// section's text; a tool's name, description and schema as the model
// receives them (prompt.Tool.Sent). Dynamic sections and variables are
// charged per assembly instead (promptCall).
func (r *reg) promptBytes() int64 {
	switch r.kind {
	case "section":
		return int64(len(r.sec.Text))
	case "tool":
		t := r.tool.Sent()
		return int64(len(t.Name) + len(t.Description) + len(t.Parameters))
	}
	return 0
}

// add puts the registration into tx, owned by plugin.
func (r *reg) add(tx *prompt.Tx, plugin string) (prompt.Disposer, error) {
	switch r.kind {
	case "section":
		r.sec.Owner = ownerOf(plugin)
		return tx.AddSection(r.sec)
	case "tool":
		return tx.AddTool(r.tool)
	case "variable":
		return tx.AddOwnedVariable(r.name, ownerOf(plugin), r.variable)
	case "hook":
		return tx.AddAssembleHook("plugin:"+plugin, r.hook)
	}
	return nil, fmt.Errorf("registration of unknown kind %q", r.kind)
}

// contrib tracks a plugin's registrations, so that it can unregister only
// its own and everything goes when it unloads.
type contrib struct {
	p *Plugin
	// mu is taken after the registry's writer lock, never before it.
	mu sync.Mutex
	// removed: the contribution was taken out of the registry (unload,
	// or the old side of a reload); later registrations are refused.
	removed bool
	regs    []*reg
	subs    []hostfns.SubscribeRequest
	caps    hostfns.Capabilities
	// static is the prompt text the registrations hold, the sum of their
	// promptBytes (Limits.PromptBytes).
	static int64
}

func newContrib(p *Plugin) *contrib { return &contrib{p: p} }

func (c *contrib) reset() {
	c.mu.Lock()
	c.regs, c.subs, c.caps, c.static = nil, nil, hostfns.Capabilities{}, 0
	c.mu.Unlock()
}

// staticBytes is the prompt text the plugin's registrations hold.
func (c *contrib) staticBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.static
}

func (c *contrib) count() int { return len(c.regs) + len(c.subs) }

func (c *contrib) find(kind, name string) int {
	for i, r := range c.regs {
		if r.kind == kind && r.name == name {
			return i
		}
	}
	return -1
}

func (c *contrib) snapshot() Contribution {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := Contribution{Sections: []hostfns.SectionRequest{}, Variables: []string{},
		Tools: []prompt.Tool{}, Subscriptions: append([]hostfns.SubscribeRequest{}, c.subs...)}
	for _, r := range c.regs {
		switch r.kind {
		case "section":
			out.Sections = append(out.Sections, hostfns.SectionRequest{Name: r.sec.Name, Order: r.sec.Order, Text: r.sec.Text, Dynamic: r.sec.Dynamic != nil})
		case "variable":
			out.Variables = append(out.Variables, r.name)
		case "tool":
			out.Tools = append(out.Tools, r.tool)
		}
	}
	return out
}

func (c *contrib) subscriptions() []hostfns.SubscribeRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]hostfns.SubscribeRequest(nil), c.subs...)
}

func (c *contrib) hasTool(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.find("tool", name) >= 0
}

func (c *contrib) capabilities() hostfns.Capabilities {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.caps
}

func (c *contrib) addCapabilities(n hostfns.Capabilities) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.caps.FS = append(c.caps.FS, n.FS...)
	c.caps.Exec = c.caps.Exec || n.Exec
	c.caps.Net = append(c.caps.Net, n.Net...)
	c.caps.Env = append(c.caps.Env, n.Env...)
	c.caps.SessionEvents = append(c.caps.SessionEvents, n.SessionEvents...)
}

// removeAll unregisters everything in tx and refuses later
// registrations. If tx's update fails, the caller calls restore.
func (c *contrib) removeAll(tx *prompt.Tx) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removed = true
	var errs []error
	for _, r := range c.regs {
		if err := r.d.Tx(tx); err != nil && !errors.Is(err, prompt.ErrNotRegistered) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// restore undoes removeAll's refusal after its update failed.
func (c *contrib) restore() {
	c.mu.Lock()
	c.removed = false
	c.mu.Unlock()
}

var (
	errRemoved = errors.New("the plugin is being unloaded or replaced")
	errLimit   = errors.New("registration limit reached")
	errQuota   = errors.New("prompt_bytes quota reached")
)

// withTx runs fn with c.mu held, in the init's transaction, or — when the
// load-time instance registers later — in an update of its own. The
// registry's writer lock is always taken first.
func (c *contrib) withTx(cs *callState, fn func(tx *prompt.Tx) error) error {
	if cs.tx != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		return fn(cs.tx)
	}
	return c.p.h.reg.Update(func(tx *prompt.Tx) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.removed {
			return errRemoved
		}
		// A registration after the load is checked like a load: it may
		// not leave a reference unresolved once the deployment is whole.
		before := tx.Dangling()
		if err := fn(tx); err != nil {
			return err
		}
		return c.p.h.checkNewDangling(c.p, tx, before)
	})
}

// sectionText asks the plugin for a dynamic section's text.
func (p *Plugin) sectionText(ctx context.Context, ac prompt.AssembleContext, name string) (string, error) {
	in, err := p.instanceFor(ctx, ac.Agent)
	if err != nil {
		return "", err
	}
	cs := p.promptCall(ctx, ac, "section", name)
	st, out, err := in.invoke(ctx, cs, hostfns.ExportSection, p.limits.CallTimeout, []byte(name), in.contextJSON(ac.Agent))
	if err != nil {
		return "", err
	}
	if st == hostfns.OutOK {
		if err := p.chargePrompt(ctx, hostfns.ExportSection, "section", name, out); err != nil {
			return "", err
		}
	}
	switch {
	case st == hostfns.OutError:
		return "", &CallError{Plugin: p.name, Export: hostfns.ExportSection, Err: fmt.Errorf("%w: %s", ErrGuest, out)}
	case st != hostfns.OutOK:
		return "", &CallError{Plugin: p.name, Export: hostfns.ExportSection, Err: fmt.Errorf("%w: status %d is not valid for a section", ErrBadOutput, st)}
	case !utf8.Valid(out):
		return "", &CallError{Plugin: p.name, Export: hostfns.ExportSection, Err: fmt.Errorf("%w: section %q text is not valid UTF-8", ErrBadOutput, name)}
	}
	return string(out), nil
}

// promptCall is the call state of a dynamic section or variable: its
// output may be no longer than what is left of the plugin's prompt_bytes
// (less its static text) and of the assembly's whole-prompt quota, and is
// refused before the host copies it otherwise.
func (p *Plugin) promptCall(ctx context.Context, ac prompt.AssembleContext, kind, name string) *callState {
	own := max(p.limits.PromptBytes-p.contrib.staticBytes(), 1)
	q := prompt.QuotaFrom(ctx)
	return &callState{facts: ac.Agent, maxOut: max(q.Remaining(p.name, own), 1),
		quotaErr: func(n int64) error {
			// Charge refuses what passes a quota, naming it, and charges
			// nothing then.
			if err := q.Charge(p.name, own, n, "grants.limits.prompt_bytes"); err != nil {
				return fmt.Errorf("%s %q: %w", kind, name, err)
			}
			return nil
		}}
}

// chargePrompt charges a dynamic text to the assembly's quotas.
func (p *Plugin) chargePrompt(ctx context.Context, export, kind, name string, out []byte) error {
	own := max(p.limits.PromptBytes-p.contrib.staticBytes(), 1)
	if err := prompt.QuotaFrom(ctx).Charge(p.name, own, int64(len(out)), "grants.limits.prompt_bytes"); err != nil {
		return &CallError{Plugin: p.name, Export: export, Err: fmt.Errorf("%w: %s %q: %w", ErrQuota, kind, name, err)}
	}
	return nil
}

// variableValue asks the plugin for a variable's value.
func (p *Plugin) variableValue(ctx context.Context, ac prompt.AssembleContext, name string) (string, bool, error) {
	in, err := p.instanceFor(ctx, ac.Agent)
	if err != nil {
		return "", false, err
	}
	cs := p.promptCall(ctx, ac, "variable", name)
	st, out, err := in.invoke(ctx, cs, hostfns.ExportVariable, p.limits.CallTimeout, []byte(name), in.contextJSON(ac.Agent))
	if err != nil {
		return "", false, err
	}
	if st == hostfns.OutOK {
		if err := p.chargePrompt(ctx, hostfns.ExportVariable, "variable", name, out); err != nil {
			return "", false, err
		}
	}
	switch st {
	case hostfns.OutNoValue:
		return "", false, nil
	case hostfns.OutError:
		return "", false, &CallError{Plugin: p.name, Export: hostfns.ExportVariable, Err: fmt.Errorf("%w: %s", ErrGuest, out)}
	}
	if !utf8.Valid(out) {
		return "", false, &CallError{Plugin: p.name, Export: hostfns.ExportVariable, Err: fmt.Errorf("%w: variable %q value is not valid UTF-8", ErrBadOutput, name)}
	}
	return string(out), true, nil
}

// assembleHook passes the assembly through the plugin's waterfall handler.
func (p *Plugin) assembleHook(ctx context.Context, ac prompt.AssembleContext, a *prompt.Assembly) (*prompt.Assembly, error) {
	out, err := p.callEvent(prompt.WithAgent(ctx, ac.Agent), events.EventAssemble, a)
	if err != nil || len(out) == 0 {
		return a, err
	}
	var na prompt.Assembly
	if err := json.Unmarshal(out, &na); err != nil {
		return nil, &CallError{Plugin: p.name, Export: hostfns.ExportEvent, Err: fmt.Errorf("%w: %s returned an assembly that is not valid JSON: %v", ErrBadOutput, events.EventAssemble, err)}
	}
	na.Context = a.Context // the context is the host's fact, not the plugin's
	if err := p.checkAssembly(a, &na); err != nil {
		return nil, &CallError{Plugin: p.name, Export: hostfns.ExportEvent, Err: err}
	}
	return &na, nil
}

// callEvent delivers an event to the instance it belongs to and returns
// the handler's output.
func (p *Plugin) callEvent(ctx context.Context, event string, payload any) ([]byte, error) {
	var b []byte
	switch v := payload.(type) {
	case json.RawMessage:
		b = v
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(payload); err != nil {
			return nil, fmt.Errorf("plugin %q: event %s: payload is not JSON-encodable: %w", p.name, event, err)
		}
	}
	facts := prompt.AgentFrom(ctx)
	var st hostfns.OutStatus
	var out []byte
	var err error
	if facts == nil {
		st, out, err = p.loadTimeEvent(ctx, event, b)
	} else {
		var in *instance
		if in, err = p.instanceFor(ctx, facts); err != nil {
			return nil, err
		}
		st, out, err = in.invoke(ctx, &callState{facts: facts}, hostfns.ExportEvent, p.limits.CallTimeout, []byte(event), in.contextJSON(facts), b)
	}
	if err != nil {
		return nil, err
	}
	if st != hostfns.OutOK {
		return nil, &CallError{Plugin: p.name, Export: hostfns.ExportEvent, Err: fmt.Errorf("%w: %s: %s", ErrGuest, event, out)}
	}
	return out, nil
}

// waterfallEvent runs a bus waterfall step through the plugin: the output
// JSON is decoded into a fresh value of the payload's type.
func (p *Plugin) waterfallEvent(ctx context.Context, event string, payload any) (any, error) {
	out, err := p.callEvent(ctx, event, payload)
	if err != nil || len(out) == 0 {
		return payload, err
	}
	switch payload.(type) {
	case json.RawMessage:
		if !json.Valid(out) {
			return nil, &CallError{Plugin: p.name, Export: hostfns.ExportEvent, Err: fmt.Errorf("%w: %s: output is not JSON", ErrBadOutput, event)}
		}
		return json.RawMessage(out), nil
	case []byte:
		return out, nil
	}
	t := reflect.TypeOf(payload)
	if t == nil {
		return payload, nil
	}
	ptr := t.Kind() == reflect.Pointer
	if ptr {
		t = t.Elem()
	}
	nv := reflect.New(t)
	if err := json.Unmarshal(out, nv.Interface()); err != nil {
		return nil, &CallError{Plugin: p.name, Export: hostfns.ExportEvent, Err: fmt.Errorf("%w: %s: output does not decode as %s: %v", ErrBadOutput, event, t, err)}
	}
	if a, ok := nv.Interface().(Attributable); ok {
		a.Attribute(p.name, payload)
	}
	if ptr {
		return nv.Interface(), nil
	}
	return nv.Elem().Interface(), nil
}

// Attributable is a waterfall payload whose additions the host stamps
// with the name of the plugin that made them (the context a hook adds),
// so that a plugin cannot speak in another's name. Attribute is called
// on the payload a plugin returned, with the payload it was given.
type Attributable interface {
	Attribute(plugin string, before any)
}

// registrationStatus is how a host function answers a failed registration.
func registrationStatus(err error, plugin string, max int) (hostfns.Status, string) {
	var re *prompt.RegistrationError
	switch {
	case errors.As(err, &re):
		return hostfns.ErrRule, err.Error()
	case errors.Is(err, errLimit):
		return hostfns.ErrLimit, fmt.Sprintf("plugin %q reached its limit of %d registrations", plugin, max)
	case errors.Is(err, errQuota):
		return hostfns.ErrTooLarge, err.Error()
	case errors.Is(err, errRemoved):
		return hostfns.ErrDenied, err.Error()
	case errors.Is(err, ErrUnresolvedReference):
		return hostfns.ErrRule, err.Error()
	}
	return hostfns.ErrInternal, err.Error()
}

// register adds one registration under the plugin's limits. It is the
// one way into the registry for everything a plugin registers, whatever
// its ABI (dsh:host/v1's host functions, a community plugin's tool list),
// and the one place its prompt text is measured and charged.
func (c *contrib) register(cs *callState, r *reg) ([]byte, hostfns.Status, string) {
	err := c.withTx(cs, func(tx *prompt.Tx) error {
		if c.count() >= c.p.limits.MaxRegistrations {
			return errLimit
		}
		size := r.promptBytes()
		if lim := c.p.limits.PromptBytes; size > 0 && c.static+size > lim {
			return fmt.Errorf("%w: plugin %q holds %d bytes of prompt text; %s %q would add %d, past grants.limits.prompt_bytes (%d)",
				errQuota, c.p.name, c.static, r.kind, r.name, size, lim)
		}
		d, err := r.add(tx, c.p.name)
		if err != nil {
			return err
		}
		r.d = d
		c.regs = append(c.regs, r)
		c.static += size
		return nil
	})
	if err != nil {
		st, msg := registrationStatus(err, c.p.name, c.p.limits.MaxRegistrations)
		return nil, st, msg
	}
	return nil, 0, ""
}
