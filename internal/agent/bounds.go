package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
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

// Defaults of OutputBounds: what one step's model call may send back.
const (
	// DefaultStepOutputBytes bounds one step's streamed output (see
	// model.Limits.Bytes for what counts).
	DefaultStepOutputBytes = 16 << 20
	// DefaultStepOutputTime bounds one step's model call, first byte to
	// finish: a stream that keeps sending is cut here, where the
	// provider's idle timeout never fires.
	DefaultStepOutputTime = 30 * time.Minute
	// DefaultToolArgumentBytes bounds the arguments of one tool call.
	DefaultToolArgumentBytes = 4 << 20
)

// OutputBounds bound what one model call may send back, per agent (a
// deployment sets them for its agents, deployment keys
// limits.step_output_bytes, limits.step_output_time and
// limits.tool_argument_bytes). Zero fields take the defaults. A stream
// past one ends its step as an error wrapping model.ErrOutputLimit; the
// chunks received are recorded up to the bound, and nothing past it is
// kept. Every model call of the loop goes through them (generate), so
// every provider kind is bounded alike.
type OutputBounds struct {
	// StepBytes bounds a step's streamed output.
	StepBytes int64
	// StepTime bounds a step's model call, from the request to the
	// finish chunk.
	StepTime time.Duration
	// ToolArgumentBytes bounds one tool call's arguments.
	ToolArgumentBytes int64
}

// WithDefaults is b with every zero field set to its default: the one
// place the defaults are read.
func (b OutputBounds) WithDefaults() OutputBounds {
	if b.StepBytes == 0 {
		b.StepBytes = DefaultStepOutputBytes
	}
	if b.StepTime == 0 {
		b.StepTime = DefaultStepOutputTime
	}
	if b.ToolArgumentBytes == 0 {
		b.ToolArgumentBytes = DefaultToolArgumentBytes
	}
	return b
}

func (b OutputBounds) negative() bool {
	return b.StepBytes < 0 || b.StepTime < 0 || b.ToolArgumentBytes < 0
}

// limits are the accumulator's share of the bounds.
func (b OutputBounds) limits() model.Limits {
	return model.Limits{Bytes: b.StepBytes, ArgumentBytes: b.ToolArgumentBytes}
}

// context is ctx with the step's time bound; its cause wraps
// model.ErrOutputLimit.
func (b OutputBounds) context(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, b.StepTime,
		fmt.Errorf("%w: the step's output took longer than %v", model.ErrOutputLimit, b.StepTime))
}
