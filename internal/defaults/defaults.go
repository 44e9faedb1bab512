// Package defaults is the one definition of every default and every
// maximum of a plugin's grants (runtime/config.Grants): the numbers the
// YAML decoder validates against, the defaults runtime/config resolves
// zero fields to, and the fallbacks the jails (fsjail, execjail, netguard)
// apply when they are used alone. It imports only internal/pluginstate (a
// leaf that owns the state default, so that it stays a leaf itself), so
// that every one of them can refer to it instead of keeping a copy.
package defaults

import (
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/pluginstate"
)

const (
	kib = 1 << 10
	mib = 1 << 20
	gib = 1 << 30
)

// Defaults of grants.exec.
const (
	ExecTimeout     = 2 * time.Minute  // timeout
	ExecMaxTimeout  = 10 * time.Minute // max_timeout
	ExecOutputBytes = 30000            // output_bytes, per stream
	ExecProcesses   = 512              // max_processes, all commands of a plugin in a session
	ExecMemory      = 1 * gib          // memory, all commands of a plugin in a session
	ExecFileBytes   = 1 * gib          // file_bytes, per file a command writes
)

// Defaults of grants.net.
const (
	NetResponseBytes = 5 * mib          // response_bytes
	NetTimeout       = 30 * time.Second // timeout
)

// Defaults of grants.limits.
const (
	Memory      = 128 * mib        // memory
	CallTimeout = 30 * time.Second // call_timeout
	InitTimeout = 10 * time.Second // init_timeout
	// WallTimeout is wall_timeout: long enough for a command of
	// exec.max_timeout to finish (raised to max_timeout + WallSlack when
	// that is longer).
	WallTimeout   = 15 * time.Minute
	WallSlack     = time.Minute
	HostBytes     = 256 * mib            // host_bytes
	PromptBytes   = 64 * kib             // prompt_bytes
	LogBytes      = 1 * mib              // log_bytes, per minute
	StateBytes    = pluginstate.MaxBytes // state_bytes, per session
	DiskBytes     = 1 * gib              // disk_bytes
	DiskFiles     = 4096                 // disk_files
	Registrations = 1024                 // max_registrations: sections + variables + tools + subscriptions
)

// Maxima and minima the decoder enforces.
const (
	MaxDuration      = 24 * time.Hour // any timeout
	MaxOutputBytes   = 64 * mib       // exec.output_bytes
	MaxProcesses     = 65536          // exec.max_processes
	MinExecMemory    = 4 * mib        // exec.memory (less cannot start a shell)
	MaxExecMemory    = 1 << 50        // exec.memory (1 PiB: "as much as the machine has")
	MaxFileBytes     = 1 << 50        // exec.file_bytes
	MaxResponse      = 1 * gib        // net.response_bytes
	MaxMemory        = 4 * gib        // limits.memory (the wasm32 maximum)
	MaxHostBytes     = 4 * gib        // limits.host_bytes
	MinHostBytes     = 1 * mib        // limits.host_bytes
	MaxPromptBytes   = 16 * mib       // limits.prompt_bytes
	MaxLogBytes      = 1 * gib        // limits.log_bytes
	MaxStateBytes    = 1 * gib        // limits.state_bytes
	MaxDiskBytes     = 1024 * gib     // limits.disk_bytes
	MaxDiskFiles     = 1 << 24        // limits.disk_files
	MaxRegistrations = 1 << 20        // limits.max_registrations
	WasmPageSize     = 64 * kib
)
