package plugin

import (
	"context"
	"errors"
	"fmt"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/plugin/internal/abi/dsh"
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

func (c *contrib) needExport(export, what string) (hostfns.Status, string) {
	if !c.p.exports[export] {
		return hostfns.ErrRule, fmt.Sprintf("the plugin registers %s but does not export %s", what, export)
	}
	return 0, ""
}

// hostSectionRegister implements section_register, static or dynamic.
func hostSectionRegister(in *instance, cs *callState, req []byte) ([]byte, hostfns.Status, string) {
	var r hostfns.SectionRequest
	if st, msg := dsh.Decode(req, &r); st != 0 {
		return nil, st, msg
	}
	p := in.p
	if err := p.checkSectionOrder(r.Name, r.Order); err != nil {
		return nil, hostfns.ErrDenied, err.Error()
	}
	s := prompt.Section{Name: r.Name, Order: r.Order, Text: r.Text}
	if r.Dynamic {
		if st, msg := p.contrib.needExport(hostfns.ExportSection, "a dynamic section"); st != 0 {
			return nil, st, msg
		}
		s.Text = ""
		name := r.Name
		s.Dynamic = func(ctx context.Context, ac prompt.AssembleContext) (string, error) {
			return p.sectionText(ctx, ac, name)
		}
	}
	return p.contrib.register(cs, sectionReg(s))
}

// hostVariableRegister implements variable_register; the value comes
// from the plugin's dsh_variable per assembly.
func hostVariableRegister(in *instance, cs *callState, req []byte) ([]byte, hostfns.Status, string) {
	var r hostfns.NameRequest
	if st, msg := dsh.Decode(req, &r); st != 0 {
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
	return p.contrib.register(cs, variableReg(name, fn))
}

// hostToolRegister implements tool_register; calls go to dsh_tool.
func hostToolRegister(in *instance, cs *callState, req []byte) ([]byte, hostfns.Status, string) {
	var r hostfns.ToolRequest
	if st, msg := dsh.Decode(req, &r); st != 0 {
		return nil, st, msg
	}
	p := in.p
	if st, msg := p.contrib.needExport(hostfns.ExportTool, "a tool"); st != 0 {
		return nil, st, msg
	}
	return p.contrib.register(cs, toolReg(toolOf(r)))
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
		if st, msg := dsh.Decode(req, &r); st != 0 {
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
			c.static -= c.regs[i].promptBytes()
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
