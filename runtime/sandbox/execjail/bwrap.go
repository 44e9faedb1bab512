package execjail

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
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

// bwrapArgs builds the bwrap command line that runs argv in dir.
func (m *Manager) bwrapArgs(bwrap, dir string, argv []string) []string {
	args := []string{
		bwrap,
		"--die-with-parent",
		"--new-session",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
	}
	if !m.opts.Network {
		args = append(args, "--unshare-net")
	}
	args = append(args,
		"--cap-drop", "ALL",
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--proc", "/proc",
		"--tmpfs", "/tmp",
	)
	// Parents before children, so a writable root inside a read-only one
	// (or under /tmp, which the tmpfs hid) stays visible and writable.
	roots := append([]Root(nil), m.roots...)
	sort.SliceStable(roots, func(i, j int) bool { return len(roots[i].Path) < len(roots[j].Path) })
	for _, r := range roots {
		switch {
		case r.Writable:
			args = append(args, "--bind", r.Path, r.Path)
		case within("/tmp", r.Path):
			args = append(args, "--ro-bind", r.Path, r.Path)
		}
	}
	args = append(args, "--json-status-fd", bwrapStatusFD, "--chdir", dir, "--")
	return append(args, argv...)
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
