// Package execjail runs shell commands for plugins granted exec.
//
// A Manager serves one plugin: it knows the directory roots the plugin may
// use as a working directory, the exact environment its commands get, the
// output cap and whether commands run inside bubblewrap. Run executes a
// command and waits; Start/Poll/Wait/Kill manage background tasks by id;
// Close kills everything still running.
//
// Guaranteed, in every mode:
//   - The working directory is resolved with filepath.EvalSymlinks and must
//     be an existing directory inside one of the roots (also resolved);
//     under a root given opened (Root.Dir) it is instead opened beneath
//     that directory's descriptor, and the command starts in it through
//     the descriptor. Otherwise the command does not start
//     (ErrCwdOutsideRoots, ErrInvalidCwd).
//   - The environment is exactly Options.Env plus Command.Env; nothing is
//     inherited from the host process. (bash itself still sets PWD, SHLVL
//     and _ as it always does, and bwrap sets PWD.)
//   - stdout and stderr are captured separately and each is capped at
//     OutputBytes; longer output keeps its head and tail (see Output).
//   - A command runs in its own session with no controlling terminal, so it
//     cannot inject input into the terminal the agent runs in (TIOCSTI).
//   - Exit code, fatal signal, timeout and cancellation are reported in
//     Result; context cancellation, the timeout, Kill and Close kill the
//     command with SIGKILL (there is no grace period).
//
// What "kill" reaches depends on the isolation Mode, chosen once per
// Manager (the best available unless Options.Isolation asks for one) and
// reported by Manager.Isolation and, for the system, by Isolation():
//   - ModePIDNamespace (needs root or CAP_SYS_ADMIN): the command is PID 1
//     of a new PID namespace, in a mount namespace of its own with its own
//     /proc (which it cannot unmount: it has no capabilities). Killing it makes the
//     kernel kill every process in the namespace, including daemons that
//     called setsid or double-forked, and Result is only reported after
//     they are all gone. When the command exits on its own, whatever it
//     left running is killed too: background work must use Start. Being
//     PID 1, the command (like any init) ignores signals it sends itself,
//     such as kill $$, unless it installs a handler.
//   - ModeCgroup (a writable cgroup v2 directory): the command starts in a
//     fresh cgroup; kill writes cgroup.kill (or freezes and kills every
//     member on kernels without it). Anything the command started is
//     reached, however it detached, unless it could move itself to
//     another cgroup it has write access to.
//   - ModeProcessGroup (always available, weak): the command leads a new
//     session and kill signals that process group. A process that calls
//     setsid or setpgid (a daemon) ESCAPES and keeps running. Use this mode
//     only where nothing better exists; Isolation() says when that is.
//
// If the agent process dies, the command's top process receives SIGKILL
// (Pdeathsig, armed from a dedicated OS thread that never exits); in the
// PID namespace mode that takes the whole tree down, in the other modes
// only the top process is signalled.
//
// Whatever the mode, every command starts through a launch helper (a
// re-execution of the agent's binary, see helper_linux.go) that, before
// exec: puts it in the Manager's cgroups, which hold Limits.Processes and
// Limits.Memory for all its commands together (cgroup v2, or v1 for a
// controller v2 does not carry); sets RLIMIT_FSIZE to Limits.FileBytes;
// clears the ambient, bounding and inheritable capability sets, so even a
// root command has none; sets no_new_privs; and, on kernels with Landlock
// ABI 6, scopes abstract Unix sockets and signals to the command's own
// processes. The agent process is made non-dumpable, so a same-uid
// command without CAP_SYS_PTRACE cannot read its /proc/<pid>/environ or
// mem. Enforced reports what this system enforces, apart from the mode.
//
// With Options.Sandbox, the command runs inside bubblewrap (bwrap): the
// sandbox's root is an empty read-only tmpfs holding only /usr, /bin,
// /sbin, /lib*, a curated /etc (read-only) and the roots (writable or
// read-only as granted, parents bound before children, so the narrower
// grant wins); /tmp, /var/tmp and /run are private tmpfs (charged to the
// memory limit); /dev and /proc are minimal and new; PID, IPC and UTS
// namespaces are private; all capabilities are dropped; and the network
// is unshared (only a loopback device) unless Options.Network is set, in
// which case the command has the host's full network: bwrap cannot filter
// by host. No host socket outside the roots is in the sandbox. A missing
// bwrap fails the run with ErrBwrapMissing; there is never a silent
// fallback.
//
// Host state (Options.Hidden: the agent's compile cache and sessions) is
// never a root or a working directory. With Sandbox each hidden directory
// inside a root is covered by an empty read-only tmpfs; in
// ModePIDNamespace without Sandbox the launch helper covers every one in
// the command's own mount namespace. Either way the directories between a
// root and a hidden one are bound onto themselves, so the command cannot
// rename them (EBUSY) and move the host state out from under the cover. Landlock is not used for it: its
// rules only allow, and a rule for a root would allow all below it.
//
// Not guaranteed: without Sandbox, a command can read and write anything
// the agent's user can without capabilities, anywhere, read-only roots
// included (and, outside ModePIDNamespace, the hidden host state), and
// use the network; only its starting directory is confined. For a root
// given as a path, the cwd check is path based and can race with a
// concurrent rename of a directory component; a root given opened
// (Root.Dir) is reached only through its descriptor. No CPU quota and no
// total disk quota (RLIMIT_FSIZE bounds each file) are applied, and no
// seccomp filter is installed.
package execjail

import (
	"context"
	"errors"
	"fmt"
	"github.com/dsh-wasm/dsh-wasm/internal/defaults"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Errors; test with errors.Is.
var (
	ErrCwdOutsideRoots      = errors.New("execjail: working directory outside the granted roots")
	ErrInvalidCwd           = errors.New("execjail: invalid working directory")
	ErrInvalidCommand       = errors.New("execjail: invalid command")
	ErrInvalidOptions       = errors.New("execjail: invalid options")
	ErrBwrapMissing         = errors.New("execjail: sandbox requested but bwrap (bubblewrap) is not installed")
	ErrSandboxFailed        = errors.New("execjail: bwrap could not set up the sandbox")
	ErrIsolationUnavailable = errors.New("execjail: isolation mode unavailable")
	ErrUnknownTask          = errors.New("execjail: unknown task")
	ErrTooManyTasks         = errors.New("execjail: too many running tasks")
	ErrClosed               = errors.New("execjail: manager closed")
	ErrStart                = errors.New("execjail: cannot start command")
)

// Defaults for zero Options fields.
const (
	DefaultOutputBytes = defaults.ExecOutputBytes // per stream
	DefaultMaxRunning  = 16
	DefaultMaxFinished = 64
)

// Mode is how a Manager makes sure that killing a command kills everything
// it started. See the package doc for what each mode reaches.
type Mode string

// Isolation modes, strongest first.
const (
	ModePIDNamespace Mode = "pid-namespace"
	ModeCgroup       Mode = "cgroup-v2"
	ModeProcessGroup Mode = "process-group"
)

// Describe states in one sentence what killing a command reaches in m.
func (m Mode) Describe() string {
	switch m {
	case ModePIDNamespace:
		return "PID namespace: killing a command kills every process it started, including setsid daemons"
	case ModeCgroup:
		return "cgroup v2: killing a command kills every process in its cgroup, including setsid daemons"
	case ModeProcessGroup:
		return "process group only (weak): processes that call setsid or setpgid escape kill and timeouts"
	}
	return "unknown isolation mode"
}

var (
	isolationOnce sync.Once
	isolationBest Mode
)

// Isolation reports the strongest mode available to this process (probed
// once, by starting a trivial child in each mode); "" on systems other than
// Linux, where NewManager fails with ErrIsolationUnavailable.
func Isolation() Mode {
	isolationOnce.Do(func() { isolationBest = bestMode() })
	return isolationBest
}

// Root is a directory a command may use as its working directory.
type Root struct {
	Path string
	// Writable roots are bound read-write in the sandbox; without Sandbox
	// the flag has no effect (the command has the agent's own rights).
	Writable bool
	// Dir, when set, is the root already opened, and Path (absolute and
	// clean) only where commands are told it is: it is never resolved.
	// A command's Dir under Path is opened beneath Dir (symbolic links
	// that stay beneath it are followed), the command starts in that
	// directory through its descriptor, and the sandbox binds Dir at
	// Path from its descriptor. NewManager takes its own handle on Dir,
	// which the caller may close once it returns.
	Dir *os.Root
}

// Options configure a Manager.
type Options struct {
	// Roots are the allowed working directories (at least one). The first
	// is the default working directory.
	Roots []Root
	// Env is the exact environment of every command, as KEY=VALUE.
	Env []string
	// OutputBytes caps stdout and stderr, each (DefaultOutputBytes when 0).
	OutputBytes int
	// Sandbox runs commands inside bwrap.
	Sandbox bool
	// Network keeps the host network inside the sandbox.
	Network bool
	// BwrapPath is the bwrap binary; empty looks "bwrap" up in the agent's
	// PATH at each sandboxed run.
	BwrapPath string
	// Isolation requires a mode; empty picks the best available.
	Isolation Mode
	// MaxRunning bounds concurrent background tasks (DefaultMaxRunning).
	MaxRunning int
	// MaxFinished bounds finished tasks kept for Poll; the oldest are
	// forgotten first (DefaultMaxFinished).
	MaxFinished int
	// Hidden are host directories commands must not see (the host's own
	// state). A root inside one is refused, and so is a working directory.
	// With Sandbox, each one inside a root is covered by an empty
	// read-only tmpfs; in ModePIDNamespace without Sandbox the launch
	// helper covers every one the same way in the command's own mount
	// namespace. In the other modes without Sandbox a command is not
	// confined to its roots at all (see the package documentation), and
	// Hidden cannot hide anything from it. A path that does not exist
	// when the Manager is made is skipped.
	Hidden []string
	// Limits bound the commands' processes, memory and file sizes; zero
	// fields take the defaults (DefaultMaxProcesses, DefaultMemory,
	// DefaultFileBytes). Enforced reports how each is enforced.
	Limits Limits
}

// Command is one command to run. Exactly one of Script and Argv is set.
type Command struct {
	// Script runs as bash -c Script.
	Script string
	// Argv runs directly; Argv[0] without a slash is looked up in the
	// command's PATH (from its environment).
	Argv []string
	// Dir is an absolute working directory inside a root; empty means the
	// first root.
	Dir string
	// Env entries (KEY=VALUE) override Options.Env for this command.
	Env []string
	// Stdin is the command's input; nil means /dev/null.
	Stdin []byte
	// Timeout kills the command after this long; 0 means no timeout.
	Timeout time.Duration
	// StdoutTee and StderrTee, when set, also receive everything the
	// command writes to that stream, uncapped (a spill file, say). A
	// failing tee must swallow its error: a tee's error stops the copy.
	StdoutTee, StderrTee io.Writer
}

// Result describes a finished command.
type Result struct {
	// ExitCode is the exit status, or -1 when a signal ended the command.
	// In the sandbox a command killed by a signal inside it reports
	// 128+signal, like a shell.
	ExitCode int `json:"exit_code"`
	// Signal names the signal that ended the command ("SIGKILL").
	Signal string `json:"signal,omitempty"`
	// TimedOut: the command ran past its Timeout and was killed.
	TimedOut bool `json:"timed_out,omitempty"`
	// Canceled: the command was killed by context cancellation, Kill or
	// Close.
	Canceled bool `json:"canceled,omitempty"`
	// OutOfMemory: while the command ran, the kernel's OOM killer killed a
	// process of this Manager's commands because they reached
	// Limits.Memory.
	OutOfMemory bool          `json:"out_of_memory,omitempty"`
	Stdout      Output        `json:"stdout"`
	Stderr      Output        `json:"stderr"`
	Duration    time.Duration `json:"duration"`
}

// Status is a background task's state; Result is partial while Running.
type Status struct {
	ID      string `json:"id"`
	Running bool   `json:"running"`
	Result  Result `json:"result"`
}

// Manager runs commands for one plugin. It is safe for concurrent use.
type Manager struct {
	opts  Options
	roots []Root // resolved
	// hidden are Options.Hidden, resolved, the ones that exist.
	hidden []string
	mode   Mode
	bash   string

	mu       sync.Mutex
	closed   bool
	seq      int
	procs    map[*process]struct{} // everything running, Run and Start alike
	tasks    map[string]*process
	finished []string    // finished task ids, oldest first
	limits   *limitGroup // created with the first command
}

// NewManager validates opts, resolves the roots and picks the isolation
// mode.
func NewManager(opts Options) (*Manager, error) {
	if len(opts.Roots) == 0 {
		return nil, fmt.Errorf("%w: no roots", ErrInvalidOptions)
	}
	if opts.OutputBytes < 0 || opts.MaxRunning < 0 || opts.MaxFinished < 0 {
		return nil, fmt.Errorf("%w: negative limit", ErrInvalidOptions)
	}
	if opts.OutputBytes == 0 {
		opts.OutputBytes = DefaultOutputBytes
	}
	if opts.MaxRunning == 0 {
		opts.MaxRunning = DefaultMaxRunning
	}
	if opts.MaxFinished == 0 {
		opts.MaxFinished = DefaultMaxFinished
	}
	if err := checkEnv(opts.Env); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if err := opts.Limits.applyDefaults(); err != nil {
		return nil, err
	}
	m := &Manager{opts: opts, procs: map[*process]struct{}{}, tasks: map[string]*process{}}
	ok := false
	defer func() {
		if !ok {
			m.closeRoots()
		}
	}()
	for _, h := range opts.Hidden {
		if !filepath.IsAbs(h) {
			return nil, fmt.Errorf("%w: hidden path %q is not absolute", ErrInvalidOptions, h)
		}
		resolved, err := filepath.EvalSymlinks(h)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: hidden path %q: %w", ErrInvalidOptions, h, err)
		}
		m.hidden = append(m.hidden, resolved)
	}
	for _, r := range opts.Roots {
		if !filepath.IsAbs(r.Path) {
			return nil, fmt.Errorf("%w: root %q is not absolute", ErrInvalidOptions, r.Path)
		}
		if r.Dir != nil {
			if filepath.Clean(r.Path) != r.Path {
				return nil, fmt.Errorf("%w: root %q is not clean", ErrInvalidOptions, r.Path)
			}
			own, err := r.Dir.OpenRoot(".")
			if err != nil {
				return nil, fmt.Errorf("%w: root %q: %w", ErrInvalidOptions, r.Path, err)
			}
			m.roots = append(m.roots, Root{Path: r.Path, Writable: r.Writable, Dir: own})
			continue
		}
		resolved, err := filepath.EvalSymlinks(r.Path)
		if err != nil {
			return nil, fmt.Errorf("%w: root %q: %w", ErrInvalidOptions, r.Path, err)
		}
		if fi, err := os.Stat(resolved); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("%w: root %q is not a directory", ErrInvalidOptions, r.Path)
		}
		if h := m.hiddenAt(resolved); h != "" {
			return nil, fmt.Errorf("%w: root %q is inside %s, which commands may not see", ErrInvalidOptions, r.Path, h)
		}
		m.roots = append(m.roots, Root{Path: resolved, Writable: r.Writable})
	}
	switch opts.Isolation {
	case "":
		if m.mode = Isolation(); m.mode == "" {
			return nil, fmt.Errorf("%w: %w", ErrIsolationUnavailable, probe(ModeProcessGroup))
		}
	case ModePIDNamespace, ModeCgroup, ModeProcessGroup:
		if err := probe(opts.Isolation); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrIsolationUnavailable, opts.Isolation, err)
		}
		m.mode = opts.Isolation
	default:
		return nil, fmt.Errorf("%w: unknown isolation mode %q", ErrInvalidOptions, opts.Isolation)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		return nil, fmt.Errorf("%w: bash not found: %w", ErrInvalidOptions, err)
	}
	m.bash = bash
	if err := hardenAgent(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIsolationUnavailable, err)
	}
	ok = true
	return m, nil
}

// closeRoots releases the Manager's handles on opened roots.
func (m *Manager) closeRoots() {
	for i, r := range m.roots {
		if r.Dir != nil {
			r.Dir.Close()
			m.roots[i].Dir = nil
		}
	}
}

// Isolation reports the mode this Manager uses.
func (m *Manager) Isolation() Mode { return m.mode }

// Run runs cmd and waits for it. A non-zero exit, a signal or a timeout is
// reported in Result, not as an error. The error is non-nil when the
// command could not start (cwd refused, bwrap missing, ...) or when ctx
// ended it; in the latter case Result holds what it produced, with
// Canceled set, and the error wraps ctx.Err().
func (m *Manager) Run(ctx context.Context, cmd Command) (Result, error) {
	p, err := m.start(ctx, cmd, false)
	if err != nil {
		return Result{}, err
	}
	<-p.done
	res, err := p.outcome()
	if err == nil && p.reason() == reasonCanceled && ctx.Err() != nil {
		err = fmt.Errorf("execjail: command canceled: %w", context.Cause(ctx))
	}
	return res, err
}

// Start runs cmd in the background and returns its task id. ctx bounds the
// task's whole life: pass the plugin's context, not a tool call's.
func (m *Manager) Start(ctx context.Context, cmd Command) (string, error) {
	p, err := m.start(ctx, cmd, true)
	if err != nil {
		return "", err
	}
	return p.id, nil
}

// Poll reports a task's state and its output so far.
func (m *Manager) Poll(id string) (Status, error) {
	p, err := m.task(id)
	if err != nil {
		return Status{}, err
	}
	return p.status(id), nil
}

// Wait blocks until the task ends or ctx is done.
func (m *Manager) Wait(ctx context.Context, id string) (Status, error) {
	p, err := m.task(id)
	if err != nil {
		return Status{}, err
	}
	select {
	case <-p.done:
		return p.status(id), nil
	case <-ctx.Done():
		return p.status(id), ctx.Err()
	}
}

// Kill kills a task with everything it started, waits until it is gone and
// returns its final state. Killing a finished task is a no-op.
func (m *Manager) Kill(id string) (Status, error) {
	p, err := m.task(id)
	if err != nil {
		return Status{}, err
	}
	p.kill(reasonCanceled)
	<-p.done
	return p.status(id), nil
}

// Remove forgets a finished task; a running one must be killed first.
func (m *Manager) Remove(id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.tasks[id]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTask, id)
	}
	if !p.isDone() {
		return fmt.Errorf("execjail: task %q is still running", id)
	}
	delete(m.tasks, id)
	for i, f := range m.finished {
		if f == id {
			m.finished = append(m.finished[:i], m.finished[i+1:]...)
			break
		}
	}
	return nil
}

// Close kills every running command (Run and Start alike), waits for them
// to end, and makes further calls fail with ErrClosed. Finished tasks can
// still be polled.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	procs := make([]*process, 0, len(m.procs))
	for p := range m.procs {
		procs = append(procs, p)
	}
	m.mu.Unlock()
	for _, p := range procs {
		p.kill(reasonCanceled)
	}
	for _, p := range procs {
		<-p.done
	}
	m.mu.Lock()
	limits := m.limits
	m.limits = nil
	m.mu.Unlock()
	// Anything still in the limit groups (a daemon that escaped a
	// process-group kill) is killed with them.
	limits.remove()
	m.mu.Lock()
	m.closeRoots()
	m.mu.Unlock()
	return nil
}

// limitGroup returns the Manager's cgroups, creating them once.
func (m *Manager) limitGroup() (*limitGroup, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if m.limits == nil {
		g, err := newLimitGroup(m.opts.Limits)
		if err != nil {
			return nil, fmt.Errorf("%w: resource limits: %w", ErrStart, err)
		}
		m.limits = g
	}
	return m.limits, nil
}

func (m *Manager) task(id string) (*process, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.tasks[id]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTask, id)
	}
	return p, nil
}

// register admits a process (and, for a task, gives it an id) unless the
// Manager is closed or too many tasks run.
func (m *Manager) register(p *process, task bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if task {
		running := 0
		for _, t := range m.tasks {
			if !t.isDone() {
				running++
			}
		}
		if running >= m.opts.MaxRunning {
			return fmt.Errorf("%w: %d running (limit %d)", ErrTooManyTasks, running, m.opts.MaxRunning)
		}
		m.seq++
		p.id = fmt.Sprintf("task-%d", m.seq)
		m.tasks[p.id] = p
	}
	m.procs[p] = struct{}{}
	return nil
}

// finish is called once per registered process after it ended (or failed
// to start, with started false).
func (m *Manager) finish(p *process, started bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.procs, p)
	if p.id == "" {
		return
	}
	if !started {
		delete(m.tasks, p.id)
		return
	}
	m.finished = append(m.finished, p.id)
	for len(m.finished) > m.opts.MaxFinished {
		delete(m.tasks, m.finished[0])
		m.finished = m.finished[1:]
	}
}

// workDir is where a command starts: host is its working directory as
// the launch sees it, guest as the sandbox sees it, and file, when set,
// the opened directory host names (the caller closes it once the command
// started).
type workDir struct {
	host, guest string
	file        *os.File
}

// resolveDir applies the cwd rules. A dir under an opened root is opened
// beneath it and named by its descriptor; any other is resolved as a
// path and must lie in a root given as a path.
func (m *Manager) resolveDir(dir string) (workDir, error) {
	if dir == "" {
		r := m.roots[0]
		if r.Dir != nil {
			return m.openBeneath(r, ".")
		}
		return workDir{host: r.Path, guest: r.Path}, nil
	}
	if !filepath.IsAbs(dir) {
		return workDir{}, fmt.Errorf("%w: %q is not absolute", ErrInvalidCwd, dir)
	}
	// The longest opened root holding dir by name serves it.
	var best *Root
	for i, r := range m.roots {
		if r.Dir != nil && within(r.Path, filepath.Clean(dir)) && (best == nil || len(r.Path) > len(best.Path)) {
			best = &m.roots[i]
		}
	}
	if best != nil {
		rel, err := filepath.Rel(best.Path, filepath.Clean(dir))
		if err != nil {
			return workDir{}, fmt.Errorf("%w: %q: %w", ErrInvalidCwd, dir, err)
		}
		return m.openBeneath(*best, rel)
	}
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return workDir{}, fmt.Errorf("%w: %q: %w", ErrInvalidCwd, dir, err)
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return workDir{}, fmt.Errorf("%w: %q: %w", ErrInvalidCwd, dir, err)
	}
	if !fi.IsDir() {
		return workDir{}, fmt.Errorf("%w: %q is not a directory", ErrInvalidCwd, dir)
	}
	if h := m.hiddenAt(resolved); h != "" {
		return workDir{}, fmt.Errorf("%w: %q resolves to %q, inside %s, which commands may not see", ErrCwdOutsideRoots, dir, resolved, h)
	}
	for _, r := range m.roots {
		if r.Dir == nil && within(r.Path, resolved) {
			return workDir{host: resolved, guest: resolved}, nil
		}
	}
	return workDir{}, fmt.Errorf("%w: %q resolves to %q", ErrCwdOutsideRoots, dir, resolved)
}

// openBeneath opens rel beneath the opened root r: os.Root follows a
// symbolic link only while it stays beneath r.
func (m *Manager) openBeneath(r Root, rel string) (workDir, error) {
	m.mu.Lock()
	root := r.Dir
	var f *os.File
	var err error
	if m.closed || root == nil {
		err = ErrClosed
	} else {
		f, err = root.Open(rel)
	}
	m.mu.Unlock()
	shown := filepath.Join(r.Path, rel)
	if err != nil {
		if errors.Is(err, ErrClosed) {
			return workDir{}, err
		}
		// os.Root reports a path that leaves it with an error that is
		// not an errno.
		var pe *fs.PathError
		var errno syscall.Errno
		if errors.As(err, &pe) && !errors.As(pe.Err, &errno) {
			return workDir{}, fmt.Errorf("%w: %q: %w", ErrCwdOutsideRoots, shown, err)
		}
		return workDir{}, fmt.Errorf("%w: %q: %w", ErrInvalidCwd, shown, err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.IsDir() {
		f.Close()
		return workDir{}, fmt.Errorf("%w: %q is not a directory", ErrInvalidCwd, shown)
	}
	// Host state is refused as a working directory here too: the kernel
	// names the directory the descriptor holds, wherever it now is.
	if real, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd())); err == nil {
		if h := m.hiddenAt(real); h != "" {
			f.Close()
			return workDir{}, fmt.Errorf("%w: %q is %q, inside %s, which commands may not see", ErrCwdOutsideRoots, shown, real, h)
		}
	}
	return workDir{host: fmt.Sprintf("/proc/self/fd/%d", f.Fd()), guest: shown, file: f}, nil
}

// hiddenAt returns the hidden directory that is path or holds it, or "".
func (m *Manager) hiddenAt(path string) string {
	for _, h := range m.hidden {
		if within(h, path) {
			return h
		}
	}
	return ""
}

// guards returns the directories between a root and a hidden directory
// inside it, parents first: a command must not rename them, or the host
// state would move out from under its cover (and the host would make a
// new one where it looks). Each is bound onto itself, so the kernel
// refuses to rename or remove it (EBUSY: a mount point).
func (m *Manager) guards() []string {
	seen := map[string]bool{}
	var out []string
	for _, h := range m.hidden {
		for _, r := range m.roots {
			if !within(r.Path, h) || r.Path == h {
				continue
			}
			var chain []string
			for d := filepath.Dir(h); d != r.Path && within(r.Path, d); d = filepath.Dir(d) {
				chain = append(chain, d)
			}
			for i := len(chain) - 1; i >= 0; i-- {
				if !seen[chain[i]] {
					seen[chain[i]] = true
					out = append(out, chain[i])
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) < len(out[j]) })
	return out
}

// hiddenInRoots returns the hidden directories that lie inside a root.
func (m *Manager) hiddenInRoots() []string {
	var in []string
	for _, h := range m.hidden {
		for _, r := range m.roots {
			if within(r.Path, h) {
				in = append(in, h)
				break
			}
		}
	}
	return in
}

func within(root, path string) bool {
	if root == path || root == string(filepath.Separator) {
		return true
	}
	return strings.HasPrefix(path, root+string(filepath.Separator))
}

func checkEnv(env []string) error {
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsRune(kv, 0) {
			return fmt.Errorf("environment entry %q: want KEY=VALUE", kv)
		}
	}
	return nil
}

// environ merges base and override; later keys win, order is first-seen.
func environ(base, override []string) []string {
	out := make([]string, 0, len(base)+len(override))
	index := map[string]int{}
	for _, kv := range append(append([]string(nil), base...), override...) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := index[k]; ok {
			out[i] = kv
			continue
		}
		index[k] = len(out)
		out = append(out, kv)
	}
	return out
}

func lookupEnv(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// defaultPath is bash's PATH when none is set.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// lookPath finds name in the command's own PATH.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path, ok := lookupEnv(env, "PATH")
	if !ok {
		path = defaultPath
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // never the current directory
		}
		candidate := filepath.Join(dir, name)
		if fi, err := os.Stat(candidate); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return candidate, nil
		}
	}
	return "", fmt.Errorf("%w: %q not found in PATH", ErrInvalidCommand, name)
}

// helperHides is what the launch helper covers in the command's own mount
// namespace: every hidden directory, in ModePIDNamespace without Sandbox
// (the helper has that namespace then; with Sandbox, bwrap covers them).
func (m *Manager) helperHides() (hide, guard []string) {
	if m.mode != ModePIDNamespace || m.opts.Sandbox {
		return nil, nil
	}
	return m.hidden, m.guards()
}
