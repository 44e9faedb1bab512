// Command bench prints dsh-wasm's performance table: every row a median
// (and p99 where it has one) next to a baseline measured in the same run,
// with their ratio, so that a loaded or slow machine moves both sides of a
// ratio together.
//
//	go run ./bench          # the whole table, under 10 minutes on 2 cores
//	go run ./bench -quick   # every row with a few samples, to prove it runs
//
// See docs/PERFORMANCE.md for the method and what each row means.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/cputime"
)

// bconfig is how many samples each kind of row takes.
type bconfig struct {
	quick   bool
	perCall int    // per-call rows (tool calls, fs tools, 1 MB render)
	process int    // process-level rows (cold and warm start)
	agents  int    // instances kept open to measure private memory
	fleet   int    // agents in the peak-RSS child (times 3 plugins)
	fleetN  int    // peak-RSS children
	render  [3]int // samples of the 1, 10 and 100 MB renders
	// renderMB lists the render sizes, in MB (1, 10 and 100).
	renderMB []int
	// sessions is the loop row's concurrent sessions.
	sessions int
	log      io.Writer
}

func fullConfig() bconfig {
	return bconfig{perCall: 2000, process: 10, agents: 100, fleet: 1000, fleetN: 3,
		render: [3]int{200, 20, 10}, renderMB: []int{1, 10, 100}, sessions: 200, log: os.Stderr}
}

func quickConfig() bconfig {
	return bconfig{quick: true, perCall: 5, process: 1, agents: 3, fleet: 10, fleetN: 1,
		render: [3]int{2, 1, 1}, renderMB: []int{1, 10, 100}, sessions: 10, log: os.Stderr}
}

// row is one line of the table. A row with base set is compared with the
// row of that name in the same group.
type row struct {
	group, name, base string
	unit              string // "time" or "bytes" or "rate"
	samples           []float64
	cpu               float64 // CPU ns per sample, 0 when not measured
	na                string  // "n/a: why"
	note              string
}

func (r *row) p50() float64 { return pct(r.samples, 50) }
func (r *row) p99() float64 { return pct(r.samples, 99) }

func pct(s []float64, p int) float64 {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	i := len(c) * p / 100
	if p == 50 {
		i = len(c) / 2
	}
	if i >= len(c) {
		i = len(c) - 1
	}
	return c[i]
}

// durs turns durations into samples.
func durs(d []time.Duration) []float64 {
	f := make([]float64, len(d))
	for i, x := range d {
		f[i] = float64(x)
	}
	return f
}

func format(unit string, v float64) string {
	switch unit {
	case "bytes":
		switch {
		case v >= 1<<30:
			return fmt.Sprintf("%.2f GiB", v/(1<<30))
		case v >= 1<<20:
			return fmt.Sprintf("%.2f MiB", v/(1<<20))
		case v >= 1<<10:
			return fmt.Sprintf("%.1f KiB", v/(1<<10))
		}
		return fmt.Sprintf("%.0f B", v)
	case "rate":
		return fmt.Sprintf("%.1f/s", v)
	case "count":
		return fmt.Sprintf("%.0f", v)
	}
	d := time.Duration(v)
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	case d >= time.Microsecond:
		return fmt.Sprintf("%.2f µs", float64(d)/1e3)
	}
	return fmt.Sprintf("%d ns", d)
}

// printTable writes rows grouped, each with its ratio to its baseline.
func printTable(w io.Writer, rows []*row) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  row\tn\tp50\tp99\tcpu/op\tvs baseline\t")
	byName := map[string]*row{}
	group := ""
	for _, r := range rows {
		byName[r.group+"/"+r.name] = r
		if r.group != group {
			group = r.group
			fmt.Fprintf(tw, "%s\n", group)
		}
		if r.na != "" {
			fmt.Fprintf(tw, "  %s\t-\t%s\n", r.name, r.na)
			continue
		}
		p99, cpu, ratio := "-", "-", "baseline"
		if len(r.samples) > 1 && r.unit == "time" {
			p99 = format(r.unit, r.p99())
		}
		if r.cpu > 0 {
			cpu = format("time", r.cpu)
		}
		if r.base != "" {
			if b := byName[r.group+"/"+r.base]; b != nil && b.na == "" && b.p50() > 0 {
				ratio = fmt.Sprintf("%.2fx %s", r.p50()/b.p50(), r.base)
			} else {
				ratio = "-"
			}
		} else if r.unit != "time" {
			ratio = "-"
		}
		name := r.name
		if r.note != "" {
			name += " (" + r.note + ")"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\t%s\t\n", name, len(r.samples), format(r.unit, r.p50()), p99, cpu, ratio)
	}
	tw.Flush()
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	d, _ := cputime.Process()
	return d
}

// section is one part of the table; run appends its rows or fails.
type section struct {
	name string
	run  func(c bconfig) ([]*row, error)
}

func sections() []section {
	return []section{
		{"tool call", toolCallRows},
		{"new agent", instanceRows},
		{"start", startRows},
		{"fs tools", fsRows},
		{"render", renderRows},
		{"loop", loopRows},
		{"mcp", mcpServeRows},
	}
}

func main() {
	if code, ok := child(); ok {
		os.Exit(code)
	}
	quick := flag.Bool("quick", false, "run every row with a few samples, only to prove the benchmarks work")
	only := flag.String("only", "", "run only the sections whose names contain this (comma-separated)")
	flag.Parse()
	c := fullConfig()
	if *quick {
		c = quickConfig()
	}
	if err := run(os.Stdout, c, *only); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, c bconfig, only string) error {
	if err := chdirModuleRoot(); err != nil {
		return err
	}
	start := time.Now()
	var rows []*row
	for _, s := range sections() {
		if only != "" && !matchesAny(s.name, only) {
			continue
		}
		fmt.Fprintf(c.log, "bench: %s…\n", s.name)
		t0 := time.Now()
		r, err := s.run(c)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		fmt.Fprintf(c.log, "bench: %s done in %s\n", s.name, time.Since(t0).Round(time.Millisecond))
		rows = append(rows, r...)
	}
	mode := "full"
	if c.quick {
		mode = "quick (few samples: proves the rows run, not their speed)"
	}
	fmt.Fprintf(w, "dsh-wasm bench, %s, %s, GOMAXPROCS=%d, %s\n\n", mode, time.Now().UTC().Format(time.RFC3339), gomaxprocs(), loadavg())
	printTable(w, rows)
	fmt.Fprintf(w, "\ntotal %s\n", time.Since(start).Round(time.Second))
	return nil
}

func matchesAny(name, list string) bool {
	for _, s := range strings.Split(list, ",") {
		if s != "" && strings.Contains(name, s) {
			return true
		}
	}
	return false
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "load unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "load unknown"
	}
	return "load " + strings.Join(f[:3], " ")
}
