package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// Defaults of AssemblyBounds.
const (
	// DefaultAssemblyTimeout bounds one step's prompt assembly: every
	// dynamic section, variable and assemble hook together.
	DefaultAssemblyTimeout = 5 * time.Second
	// DefaultPromptBytes bounds the text one assembly takes in, and the
	// rendered system prompt.
	DefaultPromptBytes = 1 << 20
)

// ErrAssemblyTimeout is the cause of a prompt assembly that passed its
// deadline: the plugin still computing is stopped, and the turn ends with
// an error naming it.
var ErrAssemblyTimeout = errors.New("prompt assembly deadline passed")

// AssemblyBounds bound one step's prompt assembly, per agent (a
// deployment sets them for its agents). Zero fields take the defaults.
type AssemblyBounds struct {
	// Timeout is the deadline of the whole assembly: all dynamic
	// sections, variables and assemble hooks of a step together. A
	// provider that misses it fails the turn (ErrPrompt) with an error
	// naming the plugin; the turn never hangs on it.
	Timeout time.Duration
	// PromptBytes is the whole-prompt quota: the text an assembly takes
	// in, charged as it arrives (a plugin's dynamic text before the host
	// copies it), and the rendered system prompt. Past it the turn fails
	// naming the plugin and the quota.
	PromptBytes int64
}

func (b AssemblyBounds) withDefaults() AssemblyBounds {
	if b.Timeout == 0 {
		b.Timeout = DefaultAssemblyTimeout
	}
	if b.PromptBytes == 0 {
		b.PromptBytes = DefaultPromptBytes
	}
	return b
}

// context is ctx with the assembly's deadline and quota.
func (b AssemblyBounds) context(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx = prompt.WithQuota(ctx, prompt.NewQuota(b.PromptBytes))
	return context.WithTimeoutCause(ctx, b.Timeout, fmt.Errorf("%w (%v, set per deployment)", ErrAssemblyTimeout, b.Timeout))
}
