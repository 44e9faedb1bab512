package plugintest

import "github.com/dsh-wasm/dsh-wasm/internal/plugin"

// HostOf is the plugin host under h, for this package's tests; it is not
// API.
func HostOf(h *Host) *plugin.Host { return h.host }
