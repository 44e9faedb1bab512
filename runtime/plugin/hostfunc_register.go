package plugin

import (
	"context"
	"errors"
	"fmt"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

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

// register adds one registration under the plugin's limits.
func (c *contrib) register(cs *callState, kind, name string, add func(tx *prompt.Tx) (prompt.Disposer, error), r *reg) ([]byte, hostfns.Status, string) {
	err := c.withTx(cs, func(tx *prompt.Tx) error {
		if c.count() >= c.p.limits.MaxRegistrations {
			return errLimit
		}
		if lim := c.p.limits.PromptBytes; r.size > 0 && c.static+r.size > lim {
			return fmt.Errorf("%w: plugin %q holds %d bytes of prompt text; %s %q would add %d, past grants.limits.prompt_bytes (%d)",
				errQuota, c.p.name, c.static, kind, name, r.size, lim)
		}
		d, err := add(tx)
		if err != nil {
			return err
		}
		r.d, r.kind, r.name = d, kind, name
		c.regs = append(c.regs, r)
		c.static += r.size
		return nil
	})
	if err != nil {
		st, msg := registrationStatus(err, c.p.name, c.p.limits.MaxRegistrations)
		return nil, st, msg
	}
	return nil, 0, ""
}

func (c *contrib) needExport(export, what string) (hostfns.Status, string) {
	if !c.p.exports[export] {
		return hostfns.ErrRule, fmt.Sprintf("the plugin registers %s but does not export %s", what, export)
	}
	return 0, ""
}

// hostSectionRegister implements section_register, static or dynamic.
func hostSectionRegister(in *instance, cs *callState, req []byte) ([]byte, hostfns.Status, string) {
	var r hostfns.SectionRequest
	if st, msg := decode(req, &r); st != 0 {
		return nil, st, msg
	}
	p := in.p
	if err := p.checkSectionOrder(r.Name, r.Order); err != nil {
		return nil, hostfns.ErrDenied, err.Error()
	}
	s := prompt.Section{Name: r.Name, Order: r.Order, Text: r.Text, Owner: ownerOf(p.name)}
	if r.Dynamic {
		if st, msg := p.contrib.needExport(hostfns.ExportSection, "a dynamic section"); st != 0 {
			return nil, st, msg
		}
		s.Text, r.Text = "", ""
		name := r.Name
		s.Dynamic = func(ctx context.Context, ac prompt.AssembleContext) (string, error) {
			return p.sectionText(ctx, ac, name)
		}
	}
	return p.contrib.register(cs, "section", r.Name, func(tx *prompt.Tx) (prompt.Disposer, error) { return tx.AddSection(s) }, &reg{sec: r, size: int64(len(s.Text))})
}

// hostVariableRegister implements variable_register; the value comes
// from the plugin's dsh_variable per assembly.
func hostVariableRegister(in *instance, cs *callState, req []byte) ([]byte, hostfns.Status, string) {
	var r hostfns.NameRequest
	if st, msg := decode(req, &r); st != 0 {
		return nil, st, msg
	}
	p := in.p
	if st, msg := p.contrib.needExport(hostfns.ExportVariable, "a variable"); st != 0 {
		return nil, st, msg
	}
	name := r.Name
	fn := func(ctx context.Context, ac prompt.AssembleContext) (string, bool, error) {
		return p.variableValue(ctx, ac, name)
	}
	return p.contrib.register(cs, "variable", name, func(tx *prompt.Tx) (prompt.Disposer, error) {
		return tx.AddOwnedVariable(name, ownerOf(p.name), fn)
	}, &reg{})
}

// hostToolRegister implements tool_register; calls go to dsh_tool.
func hostToolRegister(in *instance, cs *callState, req []byte) ([]byte, hostfns.Status, string) {
	var r hostfns.ToolRequest
	if st, msg := decode(req, &r); st != 0 {
		return nil, st, msg
	}
	p := in.p
	if st, msg := p.contrib.needExport(hostfns.ExportTool, "a tool"); st != 0 {
		return nil, st, msg
	}
	t := toolOf(r)
	return p.contrib.register(cs, "tool", r.Name, func(tx *prompt.Tx) (prompt.Disposer, error) { return tx.AddTool(t) },
		&reg{tool: t, size: int64(len(r.Description) + len(r.Parameters))})
}

// toolOf is the one translation of a tool from its wire shape, as a
// plugin registers it (tool_register, or an MCP tool listing), to the Go
// type the registry holds.
func toolOf(r hostfns.ToolRequest) prompt.Tool {
	return prompt.Tool{Name: r.Name, Description: r.Description, Parameters: r.Parameters}
}

// hostUnregister implements section_unregister, variable_unregister and
// tool_unregister: only what the plugin itself registered.
func hostUnregister(kind string) hostImpl {
	return func(in *instance, cs *callState, req []byte) ([]byte, hostfns.Status, string) {
		var r hostfns.NameRequest
		if st, msg := decode(req, &r); st != 0 {
			return nil, st, msg
		}
		c := in.p.contrib
		errNotOwn := fmt.Errorf("plugin %q registered no %s %q", in.p.name, kind, r.Name)
		err := c.withTx(cs, func(tx *prompt.Tx) error {
			i := c.find(kind, r.Name)
			if i < 0 {
				return errNotOwn
			}
			if err := c.regs[i].d.Tx(tx); err != nil {
				return err
			}
			c.static -= c.regs[i].size
			c.regs = append(c.regs[:i], c.regs[i+1:]...)
			return nil
		})
		switch {
		case err == nil:
			return nil, 0, ""
		case errors.Is(err, errNotOwn):
			return nil, hostfns.ErrNotFound, err.Error()
		}
		st, msg := registrationStatus(err, in.p.name, in.p.limits.MaxRegistrations)
		return nil, st, msg
	}
}
