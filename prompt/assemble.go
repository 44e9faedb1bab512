package prompt

import (
	"cmp"
	"context"
	"maps"
	"slices"
)

// AgentFacts are the facts of the agent a prompt is assembled for. Every
// field is optional: the zero value means "not known", and providers must
// tolerate it.
type AgentFacts struct {
	ID      string `json:"id,omitempty"`
	Session string `json:"session,omitempty"`
	Model   string `json:"model,omitempty"`
	Cwd     string `json:"cwd,omitempty"`
	Depth   int    `json:"depth,omitempty"`
	Parent  string `json:"parent,omitempty"`
}

// AssembleContext is what one assembly is for. Agent is nil when the
// prompt is assembled outside any agent (for inspection, say).
type AssembleContext struct {
	Agent *AgentFacts `json:"agent,omitempty"`
}

// AssembledSection is a section with its text resolved.
type AssembledSection struct {
	Name  string `json:"name"`
	Order int    `json:"order"`
	Text  string `json:"text"`
	// Owner is the registering Section's Owner; empty for the harness.
	Owner string `json:"owner,omitempty"`
}

// Value is a variable's value in one assembly. OK=false means the variable
// is registered but has no value.
type Value struct {
	Text string `json:"text"`
	OK   bool   `json:"ok"`
	// Owner is who registered the variable; empty for the harness.
	Owner string `json:"owner,omitempty"`
}

// Assembly is everything one model request is told, before rendering.
// Assemble hooks may change any part of it.
type Assembly struct {
	Context AssembleContext `json:"context"`
	// Sections, sorted by Order; equal orders keep registration order.
	Sections []AssembledSection `json:"sections"`
	// Variables maps every registered variable name to its value.
	Variables map[string]Value `json:"variables"`
	// Tools, in registration order.
	Tools []Tool `json:"tools"`
}

// SetVariable gives name the value text, registering the name in this
// assembly if it was not.
func (a *Assembly) SetVariable(name, text string) {
	if a.Variables == nil {
		a.Variables = map[string]Value{}
	}
	a.Variables[name] = Value{Text: text, OK: true, Owner: a.Variables[name].Owner}
}

// SortSections restores the section order after a hook added sections:
// ascending Order, stable.
func (a *Assembly) SortSections() {
	slices.SortStableFunc(a.Sections, func(x, y AssembledSection) int { return cmp.Compare(x.Order, y.Order) })
}

// Assemble resolves every registered section and variable against ac and
// runs the assemble waterfall. With a Quota on ctx (WithQuota), static
// section text is charged to it as it is taken in. The first provider or hook error ends the
// assembly with a *ProviderError. Assemble sees one consistent snapshot of
// the registry, whatever updates run concurrently.
func (r *Registry) Assemble(ctx context.Context, ac AssembleContext) (*Assembly, error) {
	st := r.cur.Load()
	next := func(ctx context.Context, ac AssembleContext) (*Assembly, error) { return st.assemble(ctx, ac) }
	for i := len(st.hooks) - 1; i >= 0; i-- {
		h, inner := st.hooks[i], next
		next = func(ctx context.Context, ac AssembleContext) (*Assembly, error) {
			a, err := h.fn(ctx, ac, inner)
			if err != nil {
				if pe, ok := err.(*ProviderError); ok {
					return nil, pe
				}
				return nil, &ProviderError{Kind: "assemble hook", Name: h.name, Err: err}
			}
			if a == nil {
				// An empty prompt in its place would silently drop the
				// system prompt and the tools.
				return nil, &ProviderError{Kind: "assemble hook", Name: h.name, Err: ErrNoAssembly}
			}
			return a, nil
		}
	}
	return next(ctx, ac)
}

func (st *state) assemble(ctx context.Context, ac AssembleContext) (*Assembly, error) {
	a := &Assembly{
		Context:   ac,
		Sections:  make([]AssembledSection, 0, len(st.sections)),
		Variables: make(map[string]Value, len(st.vars)),
		Tools:     make([]Tool, len(st.tools)),
	}
	q := QuotaFrom(ctx)
	for _, e := range st.sections {
		text := e.Text
		if e.Dynamic == nil && q != nil {
			// Dynamic text is charged by its provider, before it is
			// copied; static text here, as the assembly takes it in.
			if err := q.Charge("", 0, int64(len(text)), ""); err != nil {
				return nil, &ProviderError{Kind: "section", Name: e.Name, Err: err}
			}
		}
		if e.Dynamic != nil {
			var err error
			if text, err = e.Dynamic(ctx, ac); err != nil {
				return nil, &ProviderError{Kind: "section", Name: e.Name, Err: err}
			}
		}
		a.Sections = append(a.Sections, AssembledSection{Name: e.Name, Order: e.Order, Text: text, Owner: e.Owner})
	}
	a.SortSections()
	for _, e := range st.vars {
		v, ok, err := e.fn(ctx, ac)
		if err != nil {
			return nil, &ProviderError{Kind: "variable", Name: e.name, Err: err}
		}
		if !ok {
			v = ""
		}
		a.Variables[e.name] = Value{Text: v, OK: ok, Owner: e.owner}
	}
	for i, e := range st.tools {
		a.Tools[i] = e.Tool
	}
	return a, nil
}

// Clone returns a deep copy of a, for hooks that keep or compare versions.
func (a *Assembly) Clone() *Assembly {
	c := &Assembly{Context: a.Context, Sections: slices.Clone(a.Sections),
		Variables: maps.Clone(a.Variables), Tools: slices.Clone(a.Tools)}
	if a.Context.Agent != nil {
		f := *a.Context.Agent
		c.Context.Agent = &f
	}
	return c
}
