package deploy

import (
	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// RegistryOf and BusOf reach the deployment's registry and bus for this
// package's tests; neither is API.
func RegistryOf(d *Deployment) *prompt.Registry { return d.reg }
func BusOf(d *Deployment) *events.Bus           { return d.bus }

// HostSpec is s in the plugin host's terms, for tests that reload
// through plugin.HostOf.
func HostSpec(s PluginSpec) plugin.Spec { return s.spec() }
