package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

// What a plugin may do to the prompt: where its sections sit
// (grants.prompt.order), which waterfalls it joins (grants.events), and
// what it may change in an assembly passing through its assemble hook.

// ErrUnresolvedReference and ReferenceError are prompt's: an embedder
// finds them with errors.Is and errors.As on what deploy.New returns.
var ErrUnresolvedReference = prompt.ErrUnresolvedReference

// ReferenceError is prompt.ReferenceError.
type ReferenceError = prompt.ReferenceError

// owner is how the registry and render errors name the plugin.
func ownerOf(name string) string { return "plugin " + name }

func pluginOfOwner(owner string) (string, bool) { return strings.CutPrefix(owner, "plugin ") }

func (p *Plugin) grants() config.Grants {
	if p.spec.Grants == nil {
		return config.Grants{}
	}
	return *p.spec.Grants
}

// PromptOrder is the range of section orders the plugin may use:
// grants.prompt.order, by default [1, max] (after the persona).
func (p *Plugin) PromptOrder() (lo, hi int) { return p.grants().Prompt.OrderRange() }

// GrantedEvents lists the waterfalls the plugin may join (grants.events).
func (p *Plugin) GrantedEvents() []string { return slices.Clone(p.grants().Events) }

// Dangling lists the references of the plugin's static sections to
// variables nobody provides now; the next render of each fails.
func (p *Plugin) Dangling() []prompt.Dangling {
	own := ownerOf(p.name)
	return slices.DeleteFunc(p.h.reg.Dangling(), func(d prompt.Dangling) bool { return d.Owner != own })
}

// Dangling lists every static section's reference to a variable nobody
// provides now, the harness's sections included.
func (h *Host) Dangling() []prompt.Dangling { return h.reg.Dangling() }

// CheckReferences is called by a deployment once it has loaded every
// plugin and registered the harness's sections and variables. A static
// section referencing a variable that no owner provides fails the load of
// its plugin: the plugin is unloaded (and so on, should that leave another
// plugin's reference unresolved) and the returned error joins one
// *ReferenceError per reference, naming plugin, section and variable. A
// harness section's unresolved reference is reported the same way.
//
// One exception: when the registry holds an assemble hook (a plugin
// granted system-prompt/assemble, or the embedding program's own), a hook
// may supply the variable late, so unresolved references are only logged
// as warnings, Dangling lists them, and the strict render decides.
//
// After CheckReferences, every Load and Reload is checked the same way at
// once: one that would leave a reference unresolved fails and changes
// nothing (except a plugin loaded for inspection, Spec.Inspect).
func (h *Host) CheckReferences(ctx context.Context) error {
	h.loadMu.Lock()
	defer h.loadMu.Unlock()
	h.refsChecked.Store(true)
	var errs []error
	reported := map[prompt.Dangling]bool{}
	for {
		ds := h.reg.Dangling()
		if len(ds) == 0 {
			break
		}
		if h.reg.HasAssembleHooks() {
			for _, d := range ds {
				h.log.Warn("prompt: a section references a variable no owner provides; an assemble hook may supply it, else its render fails",
					"section", d.Section, "owner", d.Owner, "variable", d.Variable)
			}
			break
		}
		var victims []string
		for _, d := range ds {
			name, isPlugin := pluginOfOwner(d.Owner)
			if !reported[d] {
				reported[d] = true
				errs = append(errs, &ReferenceError{Plugin: name, Section: d.Section, Variable: d.Variable})
			}
			if isPlugin && !slices.Contains(victims, name) && h.Plugin(name) != nil {
				victims = append(victims, name)
			}
		}
		if len(victims) == 0 {
			break
		}
		for _, name := range victims {
			if err := h.unloadLocked(ctx, name, errUnloaded); err != nil && !errors.Is(err, ErrNotLoaded) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// checkNewDangling, inside p's load's, reload's or late registration's
// update, refuses a change that leaves a reference unresolved that was
// not before, once the deployment has called CheckReferences. With an
// assemble hook present it only warns. A plugin loaded for inspection
// (Spec.Inspect) is looked at alone, without the plugins that would
// provide what it references: its references are listed by Dangling, not
// refused.
func (h *Host) checkNewDangling(p *Plugin, tx *prompt.Tx, before []prompt.Dangling) error {
	if !h.refsChecked.Load() || p.spec.Inspect {
		return nil
	}
	var errs []error
	for _, d := range tx.Dangling() {
		if slices.Contains(before, d) {
			continue
		}
		if tx.HasAssembleHooks() {
			h.log.Warn("prompt: a section references a variable no owner provides; an assemble hook may supply it, else its render fails",
				"section", d.Section, "owner", d.Owner, "variable", d.Variable)
			continue
		}
		name, _ := pluginOfOwner(d.Owner)
		errs = append(errs, &ReferenceError{Plugin: name, Section: d.Section, Variable: d.Variable})
	}
	return errors.Join(errs...)
}

// logDangling reports, after an unload or reload, the sections whose
// references the change left without an owner: their next render fails.
func (h *Host) logDangling(plugin string, before []prompt.Dangling) {
	for _, d := range h.reg.Dangling() {
		if slices.Contains(before, d) {
			continue
		}
		h.log.Warn("prompt: section now dangling: it references a variable the plugin owned, and its next render fails",
			"plugin", plugin, "section", d.Section, "owner", d.Owner, "variable", d.Variable)
	}
}

// checkSectionOrder refuses a section outside the plugin's granted range.
func (p *Plugin) checkSectionOrder(name string, order int) error {
	g := p.grants()
	if err := g.Prompt.CheckOrder(name, order); err != nil {
		return fmt.Errorf("plugin %q: %w", p.name, err)
	}
	return nil
}

// checkWaterfallGrant refuses a waterfall subscription the plugin was not
// granted: a waterfall handler may rewrite whatever passes through it.
func (p *Plugin) checkWaterfallGrant(event string) error {
	if p.grants().GrantsEvent(event) {
		return nil
	}
	return fmt.Errorf("plugin %q is not granted the %s waterfall, whose handlers may rewrite what passes through it (grant it under grants: events: [%s]; plain listening needs no grant)",
		p.name, event, event)
}

// checkAssembly enforces the ownership rules on the assembly that comes
// out of the plugin's assemble hook, given the one that went in, and
// restores the owners and the order:
//
//   - the harness's sections (reserved names) come out exactly as they
//     went in: not changed, removed, moved or added;
//   - a section the hook adds, or moves to another order, sits in the
//     plugin's granted order range;
//   - a reserved variable that had a value keeps it; one that had none
//     may be supplied (a late-bound model, as the spec allows);
//   - section names are unique;
//   - owners are the host's facts: an existing name keeps its owner, a
//     new one is the plugin's.
func (p *Plugin) checkAssembly(in, out *prompt.Assembly) error {
	lo, hi := p.PromptOrder()
	own := ownerOf(p.name)
	bad := func(sentinel error, format string, args ...any) error {
		return fmt.Errorf("%w: %s may not %s", sentinel, events.EventAssemble, fmt.Sprintf(format, args...))
	}
	before := make(map[string]prompt.AssembledSection, len(in.Sections))
	for _, s := range in.Sections {
		before[s.Name] = s
	}
	seen := make(map[string]bool, len(out.Sections))
	for i := range out.Sections {
		s := &out.Sections[i]
		if seen[s.Name] {
			return bad(ErrBadOutput, "name section %q twice", s.Name)
		}
		seen[s.Name] = true
		old, existed := before[s.Name]
		if prompt.IsReservedSection(s.Name) {
			if !existed {
				return bad(prompt.ErrReservedName, "add section %q: the name is the harness's", s.Name)
			}
			if old.Text != s.Text || old.Order != s.Order {
				return bad(prompt.ErrReservedName, "change the harness's section %q", s.Name)
			}
			s.Owner = old.Owner
			continue
		}
		if existed {
			s.Owner = old.Owner
			if s.Order == old.Order {
				continue
			}
		} else {
			s.Owner = own
		}
		if s.Order < lo || s.Order > hi {
			return bad(ErrNotGranted, "place section %q at order %d, outside the plugin's grants.prompt.order %s", s.Name, s.Order, config.FormatOrderRange(lo, hi))
		}
	}
	for _, s := range in.Sections {
		if prompt.IsReservedSection(s.Name) && !seen[s.Name] {
			return bad(prompt.ErrReservedName, "remove the harness's section %q", s.Name)
		}
	}
	for name, old := range in.Variables {
		if !prompt.IsReservedVariable(name) || !old.OK {
			continue
		}
		if v, ok := out.Variables[name]; !ok || !v.OK || v.Text != old.Text {
			return bad(prompt.ErrReservedName, "change the value of the harness's variable %q", name)
		}
	}
	for name, v := range out.Variables {
		if old, existed := in.Variables[name]; existed {
			v.Owner = old.Owner
		} else {
			v.Owner = own
		}
		out.Variables[name] = v
	}
	out.SortSections()
	return nil
}
