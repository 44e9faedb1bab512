package prompt

// Names and orders of the sections the harness itself owns. Tool guidance
// goes in the band 100-199; other negative orders render before the
// persona.
const (
	IdentitySection = "harness:identity"
	PersonaSection  = "deployment:persona"

	IdentityOrder = -100
	PersonaOrder  = 0
)

// Identity is the text of the harness:identity section.
const Identity = "You are an AI agent running on dsh-wasm, a runtime whose tools are sandboxed WebAssembly plugins."

// RegisterHarnessSections registers the two sections the harness owns, in
// one update: the identity at order -100 and the deployment's persona at
// order 0. The persona is the deployment's, the same for every agent; it
// may reference variables such as {{model}}. An empty persona still claims
// the section name and renders nothing.
func RegisterHarnessSections(r *Registry, persona string) (identity, personaSection Disposer, err error) {
	err = r.Update(func(tx *Tx) error {
		var err error
		if identity, err = tx.AddSection(Section{Name: IdentitySection, Order: IdentityOrder, Text: Identity}); err != nil {
			return err
		}
		personaSection, err = tx.AddSection(Section{Name: PersonaSection, Order: PersonaOrder, Text: persona})
		return err
	})
	return identity, personaSection, err
}
