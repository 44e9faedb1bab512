package deploy

import (
	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// RegistryOf and BusOf reach the deployment's registry and bus for this
// package's tests; neither is API.
func RegistryOf(d *Deployment) *prompt.Registry { return d.reg }
func BusOf(d *Deployment) *events.Bus           { return d.bus }
