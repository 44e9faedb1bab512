package plugin

import (
	"errors"
	"fmt"

	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/budget"
)

// Sentinel errors. Errors returned by the host wrap one of these with the
// plugin, the export and the cause.
var (
	// ErrSource: the plugin's source cannot be read or resolved.
	ErrSource = errors.New("bad plugin source")
	// ErrDigestMismatch: the module does not match its sha256 pin.
	ErrDigestMismatch = errors.New("sha256 mismatch")
	// ErrABI: the module does not speak a dsh:host ABI version this host
	// knows, or lacks a required export.
	ErrABI = errors.New("unsupported plugin ABI")
	// ErrInit: the plugin's dsh_init failed; nothing it registered stays.
	ErrInit = errors.New("plugin init failed")
	// ErrTrap: the guest trapped (unreachable, out-of-bounds access, stack
	// overflow, out of memory, a Go panic...). The instance is discarded.
	ErrTrap = errors.New("plugin trapped")
	// ErrComputeBudget: a call exceeded its compute budget and was killed.
	ErrComputeBudget = budget.ErrComputeBudget
	// ErrWallClock: a call exceeded its wall-clock cap
	// (grants.limits.wall_timeout), which counts waits too, and was
	// killed.
	ErrWallClock = budget.ErrWallClock
	// ErrDeadlock: a call would wait for an instance held by a call that
	// waits, directly or not, for this one (two plugins emitting each
	// other's events, say); it is refused instead of waiting forever.
	ErrDeadlock = errors.New("plugin call would deadlock")
	// ErrQuota: a plugin's output or registrations exceed one of its
	// byte quotas (grants.limits.*), or a prompt its whole-prompt quota.
	ErrQuota = errors.New("plugin exceeded a byte quota")
	// ErrBadOutput: an export returned output the host cannot accept.
	ErrBadOutput = errors.New("plugin returned bad output")
	// ErrGuest: an export reported an error of its own.
	ErrGuest = errors.New("plugin reported an error")
	// ErrNotLoaded: no plugin by that name, or it has been unloaded.
	ErrNotLoaded = errors.New("plugin not loaded")
	// ErrAlreadyLoaded: a plugin by that name is loaded.
	ErrAlreadyLoaded = errors.New("plugin already loaded")
	// ErrNoTool: no loaded plugin provides the tool.
	ErrNoTool = errors.New("no such tool")
	// ErrNotGranted: the plugin declared a need its grants do not cover.
	ErrNotGranted = errors.New("capability not granted")
	// ErrClosed: the host is closed.
	ErrClosed = errors.New("plugin host closed")
)

// CallError describes a failed call into a plugin.
type CallError struct {
	Plugin string
	Export string
	Err    error
}

func (e *CallError) Error() string {
	return fmt.Sprintf("plugin %q: %s: %v", e.Plugin, e.Export, e.Err)
}

func (e *CallError) Unwrap() error { return e.Err }

// Why a call was stopped by the host rather than by its own limits.
var (
	errUnloaded = errors.New("the plugin was unloaded")
	errAgentEnd = errors.New("the agent ended")
	errHostDown = errors.New("the plugin host closed")
	errReplaced = errors.New("the plugin was reloaded")
	// errDiscarded: an instance that failed is closed; no call runs in it.
	errDiscarded = errors.New("the instance was discarded")
)
