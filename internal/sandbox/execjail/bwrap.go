package execjail

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"
)

// bwrapStatusFD is the descriptor number bwrap writes its JSON status to
// (the first of exec.Cmd.ExtraFiles).
const bwrapStatusFD = "3"

// findBwrap resolves the bwrap binary for one run.
func (m *Manager) findBwrap() (string, error) {
	if m.opts.BwrapPath != "" {
		fi, err := os.Stat(m.opts.BwrapPath)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%w: %s", ErrBwrapMissing, m.opts.BwrapPath)
		}
		return m.opts.BwrapPath, nil
	}
	path, err := exec.LookPath("bwrap")
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBwrapMissing, err)
	}
	return path, nil
}

// systemDirs are the host directories a sandbox sees (read-only) besides
// its roots: programs and libraries. A symlink (merged /usr) is
// recreated as a symlink.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcFiles is the curated /etc: name resolution, users and groups for
// tools that look them up, TLS roots, time zone, the dynamic loader and
// Debian's alternatives symlinks. Secrets (shadow, ssh keys, credentials
// of services) stay out.
var etcFiles = []string{
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/host.conf",
	"/etc/resolv.conf", "/etc/gai.conf", "/etc/services", "/etc/protocols",
	"/etc/localtime", "/etc/timezone", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/alternatives", "/etc/ssl", "/etc/ca-certificates", "/etc/pki",
	"/etc/mime.types", "/etc/os-release", "/etc/debian_version", "/etc/inputrc",
	"/etc/bash.bashrc", "/etc/profile", "/etc/environment", "/etc/perl",
}

// bwrapArgs builds the bwrap command line that runs argv in dir. The
// sandbox's root is an empty tmpfs: only systemDirs, the curated /etc and
// the granted roots are bound in, so no host socket, device or state file
// outside the roots is even visible; /tmp, /var/tmp and /run (and
// /var/run) are fresh and empty, /dev and /proc minimal and new.
func (m *Manager) bwrapArgs(bwrap, dir string, argv []string, fdBase int) []string {
	args := []string{
		bwrap,
		"--die-with-parent",
		"--new-session",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
	}
	if !m.opts.Network {
		args = append(args, "--unshare-net")
	}
	args = append(args, "--cap-drop", "ALL")
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				args = append(args, "--symlink", target, d)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", d, d)
		}
	}
	for _, f := range etcFiles {
		args = append(args, "--ro-bind-try", f, f)
	}
	args = append(args,
		"--dev", "/dev",
		"--proc", "/proc",
		// uid 0 may write these without a capability: sysctls such as
		// core_pattern or modprobe would have the kernel run a program of
		// the command's choosing with every capability, sysrq-trigger
		// reboots. bwrap 0.8 leaves them writable for root.
		"--ro-bind", "/proc/sys", "/proc/sys",
		"--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
		"--ro-bind-try", "/proc/irq", "/proc/irq",
		"--ro-bind-try", "/proc/bus", "/proc/bus",
		"--ro-bind-try", "/proc/fs", "/proc/fs",
		"--tmpfs", "/tmp",
		"--tmpfs", "/var/tmp",
		"--tmpfs", "/run",
		"--symlink", "../run", "/var/run",
	)
	// Parents before children, whatever the order of the grants: a
	// read-only root inside a writable one is bound over it and stays
	// read-only; a writable root inside a read-only one stays writable.
	// An opened root is bound from its descriptor (openedRoots passes
	// them from fdBase on, in m.roots order; bwrap closes each once
	// bound), never from its name.
	type bound struct {
		Root
		fd int
	}
	roots := make([]bound, len(m.roots))
	next := fdBase
	for i, r := range m.roots {
		roots[i] = bound{Root: r, fd: -1}
		if r.Dir != nil {
			roots[i].fd = next
			next++
		}
	}
	sort.SliceStable(roots, func(i, j int) bool { return len(roots[i].Path) < len(roots[j].Path) })
	for _, r := range roots {
		if r.fd >= 0 {
			flag := "--ro-bind-fd"
			if r.Writable {
				flag = "--bind-fd"
			}
			args = append(args, flag, strconv.Itoa(r.fd), r.Path)
			continue
		}
		if r.Writable {
			args = append(args, "--bind", r.Path, r.Path)
		} else {
			args = append(args, "--ro-bind", r.Path, r.Path)
		}
	}
	// Host state inside a root is covered by an empty read-only tmpfs,
	// after the roots so that no bind lands over it.
	// The directories leading to it are bound onto themselves, so that
	// they cannot be renamed away from under the cover.
	for _, g := range m.guards() {
		args = append(args, "--bind", g, g)
	}
	for _, h := range m.hiddenInRoots() {
		args = append(args, "--tmpfs", h, "--remount-ro", h)
	}
	// The sandbox's own root (an empty tmpfs holding the mount points)
	// is read-only too: the only scratch space is /tmp, /var/tmp and /run.
	args = append(args, "--remount-ro", "/")
	args = append(args, "--json-status-fd", bwrapStatusFD, "--chdir", dir, "--")
	return append(args, argv...)
}

// bindFDBase is the descriptor number of the first opened root bwrap
// binds: after the status pipe (3) and the helper's error pipe (4).
const bindFDBase = 5

// openedRoots opens a descriptor on each opened root, in m.roots order,
// for bwrap to bind; the caller closes them once the command started.
func (m *Manager) openedRoots() ([]*os.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	var fs []*os.File
	for _, r := range m.roots {
		if r.Dir == nil {
			continue
		}
		f, err := r.Dir.Open(".")
		if err != nil {
			for _, f := range fs {
				f.Close()
			}
			return nil, fmt.Errorf("%w: root %s: %w", ErrStart, r.Path, err)
		}
		fs = append(fs, f)
	}
	return fs, nil
}

// bwrapStatus reads bwrap's --json-status-fd stream.
type bwrapStatus struct {
	r *os.File
}

// exited reports whether bwrap said that the sandboxed command ran and
// exited. It must be called after bwrap has exited; it reads what bwrap
// wrote, giving a process that inherited the pipe a short grace period.
func (s *bwrapStatus) exited() bool {
	defer s.r.Close()
	_ = s.r.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(s.r) // a deadline error still leaves what was read
	// bwrap writes one JSON object per line.
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var msg map[string]json.RawMessage
		if json.Unmarshal(sc.Bytes(), &msg) != nil {
			continue
		}
		if _, ok := msg["exit-code"]; ok {
			return true
		}
	}
	return false
}

// sandboxError builds the error for a sandbox that never ran the command.
func sandboxError(stderr Output) error {
	msg := strings.TrimSpace(string(stderr.Data))
	if msg == "" {
		return ErrSandboxFailed
	}
	return fmt.Errorf("%w: %s", ErrSandboxFailed, msg)
}
