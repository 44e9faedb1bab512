package execjail

import (
	"fmt"
	"github.com/dsh-wasm/dsh-wasm/internal/defaults"
)

// Default limits for zero Limits fields.
const (
	DefaultMaxProcesses = defaults.ExecProcesses
	DefaultMemory       = int64(defaults.ExecMemory)
	DefaultFileBytes    = int64(defaults.ExecFileBytes)
)

// Limits bound what a Manager's commands may consume. Processes and
// Memory hold for all its commands together (one plugin in one session);
// FileBytes for each file a command writes.
type Limits struct {
	// Processes is the most tasks (processes and threads) alive at once;
	// a fork or clone past it fails with EAGAIN.
	Processes int
	// Memory is the most memory in bytes (RAM, plus swap where swap is
	// accounted); past it the kernel's OOM killer kills a command process,
	// reported as Result.OutOfMemory.
	Memory int64
	// FileBytes is RLIMIT_FSIZE: writing or truncating a file past it
	// fails with EFBIG (SIGXFSZ is ignored).
	FileBytes int64
}

func (l *Limits) applyDefaults() error {
	if l.Processes < 0 || l.Memory < 0 || l.FileBytes < 0 {
		return fmt.Errorf("%w: negative limit %+v", ErrInvalidOptions, *l)
	}
	if l.Processes == 0 {
		l.Processes = DefaultMaxProcesses
	}
	if l.Memory == 0 {
		l.Memory = DefaultMemory
	}
	if l.FileBytes == 0 {
		l.FileBytes = DefaultFileBytes
	}
	return nil
}

// Bound is one limit and how it is enforced.
type Bound struct {
	Limit int64 `json:"limit"`
	// By names the mechanism ("cgroup v1 pids.max", "RLIMIT_FSIZE"); empty
	// when the limit is not enforced on this system.
	By string `json:"by,omitempty"`
	// Unenforced says why, when By is empty.
	Unenforced string `json:"unenforced,omitempty"`
}

// Enforced reports what a Manager's commands are held to, apart from the
// kill mode.
type Enforcement struct {
	// Mode is the kill mode (see Mode).
	Mode      Mode  `json:"mode"`
	Processes Bound `json:"processes"`
	Memory    Bound `json:"memory"`
	FileBytes Bound `json:"file_bytes"`
	// Capabilities describes what commands keep of the agent's
	// privileges.
	Capabilities string `json:"capabilities"`
	// AgentProc describes whether commands can read the agent's /proc
	// entries (environ, mem).
	AgentProc string `json:"agent_proc"`
	// Scope describes the Landlock scoping of abstract Unix sockets and
	// signals, or why there is none.
	Scope string `json:"scope"`
}

// Enforced reports what commands are held to on this system with the
// default limits.
func Enforced() Enforcement {
	l := Limits{}
	_ = l.applyDefaults()
	return enforcement(Isolation(), l)
}

// Enforced reports what this Manager's commands are held to.
func (m *Manager) Enforced() Enforcement { return enforcement(m.mode, m.opts.Limits) }
