package execjail

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

type killReason int

const (
	reasonNone killReason = iota
	reasonTimeout
	reasonCanceled
)

// waitDelay bounds how long output pipes are drained after the command's
// top process is gone (only reachable in the process-group mode, where an
// escaped daemon can hold them open).
const waitDelay = time.Second

// process is one started command.
type process struct {
	id        string // task id; empty for Run
	cmd       *exec.Cmd
	tree      tree
	stdout    *capBuffer
	stderr    *capBuffer
	bwrapStat *bwrapStatus // nil unless sandboxed
	helperErr *os.File     // read end of the launch helper's error pipe
	limits    *limitGroup
	oomBefore uint64
	started   time.Time

	done chan struct{}

	mu       sync.Mutex
	launched bool // cmd.Start succeeded
	exited   bool // the top process exited (maybe not reaped yet)
	why      killReason
	res      Result
	err      error
}

func (p *process) isDone() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) reason() killReason {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.why
}

// kill takes the command's whole tree down. It never signals a reaped
// process: the waiter sets exited (under mu) before reaping.
func (p *process) kill(why killReason) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited || p.why != reasonNone {
		return
	}
	p.why = why
	if p.launched {
		p.tree.kill()
	}
	// Not launched yet: start sees why and kills right after Start.
}

func (p *process) outcome() (Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.res, p.err
}

func (p *process) status(id string) Status {
	select {
	case <-p.done:
		res, _ := p.outcome()
		return Status{ID: id, Running: false, Result: res}
	default:
	}
	return Status{ID: id, Running: true, Result: Result{
		ExitCode: -1,
		Stdout:   p.stdout.snapshot(),
		Stderr:   p.stderr.snapshot(),
		Duration: time.Since(p.started),
	}}
}

// start validates cmd, launches it and returns; p.done closes when it ends.
func (m *Manager) start(ctx context.Context, c Command, task bool) (*process, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("execjail: not started: %w", err)
	}
	argv, err := m.argv(c)
	if err != nil {
		return nil, err
	}
	dir, err := m.resolveDir(c.Dir)
	if err != nil {
		return nil, err
	}
	if dir.file != nil {
		// The command starts in the directory through this descriptor,
		// which the launch (os/exec's chdir) reads before it execs.
		defer dir.file.Close()
	}
	env := environ(m.opts.Env, c.Env)
	if c.Argv != nil && !m.opts.Sandbox {
		if argv[0], err = lookPath(argv[0], env); err != nil {
			return nil, err
		}
	}
	limits, err := m.limitGroup()
	if err != nil {
		return nil, err
	}
	p := &process{
		stdout: newCapBuffer(m.opts.OutputBytes),
		stderr: newCapBuffer(m.opts.OutputBytes),
		done:   make(chan struct{}),
		limits: limits,
	}
	var statusW *os.File
	var bindFiles []*os.File // opened roots bwrap binds, from bindFDBase on
	if m.opts.Sandbox {
		bwrap, err := m.findBwrap()
		if err != nil {
			return nil, err
		}
		r, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("%w: status pipe: %w", ErrStart, err)
		}
		p.bwrapStat, statusW = &bwrapStatus{r: r}, w
		binds, err := m.openedRoots()
		if err != nil {
			closeStatus(p, statusW)
			return nil, err
		}
		defer func() {
			for _, f := range binds {
				f.Close()
			}
		}()
		argv = m.bwrapArgs(bwrap, dir.guest, argv, bindFDBase)
		bindFiles = binds
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeStatus(p, statusW)
		return nil, fmt.Errorf("%w: helper pipe: %w", ErrStart, err)
	}
	p.helperErr = errR
	extra := []*os.File{}
	if statusW != nil {
		extra = append(extra, statusW)
	}
	extra = append(extra, errW)
	errFD := 2 + len(extra)
	if len(bindFiles) > 0 && errFD+1 != bindFDBase {
		// bwrapArgs numbered the binds from bindFDBase.
		errR.Close()
		errW.Close()
		closeStatus(p, statusW)
		return nil, fmt.Errorf("%w: bound roots would start at descriptor %d, not %d", ErrStart, errFD+1, bindFDBase)
	}
	extra = append(extra, bindFiles...)
	hide, guard := m.helperHides()
	hc := helperConfig{
		ErrFD:       errFD,
		CgroupProcs: limits.procsFiles(),
		MountProc:   m.mode == ModePIDNamespace && !m.opts.Sandbox,
		Hide:        hide,
		Guard:       guard,
		FileBytes:   uint64(m.opts.Limits.FileBytes),
		KeepCaps:    m.opts.Sandbox,
		Scope:       commandScope(),
	}
	hcJSON, err := json.Marshal(hc)
	if err != nil {
		errR.Close()
		errW.Close()
		closeStatus(p, statusW)
		return nil, fmt.Errorf("%w: helper config: %w", ErrStart, err)
	}
	cmd := &exec.Cmd{
		Path:      helperPath,
		Args:      append([]string{helperArg0, string(hcJSON)}, argv...),
		Dir:       dir.host,
		Env:       env,
		Stdout:    tee(p.stdout, c.StdoutTee),
		Stderr:    tee(p.stderr, c.StderrTee),
		WaitDelay: waitDelay,
	}
	if cmd.Env == nil {
		cmd.Env = []string{} // nil would inherit the agent's environment
	}
	if c.Stdin != nil {
		cmd.Stdin = bytes.NewReader(c.Stdin)
	}
	cmd.ExtraFiles = extra
	p.cmd = cmd
	abort := func() {
		errR.Close()
		errW.Close()
		closeStatus(p, statusW)
	}
	if p.tree, err = newTree(m.mode, limits); err != nil {
		abort()
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	if err := p.tree.prepare(cmd); err != nil {
		p.tree.cleanup()
		abort()
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}

	p.started = time.Now() // before register makes p visible to Poll
	if err := m.register(p, task); err != nil {
		p.tree.cleanup()
		abort()
		return nil, err
	}

	p.oomBefore = limits.oomKills()
	err = onSpawnerThread(cmd.Start)
	if statusW != nil {
		statusW.Close()
	}
	errW.Close()
	if err != nil {
		p.tree.cleanup()
		errR.Close()
		if p.bwrapStat != nil {
			p.bwrapStat.r.Close()
		}
		p.mu.Lock()
		p.err = fmt.Errorf("%w: %w", ErrStart, err)
		p.mu.Unlock()
		m.finish(p, false)
		close(p.done)
		return nil, fmt.Errorf("%w: %s: %w", ErrStart, argv[0], err)
	}
	p.mu.Lock()
	p.launched = true
	p.tree.started(cmd.Process.Pid)
	if p.why != reasonNone {
		p.tree.kill() // Close raced with the start
	}
	p.mu.Unlock()

	var timer *time.Timer
	if c.Timeout > 0 {
		timer = time.AfterFunc(c.Timeout, func() { p.kill(reasonTimeout) })
	}
	stopCtx := context.AfterFunc(ctx, func() { p.kill(reasonCanceled) })
	go func() {
		p.wait()
		if timer != nil {
			timer.Stop()
		}
		stopCtx()
		m.finish(p, true) // before done, so Wait's caller sees the bookkeeping
		close(p.done)
	}()
	return p, nil
}

// tee sends a stream to its capped buffer and, when set, to w.
func tee(buf *capBuffer, w io.Writer) io.Writer {
	if w == nil {
		return buf
	}
	return io.MultiWriter(buf, w)
}

func closeStatus(p *process, w *os.File) {
	if w != nil {
		w.Close()
	}
	if p.bwrapStat != nil {
		p.bwrapStat.r.Close()
	}
}

// argv builds the command line before sandbox or namespace wrapping.
func (m *Manager) argv(c Command) ([]string, error) {
	switch {
	case c.Script != "" && c.Argv != nil:
		return nil, fmt.Errorf("%w: both Script and Argv set", ErrInvalidCommand)
	case c.Timeout < 0:
		return nil, fmt.Errorf("%w: negative timeout", ErrInvalidCommand)
	case c.Script != "":
		if strings.ContainsRune(c.Script, 0) {
			return nil, fmt.Errorf("%w: script contains a NUL byte", ErrInvalidCommand)
		}
		return []string{m.bash, "-c", c.Script}, nil
	case len(c.Argv) == 0 || c.Argv[0] == "":
		return nil, fmt.Errorf("%w: empty command", ErrInvalidCommand)
	}
	for _, a := range c.Argv {
		if strings.ContainsRune(a, 0) {
			return nil, fmt.Errorf("%w: argument contains a NUL byte", ErrInvalidCommand)
		}
	}
	if err := checkEnv(c.Env); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidCommand, err)
	}
	return append([]string(nil), c.Argv...), nil
}

// wait reaps the command, cleans up what it left behind and records the
// result.
func (p *process) wait() {
	pid := p.cmd.Process.Pid
	_ = p.tree.waitLeader(pid) // on error, cmd.Wait below still reaps
	p.mu.Lock()
	p.exited = true
	p.mu.Unlock()
	// Whatever the top process left behind goes now (in the PID namespace
	// mode the kernel has already done it).
	p.tree.kill()
	waitErr := p.cmd.Wait()
	p.tree.cleanup()

	res := Result{
		ExitCode: -1,
		Stdout:   p.stdout.snapshot(),
		Stderr:   p.stderr.snapshot(),
		Duration: time.Since(p.started),
	}
	state := p.cmd.ProcessState
	var err error
	switch {
	case state == nil:
		err = fmt.Errorf("execjail: wait: %w", waitErr)
	default:
		res.ExitCode = state.ExitCode()
		res.Signal = signalName(state)
	}
	if msg := readHelperError(p.helperErr); msg != "" && err == nil {
		err = fmt.Errorf("%w: %s", ErrStart, msg)
	}
	res.OutOfMemory = p.limits.oomKills() > p.oomBefore
	p.mu.Lock()
	killedByUs := p.why != reasonNone && res.Signal == "SIGKILL"
	res.TimedOut = killedByUs && p.why == reasonTimeout
	res.Canceled = killedByUs && p.why == reasonCanceled
	if p.bwrapStat != nil {
		ran := p.bwrapStat.exited()
		if !ran && p.why == reasonNone && res.Signal == "" && err == nil {
			err = sandboxError(res.Stderr)
		}
	}
	if waitErr != nil && !errors.Is(waitErr, exec.ErrWaitDelay) && err == nil {
		var exitErr *exec.ExitError
		if !errors.As(waitErr, &exitErr) {
			err = fmt.Errorf("execjail: wait: %w", waitErr)
		}
	}
	p.res, p.err = res, err
	p.mu.Unlock()
}

// readHelperError reads what the launch helper reported (empty when it
// exec'd the command: the pipe is close-on-exec) and closes r.
func readHelperError(r *os.File) string {
	defer r.Close()
	_ = r.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var buf bytes.Buffer
	_, _ = io.Copy(&buf, io.LimitReader(r, 4096))
	return strings.TrimSpace(buf.String())
}

// tree is the platform's handle on "the command and everything it started".
type tree interface {
	// prepare sets up cmd (SysProcAttr, cgroup) before Start.
	prepare(cmd *exec.Cmd) error
	// started records the top process's pid.
	started(pid int)
	// waitLeader blocks until the top process exits, without reaping it.
	waitLeader(pid int) error
	// kill sends SIGKILL to everything; it is called with the process's
	// mutex held and must not block for long.
	kill()
	// cleanup releases resources after the top process is reaped.
	cleanup()
}
