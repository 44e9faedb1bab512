package prompt

import (
	"errors"
	"fmt"
	"strings"
)

// Registration errors. A *RegistrationError wraps one of these.
var (
	ErrDuplicateSection   = errors.New("duplicate section name")
	ErrInvalidSectionName = errors.New("invalid section name")
	ErrDuplicateVariable  = errors.New("duplicate variable name")
	ErrInvalidVariable    = errors.New("invalid variable name")
	ErrDuplicateTool      = errors.New("duplicate tool name")
	ErrInvalidToolName    = errors.New("invalid tool name")
	ErrInvalidToolSchema  = errors.New("invalid tool parameters schema")
	ErrNotRegistered      = errors.New("not registered")
	ErrNilHook            = errors.New("nil assemble hook")
	// ErrNoAssembly: an assemble hook returned neither an assembly nor
	// an error.
	ErrNoAssembly = errors.New("the assemble hook returned no assembly")
	// ErrListenerRejected: a change listener failed, and the change was
	// rolled back.
	ErrListenerRejected = errors.New("change listener rejected the registration")
)

// Render errors. A *RenderError wraps one of these.
var (
	// ErrUnknownVariable: {{name}} names no registered variable.
	ErrUnknownVariable = errors.New("unknown variable")
	// ErrNoValue: {{name}} names a registered variable that has no value
	// in this assembly.
	ErrNoValue = errors.New("variable has no value")
	// ErrMalformedReference: a complete {{…}} group whose content is not a
	// well-formed variable name.
	ErrMalformedReference = errors.New("malformed variable reference")
	// ErrUnbalancedBraces: a {{ that opens no complete group while a }}
	// follows it.
	ErrUnbalancedBraces = errors.New("unbalanced braces")
)

// ErrUnresolvedReference: a static section references a variable that no
// owner provides once the whole deployment has loaded. A
// *ReferenceError wraps it.
var ErrUnresolvedReference = errors.New("unresolved variable reference")

// ReferenceError names the plugin that owns a static section, the section,
// and the variable it references that nobody provides. Plugin is empty
// for a section of the harness (the deployment's persona, say). A
// deployment that holds one fails to open (deploy.New).
type ReferenceError struct {
	Plugin, Section, Variable string
}

func (e *ReferenceError) Error() string {
	who := "the harness"
	if e.Plugin != "" {
		who = fmt.Sprintf("plugin %q", e.Plugin)
	}
	return fmt.Sprintf("%s: section %q references {{%s}}, which no plugin and not the harness provides", who, e.Section, e.Variable)
}

// Unwrap returns ErrUnresolvedReference.
func (e *ReferenceError) Unwrap() error { return ErrUnresolvedReference }

// ErrProvider is wrapped by every *ProviderError.
var ErrProvider = errors.New("prompt provider failed")

// RegistrationError reports a registration the Registry refused.
type RegistrationError struct {
	Kind string // "section", "variable", "tool" or "assemble hook"
	Name string
	Err  error // one of the registration sentinels, possibly wrapped
}

func (e *RegistrationError) Error() string {
	return fmt.Sprintf("register %s %q: %v", e.Kind, e.Name, e.Err)
}

func (e *RegistrationError) Unwrap() error { return e.Err }

// RenderError reports why a section could not be rendered.
type RenderError struct {
	Section string
	// Owner is the failing section's owner ("plugin facts"); empty for
	// the harness's own sections.
	Owner string
	Err   error // one of the render sentinels
	// Ref is the offending text: the whole {{…}} group, or the {{ and what
	// follows it up to the next }} for unbalanced braces.
	Ref string
	// Offset is the byte offset of Ref in the section text.
	Offset int
	// Known lists the registered variable names, sorted, for
	// ErrUnknownVariable.
	Known []string
	// Owners maps the names in Known that an owner other than the
	// harness registered to that owner.
	Owners map[string]string
}

func (e *RenderError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "render section %q", e.Section)
	if e.Owner != "" {
		fmt.Fprintf(&b, " of %s", e.Owner)
	}
	fmt.Fprintf(&b, ": %v %s at byte %d", e.Err, e.Ref, e.Offset)
	if errors.Is(e.Err, ErrUnknownVariable) {
		if len(e.Known) == 0 {
			b.WriteString(" (no variables are registered)")
		} else {
			b.WriteString(" (registered: ")
			for i, k := range e.Known {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(k)
				if o := e.Owners[k]; o != "" {
					fmt.Fprintf(&b, " of %s", o)
				}
			}
			b.WriteString(")")
		}
	}
	return b.String()
}

func (e *RenderError) Unwrap() error { return e.Err }

// ProviderError reports a section text or variable provider, or an assemble
// hook, that failed during Assemble.
type ProviderError struct {
	Kind string // "section", "variable" or "assemble hook"
	Name string
	Err  error
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("%s %q: %v", e.Kind, e.Name, e.Err)
}

// Unwrap returns both ErrProvider and the provider's own error.
func (e *ProviderError) Unwrap() []error { return []error{ErrProvider, e.Err} }
