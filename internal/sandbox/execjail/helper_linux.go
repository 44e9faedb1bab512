//go:build linux

package execjail

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The launch helper. Every command starts as a re-execution of the agent's
// own binary (/proc/self/exe) under the argv[0] helperArg0. The package's
// init notices that name and, before main (and before the init of any
// package that imports execjail), confines the process and then execs the
// real command:
//
//  1. joins the cgroup v1 limit groups it is given (v2 groups are joined
//     by the kernel at clone time, CLONE_INTO_CGROUP);
//  2. in the PID namespace mode, mounts the namespace's own /proc (the
//     process was cloned with CLONE_NEWNS|CLONE_NEWPID) and makes the
//     kernel's writable files read-only there (readOnlyKernelFiles);
//  3. sets RLIMIT_FSIZE and ignores SIGXFSZ, so an oversized write fails
//     with EFBIG instead of killing the writer;
//  4. clears the ambient, bounding and inheritable capability sets, so
//     that even a root command execs with no capabilities. When bwrap
//     follows, it keeps the few capabilities bwrap needs to build the
//     sandbox as ambient ones (bwrap drops them before it runs the
//     command with --cap-drop ALL), and the bounding set is empty all
//     the same;
//  5. sets no_new_privs, so no setuid binary or file capability gives any
//     back;
//  6. where the kernel has Landlock ABI 6, scopes abstract Unix sockets
//     and signals to the command's own domain;
//  7. execs the command with the environment it was given (the helper
//     adds nothing; its configuration travels in argv).
//
// Credentials, no_new_privs and the Landlock domain belong to a thread;
// execve keeps those of the thread that calls it, so all of it happens on
// one locked thread.
const helperArg0 = "dsh-execjail-helper"

// helperConfig is argv[1] of the helper, as JSON.
type helperConfig struct {
	// ErrFD is a close-on-exec descriptor the helper writes its error to
	// before exiting; EOF on it means the command was exec'd.
	ErrFD int `json:"err_fd"`
	// CgroupProcs are cgroup.procs files to join (cgroup v1).
	CgroupProcs []string `json:"cgroup_procs,omitempty"`
	// MountProc mounts a new /proc (PID namespace mode).
	MountProc bool `json:"mount_proc,omitempty"`
	// Hide are directories covered by an empty read-only tmpfs in the
	// command's mount namespace (with MountProc).
	Hide []string `json:"hide,omitempty"`
	// Guard are directories bound onto themselves (with MountProc), so
	// that the command cannot rename them: those leading to Hide.
	Guard []string `json:"guard,omitempty"`
	// FileBytes is RLIMIT_FSIZE; 0 leaves it.
	FileBytes uint64 `json:"file_bytes,omitempty"`
	// KeepCaps passes bwrapCaps to the next program as ambient
	// capabilities (for bwrap, which drops them itself).
	KeepCaps bool `json:"keep_caps,omitempty"`
	// Scope applies the Landlock scopes (abstract sockets, signals).
	Scope uint64 `json:"scope,omitempty"`
}

func init() {
	if len(os.Args) >= 3 && os.Args[0] == helperArg0 {
		runHelper(os.Args[1], os.Args[2:])
	}
}

// helperFail reports why the helper could not run the command (through
// the error pipe when there is one) and exits; it never returns.
func helperFail(errFD int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if errFD > 2 {
		_, _ = syscall.Write(errFD, []byte(msg))
	} else {
		_, _ = os.Stderr.WriteString("execjail helper: " + msg + "\n")
	}
	os.Exit(127)
}

func runHelper(cfgJSON string, argv []string) {
	runtime.LockOSThread() // never unlocked: we exec from this thread
	var cfg helperConfig
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		helperFail(-1, "bad configuration: %v", err)
	}
	if cfg.ErrFD > 2 {
		syscall.CloseOnExec(cfg.ErrFD)
	}
	if len(argv) == 0 {
		helperFail(cfg.ErrFD, "no command")
	}
	if err := confine(cfg); err != nil {
		helperFail(cfg.ErrFD, "%v", err)
	}
	err := syscall.Exec(argv[0], argv, os.Environ())
	helperFail(cfg.ErrFD, "exec %s: %v", argv[0], err)
}

// confine applies cfg to the calling (locked) thread and process.
func confine(cfg helperConfig) error {
	for _, procs := range cfg.CgroupProcs {
		if err := os.WriteFile(procs, []byte("0"), 0); err != nil {
			return fmt.Errorf("join cgroup: %w", err)
		}
	}
	if cfg.MountProc {
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("make mounts private: %w", err)
		}
		if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mount /proc: %w", err)
		}
		if err := readOnlyKernelFiles(); err != nil {
			return err
		}
		for _, g := range cfg.Guard {
			if err := unix.Mount(g, g, "", unix.MS_BIND, ""); err != nil && err != unix.ENOENT {
				return fmt.Errorf("guard %s: %w", g, err)
			}
		}
		for _, h := range cfg.Hide {
			err := unix.Mount("tmpfs", h, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0555")
			if err != nil && err != unix.ENOENT {
				return fmt.Errorf("hide %s: %w", h, err)
			}
		}
	}
	if cfg.FileBytes > 0 {
		lim := unix.Rlimit{Cur: cfg.FileBytes, Max: cfg.FileBytes}
		if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
			return fmt.Errorf("RLIMIT_FSIZE: %w", err)
		}
		// An ignored signal stays ignored across execve: writes past the
		// limit fail with EFBIG instead of killing the writer.
		signal.Ignore(syscall.SIGXFSZ)
	}
	var keep uint64
	if cfg.KeepCaps {
		keep = bwrapCaps
	}
	if err := dropCapabilities(keep); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if cfg.Scope != 0 {
		if err := landlockScope(cfg.Scope); err != nil {
			return err
		}
	}
	return nil
}

// readOnlyKernelFiles makes the kernel's writable files read-only in the
// command's mount namespace: /proc/sys (sysctls such as core_pattern or
// modprobe would run a program of the command's choosing with every
// capability), /proc/sysrq-trigger (reboot, crash), /proc/irq, /proc/bus,
// /proc/fs (as container runtimes do) and all of /sys (the
// cgroup files included, so the command cannot leave its limit groups).
// uid 0 may write them without any capability.
func readOnlyKernelFiles() error {
	for _, p := range []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"} {
		if err := unix.Mount(p, p, "", unix.MS_BIND, ""); err != nil {
			if err == unix.ENOENT {
				continue
			}
			return fmt.Errorf("bind %s: %w", p, err)
		}
		if err := unix.Mount("", p, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("make %s read-only: %w", p, err)
		}
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/sys", unix.AT_RECURSIVE, &attr); err != nil && err != unix.ENOENT {
		return fmt.Errorf("make /sys read-only: %w", err)
	}
	return nil
}

// bwrapCaps are the capabilities bwrap keeps when it runs setuid, the
// ones it needs to build a sandbox as root.
const bwrapCaps = 1<<unix.CAP_SYS_ADMIN | 1<<unix.CAP_SYS_CHROOT | 1<<unix.CAP_NET_ADMIN |
	1<<unix.CAP_SETUID | 1<<unix.CAP_SETGID | 1<<unix.CAP_SYS_PTRACE

// dropCapabilities empties the ambient, bounding and inheritable sets of
// the calling thread. After execve a process then has no capabilities,
// even as uid 0: its permitted set is (inheritable | bounding) & file,
// plus ambient. keep (of the capabilities the thread holds) survives
// execve as ambient capabilities.
// Without CAP_SETPCAP (an unprivileged agent) the bounding set cannot be
// cleared; no_new_privs still keeps the command from gaining anything.
func dropCapabilities(keep uint64) error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	held := uint64(data[0].Permitted) | uint64(data[1].Permitted)<<32
	keep &= held
	data[0].Inheritable, data[1].Inheritable = uint32(keep), uint32(keep>>32)
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	for c := 0; c < 64; c++ {
		if keep&(1<<c) == 0 {
			continue
		}
		if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, uintptr(c), 0, 0); err != nil {
			return fmt.Errorf("keep capability %d for bwrap: %w", c, err)
		}
	}
	// Last: the inheritable set may only grow within the bounding set.
	if data[0].Effective&(1<<unix.CAP_SETPCAP) != 0 {
		for c := 0; c <= lastCap(); c++ {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
				return fmt.Errorf("drop bounding capability %d: %w", c, err)
			}
		}
	}
	return nil
}

func lastCap() int {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 && n < 64 {
			return n
		}
	}
	return 63
}

// landlockScope restricts the calling thread to the given Landlock scopes
// (and no filesystem or network rules). It needs no_new_privs first.
func landlockScope(scope uint64) error {
	attr := unix.LandlockRulesetAttr{Scoped: scope}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	defer unix.Close(int(fd))
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}

var (
	landlockOnce sync.Once
	landlockABI  int
)

// LandlockABI is the kernel's Landlock ABI version, 0 without Landlock.
func landlockVersion() int {
	landlockOnce.Do(func() {
		v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
		if errno == 0 {
			landlockABI = int(v)
		}
	})
	return landlockABI
}

// landlockScopeABI is the first Landlock ABI with scopes (Linux 6.12).
const landlockScopeABI = 6

// commandScope is what every command is scoped to where the kernel can.
func commandScope() uint64 {
	if landlockVersion() >= landlockScopeABI {
		return unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
	}
	return 0
}

var (
	dumpableOnce sync.Once
	dumpableErr  error
)

// hardenAgent makes the agent process non-dumpable, once. A non-dumpable
// process's /proc/<pid>/environ, mem, maps and fds need CAP_SYS_PTRACE
// to read, so a same-uid command without capabilities cannot read them.
func hardenAgent() error {
	dumpableOnce.Do(func() {
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			dumpableErr = fmt.Errorf("execjail: make the agent non-dumpable: %w", err)
		}
	})
	return dumpableErr
}
