package dsh

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
)

// MaxSubagentRunsPerCall bounds the children one tool call may run: the
// wait for a child costs the caller no compute budget, so without it a
// granted plugin could run children in a loop for as long as the turn
// lasts.
const MaxSubagentRunsPerCall = 8

// hostSubagentProviders implements subagent_providers: the host's
// providers and their facts.
func hostSubagentProviders(h Host, req []byte) ([]byte, hostfns.Status, string) {
	if len(req) > 0 {
		var r struct{}
		if st, msg := Decode(req, &r); st != 0 {
			return nil, st, msg
		}
	}
	out := hostfns.SubagentProviders{Providers: []hostfns.SubagentProvider{}}
	if s := h.Subagents(); s != nil {
		out.Providers = append(out.Providers, s.Providers()...)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, hostfns.ErrInternal, err.Error()
	}
	return b, 0, ""
}

// hostSubagentRun implements subagent_run: from a tool call for an
// agent, a child on a granted provider, waited for.
func hostSubagentRun(h Host, req []byte) ([]byte, hostfns.Status, string) {
	var r hostfns.SubagentRunRequest
	if st, msg := Decode(req, &r); st != 0 {
		return nil, st, msg
	}
	if h.Call().Export != hostfns.ExportTool || h.Facts() == nil {
		return nil, hostfns.ErrDenied, "a child agent can be run only from a tool call for an agent (dsh_tool)"
	}
	if g := h.Grants(); g == nil || !slices.Contains(g.Subagents, r.Provider) {
		return nil, hostfns.ErrDenied, fmt.Sprintf("plugin %q is not granted subagent provider %q (add it under grants.subagents)", h.Name(), r.Provider)
	}
	if r.Prompt == "" {
		return nil, hostfns.ErrRule, "prompt is empty"
	}
	if !h.StartSubagentRun(MaxSubagentRunsPerCall) {
		return nil, hostfns.ErrLimit, fmt.Sprintf("a tool call may run at most %d child agents", MaxSubagentRunsPerCall)
	}
	s := h.CallSubagents()
	if s == nil {
		s = h.Subagents()
	}
	if s == nil {
		return nil, hostfns.ErrDenied, "this host runs no subagent providers"
	}
	// The wait is the child's time, bounded by the child's own limits and
	// the parent's cancellation: a bounded wait, left out of the compute
	// budget (not out of the call's wall-clock cap), and ended when the
	// call is stopped.
	ctx := h.BoundedWait()
	res, err := s.Run(ctx, *h.Facts(), r)
	h.EndBoundedWait()
	if err != nil {
		return nil, hostfns.ErrInternal, fmt.Sprintf("provider %q: %v", r.Provider, err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, hostfns.ErrInternal, err.Error()
	}
	return b, 0, ""
}
