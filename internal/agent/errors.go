package agent

import (
	"errors"
	"fmt"
)

// Errors returned by this package, wrapped with detail. Callers test with
// errors.Is.
var (
	// ErrInvalidOptions: New was given options it cannot run with.
	ErrInvalidOptions = errors.New("invalid agent options")
	// ErrNoMessage: RunTurn found no queued user message to start a turn
	// with, or Enqueue was given an empty one.
	ErrNoMessage = errors.New("no queued user message")
	// ErrTurnRunning: RunTurn was called while a turn of the same agent
	// was running. An agent runs one turn at a time.
	ErrTurnRunning = errors.New("a turn is already running")
	// ErrClosed: the agent was closed.
	ErrClosed = errors.New("agent closed")
	// ErrCancelled is the cause of a turn ended by Agent.Cancel; a
	// TurnResult's Err wraps it (with the reason given to Cancel).
	ErrCancelled = errors.New("turn cancelled")
	// ErrModel: the model call failed or its answer was unusable (an API
	// error, a cut or malformed stream, an error finish).
	ErrModel = errors.New("model call failed")
	// ErrPrompt: the system prompt could not be assembled or rendered.
	ErrPrompt = errors.New("system prompt failed")
	// ErrListener: an event listener failed, or returned a payload the
	// loop cannot use.
	ErrListener = errors.New("event listener failed")
	// ErrInvalidCompaction: CompactionOptions that cannot work.
	ErrInvalidCompaction = errors.New("invalid compaction options")
	// ErrCompaction: a compaction could not summarise the conversation.
	ErrCompaction = errors.New("compaction failed")
	// ErrNoModel: no model was configured, and no agent/request listener
	// supplied one.
	ErrNoModel = errors.New("no model")
	// ErrStepCap: the turn reached Options.MaxSteps; it ends max-tokens.
	ErrStepCap = errors.New("step cap reached")
)

// errDisposed is the cause of a turn cancelled by Close: it ends
// "disposed".
var errDisposed = fmt.Errorf("%w: the agent was closed", ErrClosed)
