package prompt

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// TextFunc computes a section's text for one assembly.
type TextFunc func(ctx context.Context, ac AssembleContext) (string, error)

// VariableFunc computes a variable's value for one assembly. ok=false means
// the variable has no value in this assembly; a reference to it then fails
// at render.
type VariableFunc func(ctx context.Context, ac AssembleContext) (value string, ok bool, err error)

// AssembleHook is one layer of the assemble waterfall. It calls next to get
// the assembly built by the layers inside it (and ultimately by the
// registry), may read and change it, and returns it. A hook that does not
// call next replaces the assembly entirely.
type AssembleHook func(ctx context.Context, ac AssembleContext, next AssembleFunc) (*Assembly, error)

// AssembleFunc produces an assembly; it is what a hook's next is.
type AssembleFunc func(ctx context.Context, ac AssembleContext) (*Assembly, error)

// Section is a named, ordered block of prompt text. Text is used unless
// Dynamic is set, in which case Dynamic computes the text per assembly.
type Section struct {
	Name    string
	Order   int
	Text    string
	Dynamic TextFunc
	// Owner says who registered the section, as errors name it ("plugin
	// facts"). Empty means the program that embeds the registry: the
	// harness and the deployment. Only the empty owner may claim a
	// reserved name (IsReservedSection).
	Owner string
}

// Tool is what the model is told about one tool. Parameters is a JSON
// Schema object; empty means a tool without parameters.
//
// It is the one Go description of a tool: the registry holds it, model
// requests carry it, native tools and front ends describe their tools
// with it. Plugins send its wire shape, hostfns.ToolRequest, which the
// plugin host translates when it registers the tool.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// emptyParameters is the schema a tool without parameters is sent with.
const emptyParameters = `{"type":"object","properties":{}}`

// Sent returns t as the model receives it: a tool without parameters
// gets the schema of an empty object. The agent loop sends tools so, and
// deployments report them so.
func (t Tool) Sent() Tool {
	if len(t.Parameters) == 0 {
		t.Parameters = json.RawMessage(emptyParameters)
	}
	return t
}

// ChangeKind says what a Change did.
type ChangeKind int

// Change kinds.
const (
	SectionAdded ChangeKind = iota
	SectionRemoved
	VariableAdded
	VariableRemoved
	ToolAdded
	ToolRemoved
	HookAdded
	HookRemoved
)

var changeKindNames = [...]string{"section added", "section removed", "variable added",
	"variable removed", "tool added", "tool removed", "assemble hook added", "assemble hook removed"}

func (k ChangeKind) String() string {
	if int(k) < len(changeKindNames) {
		return changeKindNames[k]
	}
	return fmt.Sprintf("ChangeKind(%d)", int(k))
}

// Added reports whether the change adds something.
func (k ChangeKind) Added() bool { return k%2 == 0 }

// Change is one registration or unregistration, as change listeners see it.
type Change struct {
	Kind ChangeKind
	Name string
	// Tool is set for ToolAdded and ToolRemoved.
	Tool *Tool
}

// ChangeListener is told of every change before it becomes visible. An
// error from a listener of an added-change rolls back the whole update; an
// error from a listener of a removed-change is logged and the removal
// stands. Listeners run while the registry's writer lock is held and must
// not call Update or any Register method.
type ChangeListener func(Change) error

// Registry holds the sections, variables, tools and assemble hooks that
// make up the prompt. Writes are serialised and atomic: an Update becomes
// visible all at once, so a concurrent Assemble sees the state before or
// after it, never a mix. Reads (Assemble, Tools, Names) take no lock.
type Registry struct {
	mu        sync.Mutex // serialises writers
	cur       atomic.Pointer[state]
	listeners []*listenerEntry
	logger    *slog.Logger
}

type listenerEntry struct{ fn ChangeListener }

// handle identifies one registration, so that a disposer removes exactly
// what it added and not a later registration of the same name.
type handle struct{ _ byte } // not zero-size: each new(handle) is distinct

type sectionEntry struct {
	Section
	refs []string // the variables a static section references
	h    *handle
}

type variableEntry struct {
	name  string
	owner string
	fn    VariableFunc
	h     *handle
}

type toolEntry struct {
	Tool
	h *handle
}

type hookEntry struct {
	name string
	fn   AssembleHook
	h    *handle
}

// state is an immutable snapshot; Update copies it once, edits the copy
// and publishes it.
type state struct {
	sections      []*sectionEntry // registration order
	vars          []*variableEntry
	tools         []*toolEntry
	hooks         []*hookEntry
	sectionByName map[string]*sectionEntry
	varByName     map[string]*variableEntry
	toolByName    map[string]*toolEntry
}

// NewRegistry returns an empty registry. Failures of removal listeners are
// logged to logger, or to slog.Default() when logger is nil.
func NewRegistry(logger *slog.Logger) *Registry {
	if logger == nil {
		logger = slog.Default()
	}
	r := &Registry{logger: logger}
	r.cur.Store(&state{
		sectionByName: map[string]*sectionEntry{},
		varByName:     map[string]*variableEntry{},
		toolByName:    map[string]*toolEntry{},
	})
	return r
}

func (s *state) clone() *state {
	return &state{
		sections:      slices.Clone(s.sections),
		vars:          slices.Clone(s.vars),
		tools:         slices.Clone(s.tools),
		hooks:         slices.Clone(s.hooks),
		sectionByName: maps.Clone(s.sectionByName),
		varByName:     maps.Clone(s.varByName),
		toolByName:    maps.Clone(s.toolByName),
	}
}

// OnChange adds a listener told of every later change. The returned
// function removes it.
func (r *Registry) OnChange(l ChangeListener) (remove func()) {
	e := &listenerEntry{fn: l}
	r.mu.Lock()
	r.listeners = append(r.listeners, e)
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.listeners = slices.DeleteFunc(r.listeners, func(x *listenerEntry) bool { return x == e })
	}
}

// Update applies fn's registrations and unregistrations atomically. If fn
// returns an error, or a change listener rejects an addition, nothing fn
// did becomes visible and the error is returned.
func (r *Registry) Update(fn func(tx *Tx) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	tx := &Tx{r: r, st: r.cur.Load().clone()}
	err := fn(tx)
	tx.done = true
	if err != nil {
		return err
	}
	r.cur.Store(tx.st)
	return nil
}

// Tx is an open Update. Its methods fail with a *RegistrationError; a Tx
// must not be used after its Update returns.
type Tx struct {
	r    *Registry
	st   *state
	done bool
}

func (tx *Tx) notify(c Change) error {
	for _, l := range tx.r.listeners {
		err := l.fn(c)
		if err == nil {
			continue
		}
		if c.Kind.Added() {
			return err
		}
		tx.r.logger.Warn("prompt: change listener failed on removal", "change", c.Kind.String(), "name", c.Name, "err", err)
	}
	return nil
}

func (tx *Tx) check() {
	if tx.done {
		panic("prompt: Tx used after its Update returned")
	}
}

func (tx *Tx) rejected(kind, name string, err error) error {
	return &RegistrationError{Kind: kind, Name: name, Err: fmt.Errorf("%w: %w", ErrListenerRejected, err)}
}

// AddSection registers s. The name must be unique among sections, and
// reserved names (IsReservedSection) are for the empty Owner only. A
// static section's text must be a well-formed template (see Render):
// a malformed reference or unbalanced braces fail with ErrInvalidTemplate
// now rather than every render later.
func (tx *Tx) AddSection(s Section) (Disposer, error) {
	tx.check()
	if err := validSectionName(s.Name); err != nil {
		return nil, &RegistrationError{Kind: "section", Name: s.Name, Err: err}
	}
	if s.Owner != "" && IsReservedSection(s.Name) {
		return nil, &RegistrationError{Kind: "section", Name: s.Name, Err: fmt.Errorf("%w: %s may not register it (reserved: %s)", ErrReservedName, s.Owner, reservedNames())}
	}
	var refs []string
	if s.Dynamic == nil {
		var err error
		if refs, err = References(s.Name, s.Text); err != nil {
			return nil, &RegistrationError{Kind: "section", Name: s.Name, Err: fmt.Errorf("%w: %w", ErrInvalidTemplate, err)}
		}
	}
	if _, dup := tx.st.sectionByName[s.Name]; dup {
		return nil, &RegistrationError{Kind: "section", Name: s.Name, Err: ErrDuplicateSection}
	}
	e := &sectionEntry{Section: s, refs: refs, h: new(handle)}
	tx.st.sections = append(tx.st.sections, e)
	tx.st.sectionByName[s.Name] = e
	if err := tx.notify(Change{Kind: SectionAdded, Name: s.Name}); err != nil {
		tx.st.sections = tx.st.sections[:len(tx.st.sections)-1]
		delete(tx.st.sectionByName, s.Name)
		return nil, tx.rejected("section", s.Name, err)
	}
	return tx.r.disposer(func(tx *Tx) error { return tx.removeSection(s.Name, e.h) }), nil
}

// RemoveSection unregisters the section called name.
func (tx *Tx) RemoveSection(name string) error { tx.check(); return tx.removeSection(name, nil) }

func (tx *Tx) removeSection(name string, h *handle) error {
	e, ok := tx.st.sectionByName[name]
	if !ok || (h != nil && e.h != h) {
		return &RegistrationError{Kind: "section", Name: name, Err: ErrNotRegistered}
	}
	delete(tx.st.sectionByName, name)
	tx.st.sections = slices.DeleteFunc(tx.st.sections, func(x *sectionEntry) bool { return x == e })
	return tx.notify(Change{Kind: SectionRemoved, Name: name})
}

// AddVariable registers a variable owned by the program that embeds the
// registry. The name must match [a-z][a-z0-9_]* and be unique among
// variables.
func (tx *Tx) AddVariable(name string, fn VariableFunc) (Disposer, error) {
	return tx.AddOwnedVariable(name, "", fn)
}

// AddOwnedVariable registers a variable on behalf of owner, as errors
// name it ("plugin facts"); empty is the embedding program. A non-empty
// owner may not claim a reserved name (IsReservedVariable).
func (tx *Tx) AddOwnedVariable(name, owner string, fn VariableFunc) (Disposer, error) {
	tx.check()
	if owner != "" && IsReservedVariable(name) {
		return nil, &RegistrationError{Kind: "variable", Name: name, Err: fmt.Errorf("%w: %s may not register it (reserved: %s)", ErrReservedName, owner, reservedNames())}
	}
	if !validVariableName(name) {
		return nil, &RegistrationError{Kind: "variable", Name: name, Err: fmt.Errorf("%w: must match [a-z][a-z0-9_]*", ErrInvalidVariable)}
	}
	if fn == nil {
		return nil, &RegistrationError{Kind: "variable", Name: name, Err: fmt.Errorf("%w: nil provider", ErrInvalidVariable)}
	}
	if _, dup := tx.st.varByName[name]; dup {
		return nil, &RegistrationError{Kind: "variable", Name: name, Err: ErrDuplicateVariable}
	}
	e := &variableEntry{name: name, owner: owner, fn: fn, h: new(handle)}
	tx.st.vars = append(tx.st.vars, e)
	tx.st.varByName[name] = e
	if err := tx.notify(Change{Kind: VariableAdded, Name: name}); err != nil {
		tx.st.vars = tx.st.vars[:len(tx.st.vars)-1]
		delete(tx.st.varByName, name)
		return nil, tx.rejected("variable", name, err)
	}
	return tx.r.disposer(func(tx *Tx) error { return tx.removeVariable(name, e.h) }), nil
}

// RemoveVariable unregisters the variable called name.
func (tx *Tx) RemoveVariable(name string) error { tx.check(); return tx.removeVariable(name, nil) }

func (tx *Tx) removeVariable(name string, h *handle) error {
	e, ok := tx.st.varByName[name]
	if !ok || (h != nil && e.h != h) {
		return &RegistrationError{Kind: "variable", Name: name, Err: ErrNotRegistered}
	}
	delete(tx.st.varByName, name)
	tx.st.vars = slices.DeleteFunc(tx.st.vars, func(x *variableEntry) bool { return x == e })
	return tx.notify(Change{Kind: VariableRemoved, Name: name})
}

// AddTool registers a tool. The name must match [a-zA-Z0-9_-]{1,64}, as
// model APIs require, and be unique; Parameters, when set, must be a JSON
// object.
func (tx *Tx) AddTool(t Tool) (Disposer, error) {
	tx.check()
	if !validToolName(t.Name) {
		return nil, &RegistrationError{Kind: "tool", Name: t.Name, Err: fmt.Errorf("%w: must match [a-zA-Z0-9_-]{1,64}", ErrInvalidToolName)}
	}
	if err := validSchema(t.Parameters); err != nil {
		return nil, &RegistrationError{Kind: "tool", Name: t.Name, Err: err}
	}
	if _, dup := tx.st.toolByName[t.Name]; dup {
		return nil, &RegistrationError{Kind: "tool", Name: t.Name, Err: ErrDuplicateTool}
	}
	t.Parameters = slices.Clone(t.Parameters)
	e := &toolEntry{Tool: t, h: new(handle)}
	tx.st.tools = append(tx.st.tools, e)
	tx.st.toolByName[t.Name] = e
	if err := tx.notify(Change{Kind: ToolAdded, Name: t.Name, Tool: &e.Tool}); err != nil {
		tx.st.tools = tx.st.tools[:len(tx.st.tools)-1]
		delete(tx.st.toolByName, t.Name)
		return nil, tx.rejected("tool", t.Name, err)
	}
	return tx.r.disposer(func(tx *Tx) error { return tx.removeTool(t.Name, e.h) }), nil
}

// RemoveTool unregisters the tool called name.
func (tx *Tx) RemoveTool(name string) error { tx.check(); return tx.removeTool(name, nil) }

func (tx *Tx) removeTool(name string, h *handle) error {
	e, ok := tx.st.toolByName[name]
	if !ok || (h != nil && e.h != h) {
		return &RegistrationError{Kind: "tool", Name: name, Err: ErrNotRegistered}
	}
	delete(tx.st.toolByName, name)
	tx.st.tools = slices.DeleteFunc(tx.st.tools, func(x *toolEntry) bool { return x == e })
	return tx.notify(Change{Kind: ToolRemoved, Name: name, Tool: &e.Tool})
}

// AddAssembleHook adds a layer to the assemble waterfall. name identifies
// the hook in errors. Hooks added earlier are outer layers: they run first
// and see the final result of everything added after them.
func (tx *Tx) AddAssembleHook(name string, fn AssembleHook) (Disposer, error) {
	tx.check()
	if fn == nil {
		return nil, &RegistrationError{Kind: "assemble hook", Name: name, Err: ErrNilHook}
	}
	e := &hookEntry{name: name, fn: fn, h: new(handle)}
	tx.st.hooks = append(tx.st.hooks, e)
	if err := tx.notify(Change{Kind: HookAdded, Name: name}); err != nil {
		tx.st.hooks = tx.st.hooks[:len(tx.st.hooks)-1]
		return nil, tx.rejected("assemble hook", name, err)
	}
	return tx.r.disposer(func(tx *Tx) error {
		n := len(tx.st.hooks)
		tx.st.hooks = slices.DeleteFunc(tx.st.hooks, func(x *hookEntry) bool { return x == e })
		if len(tx.st.hooks) == n {
			return &RegistrationError{Kind: "assemble hook", Name: name, Err: ErrNotRegistered}
		}
		return tx.notify(Change{Kind: HookRemoved, Name: name})
	}), nil
}

// Disposer removes one registration. Inside an Update, call its Tx method
// to make the removal part of that update; on its own, call Dispose.
type Disposer interface {
	// Dispose removes the registration in an Update of its own. It
	// returns an error wrapping ErrNotRegistered when the registration is
	// already gone.
	Dispose() error
	// Tx removes the registration as part of tx.
	Tx(tx *Tx) error
}

type disposer struct {
	r  *Registry
	fn func(tx *Tx) error
}

func (r *Registry) disposer(fn func(tx *Tx) error) Disposer { return &disposer{r: r, fn: fn} }

func (d *disposer) Dispose() error { return d.r.Update(d.fn) }

func (d *disposer) Tx(tx *Tx) error {
	tx.check()
	if tx.r != d.r {
		return fmt.Errorf("prompt: disposer used with another registry's Tx")
	}
	return d.fn(tx)
}

// RegisterSection registers s in an Update of its own.
func (r *Registry) RegisterSection(s Section) (d Disposer, err error) {
	err = r.Update(func(tx *Tx) error { d, err = tx.AddSection(s); return err })
	return d, err
}

// RegisterVariable registers a variable in an Update of its own.
func (r *Registry) RegisterVariable(name string, fn VariableFunc) (d Disposer, err error) {
	err = r.Update(func(tx *Tx) error { d, err = tx.AddVariable(name, fn); return err })
	return d, err
}

// RegisterTool registers a tool in an Update of its own.
func (r *Registry) RegisterTool(t Tool) (d Disposer, err error) {
	err = r.Update(func(tx *Tx) error { d, err = tx.AddTool(t); return err })
	return d, err
}

// RegisterAssembleHook adds an assemble hook in an Update of its own.
func (r *Registry) RegisterAssembleHook(name string, fn AssembleHook) (d Disposer, err error) {
	err = r.Update(func(tx *Tx) error { d, err = tx.AddAssembleHook(name, fn); return err })
	return d, err
}

// Tools returns the registered tools in registration order.
func (r *Registry) Tools() []Tool {
	st := r.cur.Load()
	out := make([]Tool, len(st.tools))
	for i, e := range st.tools {
		out[i] = e.Tool
	}
	return out
}

// Names lists the registered section, variable and tool names, each in
// registration order.
func (r *Registry) Names() (sections, variables, tools []string) {
	st := r.cur.Load()
	for _, e := range st.sections {
		sections = append(sections, e.Name)
	}
	for _, e := range st.vars {
		variables = append(variables, e.name)
	}
	for _, e := range st.tools {
		tools = append(tools, e.Name)
	}
	return sections, variables, tools
}

const maxSectionName = 128

func validSectionName(name string) error {
	if name == "" || len(name) > maxSectionName || !utf8.ValidString(name) {
		return fmt.Errorf("%w: must be 1 to %d bytes of UTF-8", ErrInvalidSectionName, maxSectionName)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: control character %U", ErrInvalidSectionName, r)
		}
	}
	return nil
}

// validVariableName reports whether s matches [a-z][a-z0-9_]*.
func validVariableName(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// validToolName reports whether s matches [a-zA-Z0-9_-]{1,64}.
func validToolName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func validSchema(raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return fmt.Errorf("%w: must be a JSON object: %v", ErrInvalidToolSchema, err)
	}
	if obj == nil {
		return fmt.Errorf("%w: must be a JSON object, not null", ErrInvalidToolSchema)
	}
	return nil
}
