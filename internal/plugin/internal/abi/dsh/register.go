package dsh

import (
	"fmt"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// needExport is the refusal of a registration whose calls would go to an
// export the module does not have.
func needExport(export, what string) string {
	return fmt.Sprintf("the plugin registers %s but does not export %s", what, export)
}

// hostSectionRegister implements section_register, static or dynamic.
func hostSectionRegister(h Host, req []byte) ([]byte, hostfns.Status, string) {
	var r hostfns.SectionRequest
	if st, msg := Decode(req, &r); st != 0 {
		return nil, st, msg
	}
	if err := h.CheckSectionOrder(r.Name, r.Order); err != nil {
		return nil, hostfns.ErrDenied, err.Error()
	}
	s := prompt.Section{Name: r.Name, Order: r.Order, Text: r.Text}
	if r.Dynamic {
		if !h.HasExport(hostfns.ExportSection) {
			return nil, hostfns.ErrRule, needExport(hostfns.ExportSection, "a dynamic section")
		}
		s.Text = ""
	}
	st, msg := h.RegisterSection(s, r.Dynamic)
	return nil, st, msg
}

// hostVariableRegister implements variable_register; the value comes
// from the plugin's dsh_variable per assembly.
func hostVariableRegister(h Host, req []byte) ([]byte, hostfns.Status, string) {
	var r hostfns.NameRequest
	if st, msg := Decode(req, &r); st != 0 {
		return nil, st, msg
	}
	if !h.HasExport(hostfns.ExportVariable) {
		return nil, hostfns.ErrRule, needExport(hostfns.ExportVariable, "a variable")
	}
	st, msg := h.RegisterVariable(r.Name)
	return nil, st, msg
}

// hostToolRegister implements tool_register; calls go to dsh_tool.
func hostToolRegister(h Host, req []byte) ([]byte, hostfns.Status, string) {
	var r hostfns.ToolRequest
	if st, msg := Decode(req, &r); st != 0 {
		return nil, st, msg
	}
	if !h.HasExport(hostfns.ExportTool) {
		return nil, hostfns.ErrRule, needExport(hostfns.ExportTool, "a tool")
	}
	st, msg := h.RegisterTool(ToolOf(r))
	return nil, st, msg
}

// ToolOf is the one translation of a tool from its wire shape, as a
// plugin registers it (tool_register, or an MCP tool listing), to the Go
// type the registry holds.
func ToolOf(r hostfns.ToolRequest) prompt.Tool {
	return prompt.Tool{Name: r.Name, Description: r.Description, Parameters: r.Parameters}
}

// hostUnregister implements section_unregister, variable_unregister and
// tool_unregister: only what the plugin itself registered.
func hostUnregister(kind string) Impl {
	return func(h Host, req []byte) ([]byte, hostfns.Status, string) {
		var r hostfns.NameRequest
		if st, msg := Decode(req, &r); st != 0 {
			return nil, st, msg
		}
		st, msg := h.Unregister(kind, r.Name)
		return nil, st, msg
	}
}
