package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/hostfns/jsonobj"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

// CallTool runs the tool called name for the agent described by facts, in
// that agent's instance of the plugin that registered it. The tool's own
// failure is a result with IsError; the returned error reports that the
// call could not be made or the plugin failed (no such tool, a trap, the
// compute budget), and the agent loop turns it into an error result too.
func (h *Host) CallTool(ctx context.Context, facts *prompt.AgentFacts, name string, args []byte) (tool.Result, error) {
	p := h.toolOwner(name)
	if p == nil {
		return tool.Result{}, fmt.Errorf("%w: %q", ErrNoTool, name)
	}
	ctx = prompt.WithAgent(ctx, facts)
	// A call that queued behind one whose failure discarded the instance
	// never entered the guest: it runs once more, on a fresh instance.
	for attempt := 0; ; attempt++ {
		in, err := p.instanceFor(ctx, facts)
		if err != nil {
			return tool.Result{}, err
		}
		res, err := p.kind().callTool(ctx, in, facts, name, args)
		if errors.Is(err, errInstanceClosed) && attempt == 0 && ctx.Err() == nil {
			continue
		}
		return res, err
	}
}

// failed is the result of a tool that failed with msg: "Error: " and the
// message, as the reference words a tool's failure for the model.
func failed(msg string, id *tool.Failure) tool.Result {
	return tool.Result{Text: "Error: " + msg, IsError: true, Failure: id}
}

// toolOutput reads an OutResult payload (a hostfns.ToolOutput), refusing
// what breaks its rules with an error naming the rule.
func toolOutput(out []byte) (tool.Result, error) {
	var o hostfns.ToolOutput
	if err := json.Unmarshal(out, &o); err != nil {
		return tool.Result{}, fmt.Errorf("%w: the tool's result is not a ToolOutput JSON object: %v", ErrBadOutput, err)
	}
	if o.Meta != nil {
		var obj jsonobj.Obj
		switch {
		case len(o.Meta) > hostfns.MaxToolMeta:
			return tool.Result{}, fmt.Errorf("%w: the tool's result meta is %d bytes, over the %d allowed", ErrBadOutput, len(o.Meta), hostfns.MaxToolMeta)
		case obj.Parse(o.Meta) != nil:
			return tool.Result{}, fmt.Errorf("%w: the tool's result meta is not a JSON object", ErrBadOutput)
		}
	}
	if o.Error != nil {
		for _, f := range [][2]string{{"name", o.Error.Name}, {"code", o.Error.Code}} {
			if !identifier(f[1]) {
				return tool.Result{}, fmt.Errorf("%w: the tool's error %s %q is not 1 to %d ASCII letters, digits and underscores", ErrBadOutput, f[0], f[1], hostfns.MaxToolErrorField)
			}
		}
		r := failed(o.Text, &tool.Failure{Name: o.Error.Name, Code: o.Error.Code})
		r.Meta = o.Meta
		return r, nil
	}
	return tool.Result{Text: o.Text, Meta: o.Meta}, nil
}

// identifier reports whether s is 1 to hostfns.MaxToolErrorField ASCII
// letters, digits and underscores.
func identifier(s string) bool {
	if s == "" || len(s) > hostfns.MaxToolErrorField {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// validText turns a guest's output, a fresh copy nobody else holds, into
// text for the model: as it is, without another copy, when it is valid
// UTF-8, and with each invalid sequence replaced by U+FFFD otherwise.
func validText(out []byte) string {
	if utf8.Valid(out) {
		return unsafe.String(unsafe.SliceData(out), len(out))
	}
	return strings.ToValidUTF8(string(out), "\uFFFD")
}

// toolOwner returns the loaded plugin that registered the tool called
// name, or nil. It looks in h.tools first: an entry is a hint, used only
// while its plugin is still loaded under its name and still has the tool,
// so that registrations made after a load (from the load-time instance)
// and unregistrations need not keep it up to date. A miss or a stale entry
// scans the loaded plugins, as before the index, and records the answer;
// a name no plugin has takes no write lock.
func (h *Host) toolOwner(name string) *Plugin {
	h.mu.RLock()
	hint := h.tools[name]
	if hint != nil && h.plugins[hint.name] == hint && hint.contrib.hasTool(name) {
		h.mu.RUnlock()
		return hint
	}
	var owner *Plugin
	for _, p := range h.plugins {
		if p.contrib.hasTool(name) {
			owner = p
			break
		}
	}
	h.mu.RUnlock()
	if owner != nil || hint != nil {
		h.mu.Lock()
		switch {
		case owner != nil && h.plugins[owner.name] == owner:
			h.tools[name] = owner
		case h.tools[name] == hint:
			delete(h.tools, name)
		}
		h.mu.Unlock()
	}
	return owner
}

// forgetTools drops the index entries of p, which is leaving h.plugins,
// so that the index holds no unloaded plugin. Called with h.mu held.
func (h *Host) forgetTools(p *Plugin) {
	for name, q := range h.tools {
		if q == p {
			delete(h.tools, name)
		}
	}
}
