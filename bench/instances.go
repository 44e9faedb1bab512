package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

// child runs this process as one of the bench's helper processes when
// DSH_BENCH_CHILD says so.
func child() (int, bool) {
	v, ok := os.LookupEnv(childEnv)
	if !ok {
		return 0, false
	}
	os.Unsetenv(childEnv)
	kind, arg, _ := strings.Cut(v, ":")
	switch kind {
	case "mcp-echo":
		return serveMCPEcho(), true
	case "fleet":
		return runFleet(arg), true
	case "native-prompt":
		return nativePrompt(arg), true
	}
	fmt.Fprintf(os.Stderr, "bench: unknown child %q\n", v)
	return 2, true
}

// agentGuest is a plugin whose per-agent instances a row creates, and
// the tool whose first call creates one.
type agentGuest struct {
	lang, path, tool string
	args             []byte
	config           json.RawMessage
}

func agentGuests() ([]agentGuest, error) {
	kit, err := guestbuild.Build("testdata/guests/testkit")
	if err != nil {
		return nil, err
	}
	g := []agentGuest{{"Go", kit, "counter", nil, json.RawMessage(`{"tools":["counter"]}`)}}
	if c, err := guestbuild.Build("testdata/guests/bench-c"); err == nil {
		g = append(g, agentGuest{"C", c, "echo_c", []byte(`{"text":"x"}`), nil})
	}
	return g, nil
}

func instanceRows(c bconfig) ([]*row, error) {
	guests, err := agentGuests()
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	var rows []*row
	for _, g := range guests {
		group := "new agent's instance, " + g.lang + " guest"
		warm := &row{group: group, name: "call in an existing agent's instance", unit: "time"}
		rows = append(rows, warm)
		for _, noImage := range []bool{true, false} {
			name := "from image"
			if noImage {
				name = "no image (initialiser per instance)"
			}
			cch, err := cache()
			if err != nil {
				return nil, err
			}
			h, err := newHost(cch)
			if err != nil {
				return nil, err
			}
			p, err := h.Load(ctx, plugin.Spec{Name: "g", Source: g.path, Config: g.config, Grants: snapshotGrants(!noImage)})
			if err != nil {
				h.Close(ctx)
				return nil, fmt.Errorf("load %s: %w", g.path, err)
			}
			i := 0
			call := func(id string) error {
				r, err := h.CallTool(ctx, &prompt.AgentFacts{ID: id, Session: id, Model: "m"}, g.tool, g.args)
				if err == nil && r.IsError {
					err = fmt.Errorf("%s: %s", g.tool, r.Text)
				}
				return err
			}
			if !noImage {
				if err := call("warm"); err != nil {
					return nil, err
				}
				d, cpu, err := sample(c.perCall, func() error { return call("warm") })
				if err != nil {
					return nil, err
				}
				warm.samples, warm.cpu = durs(d), float64(cpu)
				h.EndAgent(ctx, "warm")
			}
			n := min(c.perCall, 200)
			d, cpu, err := sample(n, func() error {
				i++
				id := "agent-" + strconv.Itoa(i)
				if err := call(id); err != nil {
					return err
				}
				h.EndAgent(ctx, id)
				return nil
			})
			if err != nil {
				h.Close(ctx)
				return nil, err
			}
			if got := p.Instances(); got != 1 {
				h.Close(ctx)
				return nil, fmt.Errorf("%s: %d instances open after every agent ended, want the load-time one", group, got)
			}
			tr := &row{group: group, name: "new agent + first call + end, " + name, unit: "time", base: "call in an existing agent's instance", samples: durs(d), cpu: float64(cpu)}
			// Private memory of idle instances: c.agents kept open.
			mr := &row{group: group, name: "private memory per idle instance, " + name, unit: "bytes"}
			if !noImage {
				mr.base = "private memory per idle instance, no image (initialiser per instance)"
			}
			if before, ok := privateBytes(); ok {
				for j := 0; j < c.agents; j++ {
					if err := call("idle-" + strconv.Itoa(j)); err != nil {
						h.Close(ctx)
						return nil, err
					}
				}
				if after, ok := privateBytes(); ok {
					mr.samples = []float64{float64(after-before) / float64(c.agents)}
					mr.note = strconv.Itoa(c.agents) + " kept open"
				}
			} else {
				mr.na = "n/a: no /proc/self/smaps_rollup"
			}
			h.Close(ctx)
			rows = append(rows, tr, mr)
		}
	}
	// The fleet: N agents × 3 Go-guest plugins in a child process, whose
	// peak RSS (VmHWM) is measured against the same child with no agents.
	// Only from images: without them 1,000 × 3 Go instances need about
	// 15 GiB, more than the machines this runs on should give a bench.
	group := fmt.Sprintf("%d agents × 3 Go-guest plugins (from image), memory of a child", c.fleet)
	base := &row{group: group, name: "peak RSS (VmHWM), plugins loaded, no agents", unit: "bytes"}
	full := &row{group: group, name: "peak RSS (VmHWM)", unit: "bytes", base: base.name}
	basePss := &row{group: group, name: "PSS at the end, plugins loaded, no agents", unit: "bytes"}
	fullPss := &row{group: group, name: "PSS at the end", unit: "bytes", base: basePss.name}
	rows = append(rows, base, full, basePss, fullPss)
	for range c.fleetN {
		for _, v := range []struct {
			agents   int
			hwm, pss *row
		}{{0, base, basePss}, {c.fleet, full, fullPss}} {
			hwm, pss, err := fleetChild(v.agents, true)
			if err != nil {
				return nil, err
			}
			v.hwm.samples = append(v.hwm.samples, hwm)
			v.pss.samples = append(v.pss.samples, pss)
		}
	}
	return rows, nil
}

func fleetChild(agents int, snapshot bool) (hwm, pss float64, err error) {
	self, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	cmd := exec.Command(self)
	if _, err := cache(); err != nil {
		return 0, 0, err
	}
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=fleet:%d:%v", childEnv, agents, snapshot), plugin.EnvCacheDir+"="+benchCacheDir)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, 0, fmt.Errorf("fleet child: %w", err)
	}
	if _, err := fmt.Sscan(string(out), &hwm, &pss); err != nil {
		return 0, 0, fmt.Errorf("fleet child printed %q: %w", out, err)
	}
	return hwm, pss, nil
}

// runFleet loads testkit as 3 plugins, each on its own host (testkit's
// tool names are fixed, and one registry refuses a name twice), opens
// agents agents in each, and prints the process's peak RSS in bytes.
func runFleet(arg string) int {
	a, s, _ := strings.Cut(arg, ":")
	agents, err := strconv.Atoi(a)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		return 2
	}
	if err := chdirModuleRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		return 1
	}
	kit, err := guestbuild.Build("testdata/guests/testkit")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		return 1
	}
	ctx := context.Background()
	c, err := plugin.DefaultCache()
	if err != nil {
		c = plugin.NoCache()
	}
	var hosts []*plugin.Host
	for range 3 {
		h, err := newHost(c)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fleet:", err)
			return 1
		}
		if _, err := h.Load(ctx, plugin.Spec{Name: "kit", Source: kit, Config: json.RawMessage(`{"tools":["counter"]}`),
			Grants: snapshotGrants(s == "true")}); err != nil {
			fmt.Fprintln(os.Stderr, "fleet:", err)
			return 1
		}
		hosts = append(hosts, h)
	}
	for i := range agents {
		id := "agent-" + strconv.Itoa(i)
		for _, h := range hosts {
			if _, err := h.CallTool(ctx, &prompt.AgentFacts{ID: id, Session: id, Model: "m"}, "counter", nil); err != nil {
				fmt.Fprintln(os.Stderr, "fleet:", err)
				return 1
			}
		}
	}
	hwm, err := statusKB("VmHWM:")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		return 1
	}
	// RSS counts a shared image page once per instance mapping it; PSS
	// counts it once, which is what the machine pays.
	pss, ok := smapsRollup("Pss:")
	if !ok {
		fmt.Fprintln(os.Stderr, "fleet: no /proc/self/smaps_rollup")
		return 1
	}
	fmt.Println(hwm<<10, pss)
	return 0
}

func statusKB(key string) (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == key {
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", key)
}

// privateBytes is Private_Clean + Private_Dirty of
// /proc/self/smaps_rollup, after a GC that returns freed heap to the
// kernel (so the Go heap's noise stays out of a per-instance figure).
func privateBytes() (int64, bool) {
	return smapsRollup("Private_Clean:", "Private_Dirty:")
}

// smapsRollup sums the given fields of /proc/self/smaps_rollup.
func smapsRollup(keys ...string) (int64, bool) {
	debug.FreeOSMemory()
	data, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		return 0, false
	}
	var total int64
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && slices.Contains(keys, f[0]) {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, false
			}
			total += kb << 10
		}
	}
	return total, true
}

func chdirModuleRoot() error {
	root, err := guestbuild.ModuleRoot()
	if err != nil {
		return fmt.Errorf("find the module root: %w", err)
	}
	return os.Chdir(root)
}

var _ = time.Second

// snapshotGrants are the default grants with instances started from an
// image (grants.limits.snapshot) or not.
func snapshotGrants(snapshot bool) *config.Grants {
	return &config.Grants{Limits: config.Limits{Snapshot: &snapshot}}
}
