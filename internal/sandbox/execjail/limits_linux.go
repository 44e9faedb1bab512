//go:build linux

package execjail

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Resource limits come from cgroups, whichever hierarchy carries the
// controller: cgroup v2 when the agent's v2 group can delegate pids or
// memory to a child, else the cgroup v1 hierarchy of that controller
// (machines where v2 carries only some controllers). Each Manager (one
// plugin in one session) gets its own group in each hierarchy, a child of
// the agent's own group, holding the limit for all its commands together.

// controller is one cgroup controller the limits need.
type controller struct {
	name string // "pids", "memory"
	v2   bool   // enabled in the v2 parent's subtree_control
	v1   string // the agent's group in the v1 hierarchy, when v2 is not used
	err  error  // why neither works
}

func (c *controller) usable() bool { return c.err == nil }

func (c *controller) by() string {
	switch {
	case c.err != nil:
		return ""
	case c.v2:
		return "cgroup v2"
	}
	return "cgroup v1"
}

type limitProbe struct {
	v2Parent string
	pids     controller
	memory   controller
}

var (
	limitOnce   sync.Once
	limitProbed limitProbe
)

func limitProbes() *limitProbe {
	limitOnce.Do(func() {
		p := &limitProbed
		p.pids.name, p.memory.name = "pids", "memory"
		v2, v2err := cgroupV2Dir()
		var v2errs map[string]error
		if v2err == nil {
			p.v2Parent, v2errs = pickV2Parent(v2, "pids", "memory")
		}
		v1 := cgroupV1Dirs()
		for _, dir := range append([]string{p.v2Parent}, v1["pids"], v1["memory"]) {
			removeStale(dir)
		}
		for _, c := range []*controller{&p.pids, &p.memory} {
			var errs []error
			if v2err != nil {
				errs = append(errs, fmt.Errorf("cgroup v2: %w", v2err))
			} else if err := v2errs[c.name]; err != nil {
				errs = append(errs, fmt.Errorf("cgroup v2: %w", err))
			} else {
				c.v2 = true
				continue
			}
			dir, ok := v1[c.name]
			if !ok {
				errs = append(errs, errors.New("cgroup v1: no "+c.name+" hierarchy"))
			} else if err := probeV1(dir, c.name); err != nil {
				errs = append(errs, fmt.Errorf("cgroup v1: %w", err))
			} else {
				c.v1 = dir
				continue
			}
			c.err = errors.Join(errs...)
		}
	})
	return &limitProbed
}

// removeStale removes the groups an agent that died left in dir
// (execjail-<pid>-...), killing what still runs in them: the top process
// of a command dies with the agent, a process it detached would not.
func removeStale(dir string) {
	if dir == "" {
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, ent := range entries {
		rest, ok := strings.CutPrefix(ent.Name(), "execjail-")
		if !ok || !ent.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(strings.TrimPrefix(rest, "probe-"), "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			continue // its agent still runs (or the pid was reused: leave it)
		}
		stale := &limitGroup{v1: []string{filepath.Join(dir, ent.Name())}}
		stale.remove()
	}
}

// pickV2Parent chooses the v2 group the limit groups go in: the agent's
// own group when it can hand the controllers to children (only the root
// group can while it holds processes), else its parent (the delegated
// group of an agent that runs in a leaf of its own). The errors say why a
// controller is not available in either.
func pickV2Parent(own string, names ...string) (string, map[string]error) {
	candidates := []string{own}
	if up := filepath.Dir(own); up != own {
		if _, err := os.Stat(filepath.Join(up, "cgroup.controllers")); err == nil {
			candidates = append(candidates, up) // still in the hierarchy
		}
	}
	var best string
	var bestErrs map[string]error
	for _, dir := range candidates {
		errs := map[string]error{}
		ok := 0
		for _, name := range names {
			if err := enableV2(dir, name); err != nil {
				errs[name] = err
			} else {
				ok++
			}
		}
		if ok == len(names) {
			return dir, errs
		}
		if bestErrs == nil || ok > len(names)-len(bestErrs) {
			best, bestErrs = dir, errs
		}
	}
	return best, bestErrs
}

// enableV2 makes controller available to children of dir.
func enableV2(dir, name string) error {
	ctrls, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return err
	}
	if !hasWord(string(ctrls), name) {
		return fmt.Errorf("controller %s not available in %s", name, dir)
	}
	sub := filepath.Join(dir, "cgroup.subtree_control")
	if cur, err := os.ReadFile(sub); err == nil && hasWord(string(cur), name) {
		return nil
	}
	if err := os.WriteFile(sub, []byte("+"+name), 0); err != nil {
		return fmt.Errorf("enable %s for children of %s: %w", name, dir, err)
	}
	return nil
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// cgroupV1Dirs maps each v1 controller of this process to its group's
// directory.
func cgroupV1Dirs() map[string]string {
	out := map[string]string{}
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return out
	}
	paths := map[string]string{} // controller -> path in its hierarchy
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			paths[c] = parts[2]
		}
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, fld := range fields {
			if fld == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+3 >= len(fields) || fields[sep+1] != "cgroup" {
			continue
		}
		for _, opt := range strings.Split(fields[sep+3], ",") {
			rel, ok := paths[opt]
			if !ok {
				continue
			}
			root, mount := unescapeMount(fields[3]), unescapeMount(fields[4])
			sub, err := filepath.Rel(root, rel)
			if err != nil || strings.HasPrefix(sub, "..") {
				continue
			}
			if _, seen := out[opt]; !seen {
				out[opt] = filepath.Join(mount, sub)
			}
		}
	}
	return out
}

// probeV1 checks that a child group can be created and limited.
func probeV1(dir, name string) error {
	child := filepath.Join(dir, fmt.Sprintf("execjail-probe-%d", os.Getpid()))
	if err := os.Mkdir(child, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	defer os.Remove(child)
	file, value := "pids.max", "64"
	if name == "memory" {
		file, value = "memory.limit_in_bytes", "67108864"
	}
	return os.WriteFile(filepath.Join(child, file), []byte(value), 0)
}

var limitSeq sync.Mutex
var limitN uint64

// limitGroup is one Manager's cgroups.
type limitGroup struct {
	v2     string   // v2 group (commands or their kill groups go below)
	v1     []string // v1 groups the helper joins
	oomV2  string   // memory.events of the v2 group
	oomV1  string   // memory.oom_control of the v1 group
	pidsV1 string
}

func newLimitGroup(l Limits) (*limitGroup, error) { return newLimitGroupIn(limitProbes(), l) }

// newLimitGroupIn creates the groups under what p found.
func newLimitGroupIn(p *limitProbe, l Limits) (*limitGroup, error) {
	limitSeq.Lock()
	limitN++
	name := fmt.Sprintf("execjail-%d-m%d", os.Getpid(), limitN)
	limitSeq.Unlock()
	g := &limitGroup{}
	fail := func(err error) (*limitGroup, error) {
		g.remove()
		return nil, err
	}
	if (p.pids.v2 && l.Processes > 0) || (p.memory.v2 && l.Memory > 0) {
		g.v2 = filepath.Join(p.v2Parent, name)
		if err := os.Mkdir(g.v2, 0o755); err != nil {
			g.v2 = ""
			return fail(fmt.Errorf("create cgroup: %w", err))
		}
		if p.pids.v2 && l.Processes > 0 {
			if err := writeCg(g.v2, "pids.max", strconv.Itoa(l.Processes)); err != nil {
				return fail(err)
			}
		}
		if p.memory.v2 && l.Memory > 0 {
			if err := writeCg(g.v2, "memory.max", strconv.FormatInt(l.Memory, 10)); err != nil {
				return fail(err)
			}
			_ = writeCg(g.v2, "memory.swap.max", "0") // absent without swap accounting
			g.oomV2 = filepath.Join(g.v2, "memory.events")
		}
	}
	if p.pids.v1 != "" && l.Processes > 0 {
		dir := filepath.Join(p.pids.v1, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fail(fmt.Errorf("create cgroup: %w", err))
		}
		g.v1 = append(g.v1, dir)
		g.pidsV1 = dir
		if err := writeCg(dir, "pids.max", strconv.Itoa(l.Processes)); err != nil {
			return fail(err)
		}
	}
	if p.memory.v1 != "" && l.Memory > 0 {
		dir := filepath.Join(p.memory.v1, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fail(fmt.Errorf("create cgroup: %w", err))
		}
		g.v1 = append(g.v1, dir)
		v := strconv.FormatInt(l.Memory, 10)
		if err := writeCg(dir, "memory.limit_in_bytes", v); err != nil {
			return fail(err)
		}
		// Memory plus swap, where swap is accounted, so swap is no way
		// around the limit.
		_ = writeCg(dir, "memory.memsw.limit_in_bytes", v)
		g.oomV1 = filepath.Join(dir, "memory.oom_control")
	}
	return g, nil
}

func writeCg(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
		return fmt.Errorf("set %s: %w", file, err)
	}
	return nil
}

// procsFiles are the cgroup.procs files the helper joins.
func (g *limitGroup) procsFiles() []string {
	out := make([]string, len(g.v1))
	for i, d := range g.v1 {
		out[i] = filepath.Join(d, "cgroup.procs")
	}
	return out
}

// oomKills counts the OOM kills in the group so far.
func (g *limitGroup) oomKills() uint64 {
	for _, f := range []string{g.oomV2, g.oomV1} {
		if f == "" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
				n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				return n
			}
		}
	}
	return 0
}

// killAll kills every process left in the groups (daemons that escaped a
// process-group kill) and removes the groups.
func (g *limitGroup) remove() {
	if g == nil {
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	dirs := append([]string(nil), g.v1...)
	if g.v2 != "" {
		dirs = append(dirs, g.v2)
	}
	for _, dir := range dirs {
		for {
			if dir == g.v2 {
				_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
			}
			pids := cgroupPIDs(dir)
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			err := os.Remove(dir)
			if err == nil || errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	g.v1, g.v2 = nil, ""
}

func enforcement(mode Mode, l Limits) Enforcement {
	p := limitProbes()
	bound := func(c *controller, limit int64, v1file, v2file string) Bound {
		switch {
		case !c.usable():
			return Bound{Limit: limit, Unenforced: c.err.Error()}
		case c.v2:
			return Bound{Limit: limit, By: "cgroup v2 " + v2file}
		}
		return Bound{Limit: limit, By: "cgroup v1 " + v1file}
	}
	e := Enforcement{
		Mode:      mode,
		Processes: bound(&p.pids, int64(l.Processes), "pids.max", "pids.max"),
		Memory:    bound(&p.memory, l.Memory, "memory.limit_in_bytes", "memory.max"),
		FileBytes: Bound{Limit: l.FileBytes, By: "RLIMIT_FSIZE"},
	}
	if canSetPCAP() {
		e.Capabilities = "none: ambient, bounding and inheritable sets cleared before exec, no_new_privs set"
	} else {
		e.Capabilities = "none gained: ambient and inheritable sets cleared, no_new_privs set (the bounding set stays: the agent lacks CAP_SETPCAP)"
	}
	e.AgentProc = "unreadable: the agent is non-dumpable and commands hold no CAP_SYS_PTRACE"
	if mode == ModePIDNamespace {
		e.AgentProc += "; commands see only their own PID namespace in /proc and cannot unmount it"
	}
	if v := landlockVersion(); v >= landlockScopeABI {
		e.Scope = fmt.Sprintf("Landlock ABI %d: commands cannot connect to abstract Unix sockets or signal processes outside their own", v)
	} else {
		e.Scope = fmt.Sprintf("none: Landlock ABI %d < %d (Linux 6.12); a command sharing the host network namespace can reach the host's abstract Unix sockets and signal the agent user's processes", v, landlockScopeABI)
	}
	return e
}

// canSetPCAP reports whether this process may clear bounding sets.
func canSetPCAP() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[0].Effective&(1<<unix.CAP_SETPCAP) != 0
}
