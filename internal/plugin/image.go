package plugin

import (
	"strings"

	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/image"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/fsjail"
	"github.com/tetratelabs/wazero/api"
)

// Images (package internal/image): the first instance of a plugin in a
// given environment records an image of itself right after _initialize,
// and later instances in the same environment start from it. The plugin
// decides what an environment is (environment) and whether images are
// used (p.snapshots); the image set does the rest.

// environment is the key of the images an instance may use.
func (p *Plugin) environment(jail *fsjail.Jail, env []string) string {
	var b strings.Builder
	b.WriteString(p.name)
	b.WriteByte(0)
	if jail != nil {
		for _, m := range jail.Mounts() {
			b.WriteString(m.GuestPath)
			b.WriteByte(0)
		}
	}
	b.WriteByte(1)
	for _, kv := range env {
		b.WriteString(kv)
		b.WriteByte(0)
	}
	return b.String()
}

// imageFor returns the image for env, or nil; see image.Set.For.
func (p *Plugin) imageFor(env string) *image.Image {
	if !p.snapshots {
		return nil
	}
	return p.images.For(env)
}

// capture records mod's state as the image for env, unless there is one.
func (p *Plugin) capture(mod api.Module, env string, guard image.MemGuard) {
	if !p.snapshots {
		return
	}
	if err := p.images.Capture(mod, env, p.snapGlobals, guard); err != nil {
		p.log.Debug("no instance image; later instances start fresh", "err", err)
	}
}

// captureSetup replaces env's image with one taken after dsh_setup; see
// image.Set.CaptureSetup.
func (p *Plugin) captureSetup(mod api.Module, env string, guard image.MemGuard) {
	if !p.snapshots {
		return
	}
	if err := p.images.CaptureSetup(mod, env, p.snapGlobals, guard); err != nil {
		p.log.Debug("no post-setup image; instances keep running dsh_setup", "err", err)
	}
}
