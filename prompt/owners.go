package prompt

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Names the harness owns. A registration by anyone else (a Section with an
// Owner, a variable added with AddOwnedVariable) that claims one of them is
// refused with ErrReservedName, whatever the order of registration, so the
// harness's own registration always works.
//
//   - sections: every name beginning "harness:" or "deployment:";
//   - variables: ModelVariable and CwdVariable, which the agent loop owns.
const (
	ModelVariable = "model"
	CwdVariable   = "cwd"
)

var (
	reservedSectionPrefixes = []string{"harness:", "deployment:"}
	reservedVariables       = []string{ModelVariable, CwdVariable}
)

// Errors of ownership and templates.
var (
	// ErrReservedName: a name the harness owns was claimed by an owner
	// other than the harness.
	ErrReservedName = errors.New("name reserved for the harness")
	// ErrInvalidTemplate: a static section's text is not a well-formed
	// template; it wraps the *RenderError that says where.
	ErrInvalidTemplate = errors.New("invalid template")
)

// IsReservedSection reports whether a section name is the harness's.
func IsReservedSection(name string) bool {
	for _, p := range reservedSectionPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// IsReservedVariable reports whether a variable name is the harness's.
func IsReservedVariable(name string) bool { return slices.Contains(reservedVariables, name) }

// reservedNames describes the reserved names for error messages and docs.
func reservedNames() string {
	return fmt.Sprintf("sections %s*; variables %s", strings.Join(reservedSectionPrefixes, "*, "), strings.Join(reservedVariables, ", "))
}

// References returns the variable names text references, in order of first
// appearance, under Render's rules. A text Render would refuse whatever
// the variables (a malformed reference, unbalanced braces) gives a
// *RenderError naming section, exactly as Render would report it.
func References(section, text string) ([]string, error) {
	var refs []string
	lastClose := strings.LastIndex(text, "}}")
	pos := 0
	for {
		k := strings.Index(text[pos:], "{{")
		if k < 0 {
			return refs, nil
		}
		i := pos + k
		j := i + 2
		for j < len(text) && text[j] != '{' && text[j] != '}' {
			j++
		}
		if j+1 < len(text) && text[j] == '}' && text[j+1] == '}' {
			name := text[i+2 : j]
			if !validVariableName(name) {
				return nil, renderErr(section, ErrMalformedReference, text, i, j+2, nil)
			}
			if !slices.Contains(refs, name) {
				refs = append(refs, name)
			}
			pos = j + 2
			continue
		}
		if lastClose >= i+2 {
			end := i + 2 + strings.Index(text[i+2:], "}}") + 2
			return nil, renderErr(section, ErrUnbalancedBraces, text, i, end, nil)
		}
		return refs, nil
	}
}

// Dangling is a static section's reference to a variable nobody has
// registered: the next render of that section fails.
type Dangling struct {
	Section  string `json:"section"`
	Owner    string `json:"owner,omitempty"` // the section's owner; empty for the harness
	Variable string `json:"variable"`
}

func (d Dangling) String() string {
	owner := d.Owner
	if owner == "" {
		owner = "the harness"
	}
	return fmt.Sprintf("section %q (%s) references {{%s}}, which no owner provides", d.Section, owner, d.Variable)
}

// Dangling lists every reference of a static section to a variable that
// is not registered, in registration order of the sections.
func (r *Registry) Dangling() []Dangling { return r.cur.Load().dangling() }

// Dangling is Registry.Dangling as of the open update.
func (tx *Tx) Dangling() []Dangling { tx.check(); return tx.st.dangling() }

// HasVariable reports whether a variable called name is registered as of
// the open update, and its owner.
func (tx *Tx) HasVariable(name string) (owner string, ok bool) {
	tx.check()
	e, ok := tx.st.varByName[name]
	if !ok {
		return "", false
	}
	return e.owner, true
}

// HasAssembleHooks reports whether any assemble hook is registered: such
// a hook may supply variables late, at assembly.
func (r *Registry) HasAssembleHooks() bool { return len(r.cur.Load().hooks) > 0 }

// HasAssembleHooks is Registry.HasAssembleHooks as of the open update.
func (tx *Tx) HasAssembleHooks() bool { tx.check(); return len(tx.st.hooks) > 0 }

func (s *state) dangling() []Dangling {
	var out []Dangling
	for _, e := range s.sections {
		for _, v := range e.refs {
			if _, ok := s.varByName[v]; !ok {
				out = append(out, Dangling{Section: e.Name, Owner: e.Owner, Variable: v})
			}
		}
	}
	return out
}

// SectionOwner returns the owner of the registered section called name.
func (r *Registry) SectionOwner(name string) (owner string, ok bool) {
	e, ok := r.cur.Load().sectionByName[name]
	if !ok {
		return "", false
	}
	return e.Owner, true
}
