//go:build linux

package execjail

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// probes holds what this system supports, determined once.
type probes struct {
	pidns        error
	cgroup       error
	cgroupParent string // cgroup v2 directory we may create children in
}

var (
	probeOnce sync.Once
	probed    probes
)

func systemProbes() *probes {
	probeOnce.Do(func() {
		probed.pidns = probePIDNamespace()
		probed.cgroupParent, probed.cgroup = probeCgroup()
	})
	return &probed
}

func probe(mode Mode) error {
	p := systemProbes()
	switch mode {
	case ModePIDNamespace:
		return p.pidns
	case ModeCgroup:
		return p.cgroup
	case ModeProcessGroup:
		return nil
	}
	return fmt.Errorf("unknown mode %q", mode)
}

func bestMode() Mode {
	p := systemProbes()
	switch {
	case p.pidns == nil:
		return ModePIDNamespace
	case p.cgroup == nil:
		return ModeCgroup
	}
	return ModeProcessGroup
}

// helperPath is the launch helper: the agent's own binary (see
// helper_linux.go), valid in the child even if the file was replaced.
const helperPath = "/proc/self/exe"

func shell() (string, error) { return exec.LookPath("sh") }

// runProbe runs argv with attr and requires exit status 0.
func runProbe(attr *syscall.SysProcAttr, argv ...string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{}
	cmd.SysProcAttr = attr
	out, err := cmd.CombinedOutput()
	if err != nil {
		if msg := strings.TrimSpace(string(out)); msg != "" {
			return fmt.Errorf("%w: %s", err, msg)
		}
		return err
	}
	return nil
}

// probePIDNamespace checks that a child can get its own PID and mount
// namespaces (the launch helper mounts the namespace's /proc).
func probePIDNamespace() error {
	sh, err := shell()
	if err != nil {
		return err
	}
	return runProbe(&syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL},
		sh, "-c", `test "$$" = 1`)
}

// cgroupV2Dir returns this process's own cgroup v2 directory.
func cgroupV2Dir() (string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	var rel string
	found := false
	for _, line := range strings.Split(string(data), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			rel, found = p, true
			break
		}
	}
	if !found {
		return "", errors.New("no cgroup v2 membership")
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ... - fstype source opts
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, fld := range fields {
			if fld == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(fields) || fields[sep+1] != "cgroup2" || len(fields) < 5 {
			continue
		}
		root, mount := unescapeMount(fields[3]), unescapeMount(fields[4])
		// The mount shows the hierarchy from root; our path is absolute
		// in the hierarchy.
		sub, err := filepath.Rel(root, rel)
		if err != nil || strings.HasPrefix(sub, "..") {
			continue
		}
		return filepath.Join(mount, sub), nil
	}
	return "", errors.New("cgroup v2 is not mounted")
}

// unescapeMount decodes mountinfo's octal escapes (\040 for space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func probeCgroup() (string, error) {
	parent, err := cgroupV2Dir()
	if err != nil {
		return "", err
	}
	t := &cgroupTree{parent: parent}
	sh, err := shell()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(sh, "-c", ":")
	cmd.Env = []string{}
	if err := t.prepare(cmd); err != nil {
		return "", err
	}
	defer t.cleanup()
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("start in cgroup: %w", err)
	}
	return parent, nil
}

// newTree makes the kill handle of one command. When the limits live in
// a cgroup v2 group, the command starts in it (or, in the cgroup mode, in
// a kill group below it).
func newTree(mode Mode, limits *limitGroup) (tree, error) {
	switch mode {
	case ModePIDNamespace:
		return &pidnsTree{joinV2: limits.v2}, nil
	case ModeCgroup:
		p := systemProbes()
		if p.cgroup != nil {
			return nil, p.cgroup
		}
		parent := p.cgroupParent
		if limits.v2 != "" {
			parent = limits.v2
		}
		return &cgroupTree{parent: parent}, nil
	case ModeProcessGroup:
		return &pgroupTree{joinV2: limits.v2}, nil
	}
	return nil, fmt.Errorf("unknown isolation mode %q", mode)
}

var (
	spawnerOnce sync.Once
	spawnerCh   chan func()
)

// onSpawnerThread runs f on one OS thread that never exits. Pdeathsig
// fires when the *thread* that forked the child exits, and Go may end a
// thread when a goroutine that called runtime.LockOSThread returns on it;
// forking from a thread that lives forever makes Pdeathsig mean "when the
// agent process dies".
func onSpawnerThread(f func() error) error {
	spawnerOnce.Do(func() {
		spawnerCh = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread stays ours
			for job := range spawnerCh {
				job()
			}
		}()
	})
	errc := make(chan error, 1)
	spawnerCh <- func() { errc <- f() }
	return <-errc
}

func baseAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Setsid:    true, // no controlling terminal; own process group
		Pdeathsig: syscall.SIGKILL,
	}
}

// waitExited blocks until pid has exited, leaving it unreaped (a zombie
// keeps its pid, so it cannot be reused while we still signal it).
func waitExited(pid int) error {
	const pPID = 1
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		switch errno {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		}
		return errno
	}
}

// joinCgroup makes cmd start in the cgroup v2 directory dir (when set),
// returning the descriptor to close once it started.
func joinCgroup(cmd *exec.Cmd, dir string) (*os.File, error) {
	if dir == "" {
		return nil, nil
	}
	fd, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("open cgroup: %w", err)
	}
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = int(fd.Fd())
	return fd, nil
}

// pidnsTree: the command is PID 1 of a new PID namespace (with a mount
// namespace of its own for its /proc); when it dies the kernel kills
// every other process in the namespace and only then lets it be reaped.
type pidnsTree struct {
	pid    int
	joinV2 string
	fd     *os.File
}

func (t *pidnsTree) prepare(cmd *exec.Cmd) (err error) {
	attr := baseAttr()
	attr.Cloneflags = syscall.CLONE_NEWPID | syscall.CLONE_NEWNS
	cmd.SysProcAttr = attr
	t.fd, err = joinCgroup(cmd, t.joinV2)
	return err
}
func (t *pidnsTree) started(pid int) {
	t.pid = pid
	closeFile(&t.fd)
}
func (t *pidnsTree) waitLeader(pid int) error { return waitExited(pid) }
func (t *pidnsTree) kill() {
	if t.pid > 0 {
		_ = syscall.Kill(t.pid, syscall.SIGKILL)
	}
}
func (t *pidnsTree) cleanup() { closeFile(&t.fd) }

func closeFile(f **os.File) {
	if *f != nil {
		(*f).Close()
		*f = nil
	}
}

// pgroupTree: the command leads a new session and process group.
type pgroupTree struct {
	pid    int
	joinV2 string
	fd     *os.File
}

func (t *pgroupTree) prepare(cmd *exec.Cmd) (err error) {
	cmd.SysProcAttr = baseAttr()
	t.fd, err = joinCgroup(cmd, t.joinV2)
	return err
}
func (t *pgroupTree) started(pid int) {
	t.pid = pid
	closeFile(&t.fd)
}
func (t *pgroupTree) waitLeader(pid int) error { return waitExited(pid) }
func (t *pgroupTree) kill() {
	if t.pid > 0 {
		// The group id is the leader's pid, which stays reserved while
		// the leader is alive or an unreaped zombie.
		_ = syscall.Kill(-t.pid, syscall.SIGKILL)
	}
}
func (t *pgroupTree) cleanup() { closeFile(&t.fd) }

var cgroupSeq atomic.Uint64

// cgroupTree: the command starts in a fresh child cgroup.
type cgroupTree struct {
	parent string
	dir    string
	fd     *os.File
	pid    int
}

func (t *cgroupTree) prepare(cmd *exec.Cmd) error {
	t.dir = filepath.Join(t.parent, fmt.Sprintf("execjail-%d-%d", os.Getpid(), cgroupSeq.Add(1)))
	if err := os.Mkdir(t.dir, 0o755); err != nil {
		t.dir = ""
		return fmt.Errorf("create cgroup: %w", err)
	}
	fd, err := os.Open(t.dir)
	if err != nil {
		return fmt.Errorf("open cgroup: %w", err)
	}
	t.fd = fd
	attr := baseAttr()
	attr.UseCgroupFD = true
	attr.CgroupFD = int(fd.Fd())
	cmd.SysProcAttr = attr
	return nil
}

func (t *cgroupTree) started(pid int) {
	t.pid = pid
	if t.fd != nil {
		t.fd.Close()
		t.fd = nil
	}
}

func (t *cgroupTree) waitLeader(pid int) error { return waitExited(pid) }

func (t *cgroupTree) kill() {
	if t.dir == "" {
		return
	}
	if err := os.WriteFile(filepath.Join(t.dir, "cgroup.kill"), []byte("1"), 0); err == nil {
		return
	}
	killCgroupMembers(t.dir)
}

// killCgroupMembers kills a cgroup's processes one by one, frozen so that
// none can fork in between (for kernels before 5.14 without cgroup.kill).
func killCgroupMembers(dir string) {
	freeze := filepath.Join(dir, "cgroup.freeze")
	frozen := os.WriteFile(freeze, []byte("1"), 0) == nil
	for range 100 {
		pids := cgroupPIDs(dir)
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if frozen {
			// Frozen processes die once thawed; thaw after signalling.
			_ = os.WriteFile(freeze, []byte("0"), 0)
			frozen = false
		}
		time.Sleep(time.Millisecond)
	}
	if frozen {
		_ = os.WriteFile(freeze, []byte("0"), 0)
	}
}

func cgroupPIDs(dir string) []int {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func cgroupPopulated(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "populated "); ok {
			return v != "0"
		}
	}
	return false
}

func (t *cgroupTree) cleanup() {
	if t.fd != nil {
		t.fd.Close()
		t.fd = nil
	}
	if t.dir == "" {
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for cgroupPopulated(t.dir) && time.Now().Before(deadline) {
		t.kill()
		time.Sleep(2 * time.Millisecond)
	}
	for {
		err := os.Remove(t.dir)
		if err == nil || errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.dir = ""
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
	syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGSTKFLT: "SIGSTKFLT", syscall.SIGCHLD: "SIGCHLD", syscall.SIGCONT: "SIGCONT",
	syscall.SIGSTOP: "SIGSTOP", syscall.SIGTSTP: "SIGTSTP", syscall.SIGTTIN: "SIGTTIN",
	syscall.SIGTTOU: "SIGTTOU", syscall.SIGURG: "SIGURG", syscall.SIGXCPU: "SIGXCPU",
	syscall.SIGXFSZ: "SIGXFSZ", syscall.SIGVTALRM: "SIGVTALRM", syscall.SIGPROF: "SIGPROF",
	syscall.SIGWINCH: "SIGWINCH", syscall.SIGIO: "SIGIO", syscall.SIGPWR: "SIGPWR",
	syscall.SIGSYS: "SIGSYS",
}

// signalName names the signal that ended the process, or "".
func signalName(state *os.ProcessState) string {
	ws, ok := state.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return ""
	}
	if name, ok := signalNames[ws.Signal()]; ok {
		return name
	}
	return "SIG" + strconv.Itoa(int(ws.Signal()))
}
