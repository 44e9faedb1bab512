package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/cputime"
	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	extism "github.com/extism/go-sdk"
)

// The benchmarks compare one tool call along three paths, in one run:
//
//   - dsh: Host.CallTool on testkit's echo (decode 1 KiB of JSON
//     arguments, call the log host function once, return 1 KiB), in one
//     agent's warm instance, under a cancellable context as an agent's turn
//     has: "echo-1KiB" is the tool written on the SDK's fast path
//     (ToolArgs: package jsonobj, no reflection, no allocation),
//     "echo-1KiB-encoding-json" the same tool with json.Unmarshal,
//     "echo-1KiB-c" the same tool in freestanding C (testdata/guests/bench-c),
//     whose own work is a few hundred nanoseconds; and
//     "counter", which takes no arguments and calls no host function, to
//     separate the host's per-call cost from the guest's JSON work;
//   - extism: the same echo, with each of the two decoders, through extism
//     go-sdk's Plugin.Call on a go-pdk guest (testdata/guests/bench-pdk);
//   - wazero-raw: a bare call of a cached api.Function (testkit's
//     dsh_abi_version), without and with 1 KiB written to and read back from
//     guest memory around it.
//
// The host stops a runaway guest through the interrupt flag its modules
// are instrumented with (internal/interrupt). The "-closeondone" variants
// run the same code with wazero's own mechanism instead, the fallback for
// modules that cannot be instrumented: WithCloseOnContextDone, which in
// wazero v1.12 costs a goroutine per export call and an exit from compiled
// code to Go at every loop iteration. extism runs both without termination
// and with it ("-timeout" sets Manifest.Timeout, which turns
// WithCloseOnContextDone on).
//
// Run them with
//
//	go test ./internal/plugin -run '^$' -bench . -benchtime 2s -count 3

// benchText is the 1 KiB the echo tools decode and return.
var benchText = strings.Repeat("abcdefghijklmnopqrstuvwxyz012345", 32)

// benchEscaped is 1 KiB as well, with every sixteenth byte a quote or a
// newline: 64 characters that JSON must escape, as in source code or
// command output a model passes to a tool.
var benchEscaped = func() string {
	b := []byte(benchText)
	for i := 15; i < len(b); i += 16 {
		b[i] = "\"\n"[(i/16)%2]
	}
	return string(b)
}()

// Each ToolCall sub-benchmark times calls one by one after its loop, for
// the p50-ns and p99-ns metrics: up to latencySamples calls, or as many as
// fit in latencyBudget but at least minLatencySamples.
const (
	latencySamples    = 10000
	minLatencySamples = 1000
	latencyBudget     = time.Second
)

// countingDiscard drops every record and counts how often a logger asked
// whether it should log, so a benchmark can prove the guest's log host
// call happened once per call without paying for a record.
type countingDiscard struct{ asked *atomic.Int64 }

func (h countingDiscard) Enabled(context.Context, slog.Level) bool {
	h.asked.Add(1)
	return false
}
func (h countingDiscard) Handle(context.Context, slog.Record) error { return nil }
func (h countingDiscard) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h countingDiscard) WithGroup(string) slog.Handler             { return h }

// benchHost returns a host with testkit loaded as "kit", offering the
// echo tools and counter, whose logger counts log calls into asked. With
// fallback, the module is not instrumented and runs with wazero's
// WithCloseOnContextDone instead.
func benchHost(b *testing.B, asked *atomic.Int64, fallback bool) (*Host, *Plugin) {
	b.Helper()
	return benchHostWith(b, asked, Spec{Name: "kit", Source: testkit(b), noInterrupt: fallback,
		Config: cfg(b, map[string]any{"tools": []string{"echo", "echo_args", "counter"}})})
}

// benchHostWith returns a host with spec loaded, whose logger counts log
// calls into asked.
func benchHostWith(b *testing.B, asked *atomic.Int64, spec Spec) (*Host, *Plugin) {
	b.Helper()
	h, err := New(Options{Registry: prompt.NewRegistry(nil), Cache: sharedCache(b), Logger: slog.New(countingDiscard{asked})})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close(context.Background()) })
	p, err := h.Load(context.Background(), spec)
	if err != nil {
		b.Fatal(err)
	}
	if p.interruptible == spec.noInterrupt {
		b.Fatalf("interruptible = %v with fallback = %v", p.interruptible, spec.noInterrupt)
	}
	return h, p
}

// reportLatency times calls one by one and reports their p50 and p99. The
// figures include two time.Now calls (tens of ns), which matters only for
// the raw paths.
func reportLatency(b *testing.B, call func() error) {
	b.Helper()
	d := make([]time.Duration, 0, latencySamples)
	start := time.Now()
	for len(d) < latencySamples && (len(d) < minLatencySamples || time.Since(start) < latencyBudget) {
		t0 := time.Now()
		if err := call(); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(t0))
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2]), "p50-ns")
	b.ReportMetric(float64(d[len(d)*99/100]), "p99-ns")
}

// loop runs call under b.Loop and reports allocations.
func loop(b *testing.B, call func() error) {
	b.Helper()
	b.ReportAllocs()
	for b.Loop() {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
}

// checkAsked fails the benchmark unless the guest's log host function ran
// exactly once per loop iteration.
func checkAsked(b *testing.B, asked *atomic.Int64, before int64) {
	b.Helper()
	if n := asked.Load() - before; n != int64(b.N) {
		b.Fatalf("the log host function ran %d times in %d calls", n, b.N)
	}
}

func BenchmarkToolCall(b *testing.B) {
	ctx := context.Background()
	args, err := json.Marshal(map[string]string{"text": benchText})
	if err != nil {
		b.Fatal(err)
	}

	escapedArgs, err := json.Marshal(map[string]string{"text": benchEscaped})
	if err != nil {
		b.Fatal(err)
	}
	if n := len(escapedArgs) - len(args); n != 64 {
		b.Fatalf("escaped arguments carry %d escapes, want 64", n)
	}
	// The -escaped variants decode the same 1 KiB with 64 escapes in it:
	// the decoder copies the runs between escapes in bulk, so they should
	// cost little more than the plain ones.
	for _, v := range []struct{ name, source, tool string }{{"echo-1KiB-escaped", "go", "echo_args"}, {"echo-1KiB-c-escaped", "c", "echo_c"}} {
		b.Run("dsh/"+v.name, func(b *testing.B) {
			var asked atomic.Int64
			var h *Host
			if v.source == "c" {
				h, _ = benchHostWith(b, &asked, Spec{Name: "c", Source: cGuest(b)})
			} else {
				h, _ = benchHost(b, &asked, false)
			}
			facts := agent("bench", "m")
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			call := func() error {
				r, err := h.CallTool(ctx, facts, v.tool, escapedArgs)
				if err != nil {
					return err
				}
				if r.IsError || len(r.Text) != len(benchEscaped) {
					return fmt.Errorf("%s returned %d bytes (error %v)", v.tool, len(r.Text), r.IsError)
				}
				return nil
			}
			r, err := h.CallTool(ctx, facts, v.tool, escapedArgs)
			if err != nil || r.Text != benchEscaped {
				b.Fatalf("%s: %q, %v", v.tool, r.Text, err)
			}
			before := asked.Load()
			loop(b, call)
			checkAsked(b, &asked, before)
			reportLatency(b, call)
		})
	}

	for _, fallback := range []bool{false, true} {
		suffix := ""
		if fallback {
			suffix = "-closeondone"
		}
		// echo-1KiB reads its argument through the SDK's fast path
		// (ToolArgs); echo-1KiB-encoding-json is the same tool written
		// with json.Unmarshal into a struct.
		for _, v := range []struct{ name, tool string }{{"echo-1KiB", "echo_args"}, {"echo-1KiB-encoding-json", "echo"}} {
			b.Run("dsh/"+v.name+suffix, func(b *testing.B) {
				var asked atomic.Int64
				h, _ := benchHost(b, &asked, fallback)
				facts := agent("bench", "m")
				ctx, cancel := context.WithCancel(ctx) // as an agent's turn has
				defer cancel()
				call := func() error {
					r, err := h.CallTool(ctx, facts, v.tool, args)
					if err != nil {
						return err
					}
					if r.IsError || len(r.Text) != len(benchText) {
						return fmt.Errorf("%s returned %d bytes (error %v)", v.tool, len(r.Text), r.IsError)
					}
					return nil
				}
				r, err := h.CallTool(ctx, facts, v.tool, args) // creates the agent's instance
				if err != nil || r.Text != benchText {
					b.Fatalf("%s: %+v, %v", v.tool, r, err)
				}
				before := asked.Load()
				loop(b, call)
				checkAsked(b, &asked, before)
				reportLatency(b, call)
			})
		}

		// echo-1KiB-c is the same tool in freestanding C: the host's path
		// with a guest whose own work is small.
		b.Run("dsh/echo-1KiB-c"+suffix, func(b *testing.B) {
			var asked atomic.Int64
			h, _ := benchHostWith(b, &asked, Spec{Name: "c", Source: cGuest(b), noInterrupt: fallback})
			facts := agent("bench", "m")
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			call := func() error {
				r, err := h.CallTool(ctx, facts, "echo_c", args)
				if err != nil {
					return err
				}
				if r.IsError || len(r.Text) != len(benchText) {
					return fmt.Errorf("echo_c returned %q (error %v)", r.Text, r.IsError)
				}
				return nil
			}
			if err := call(); err != nil {
				b.Fatal(err)
			}
			before := asked.Load()
			loop(b, call)
			checkAsked(b, &asked, before)
			reportLatency(b, call)
		})

		b.Run("dsh/counter-noargs"+suffix, func(b *testing.B) {
			var asked atomic.Int64
			h, _ := benchHost(b, &asked, fallback)
			facts := agent("bench", "m")
			want := 0
			call := func() error {
				r, err := h.CallTool(ctx, facts, "counter", nil)
				if err != nil {
					return err
				}
				want++
				if r.IsError || r.Text != strconv.Itoa(want) {
					return fmt.Errorf("counter returned %+v, want %d", r, want)
				}
				return nil
			}
			if err := call(); err != nil {
				b.Fatal(err)
			}
			loop(b, call)
			reportLatency(b, call)
		})
	}

	// bench-pdk's "echo" reads its argument with package jsonobj, the
	// decoder under dsh's fast path; "echo_json" uses encoding/json. The
	// -timeout variants set Manifest.Timeout.
	for _, timeout := range []bool{false, true} {
		for _, v := range []struct{ name, export string }{{"echo-1KiB", "echo"}, {"echo-1KiB-encoding-json", "echo_json"}} {
			name := "extism/" + v.name
			if timeout {
				name += "-timeout"
			}
			b.Run(name, func(b *testing.B) {
				plug, asked, hostErrs := extismEcho(b, timeout)
				call := func() error {
					rc, out, err := plug.Call(v.export, args)
					if err != nil || rc != 0 {
						return fmt.Errorf("extism %s: rc %d: %w", v.export, rc, err)
					}
					if len(out) != len(benchText) {
						return fmt.Errorf("extism %s returned %d bytes", v.export, len(out))
					}
					return nil
				}
				rc, out, err := plug.Call(v.export, args) // runs the guest's _initialize
				if err != nil || rc != 0 || string(out) != benchText {
					b.Fatalf("extism %s: rc %d, %d bytes, %v", v.export, rc, len(out), err)
				}
				before := asked.Load()
				loop(b, call)
				checkAsked(b, asked, before)
				if n := hostErrs.Load(); n > 0 {
					b.Fatalf("the extism log host function failed %d times", n)
				}
				reportLatency(b, call)
			})
		}
	}

	for _, fallback := range []bool{false, true} {
		suffix := ""
		if fallback {
			suffix = "-closeondone"
		}
		// rawInstance returns a warm testkit instance whose cached exports
		// the raw benchmarks call directly, outside the host's machinery.
		rawInstance := func(b *testing.B) *instance {
			b.Helper()
			var asked atomic.Int64
			_, p := benchHost(b, &asked, fallback)
			in, err := p.instanceFor(ctx, agent("raw", "m"))
			if err != nil {
				b.Fatal(err)
			}
			return in
		}

		b.Run("wazero-raw/bare"+suffix, func(b *testing.B) {
			in := rawInstance(b)
			fn := in.fns[hostfns.ExportABIVersion]
			stack := make([]uint64, 1)
			call := func() error {
				if err := fn.CallWithStack(ctx, stack); err != nil {
					return err
				}
				if int32(stack[0]) != hostfns.ABIVersion {
					return fmt.Errorf("dsh_abi_version = %d", int32(stack[0]))
				}
				return nil
			}
			loop(b, call)
			reportLatency(b, call)
		})

		b.Run("wazero-raw/bare+1KiB-in-out"+suffix, func(b *testing.B) {
			in := rawInstance(b)
			fn := in.fns[hostfns.ExportABIVersion]
			stack := []uint64{uint64(len(benchText))}
			if err := in.alloc.CallWithStack(ctx, stack); err != nil {
				b.Fatal(err)
			}
			ptr := uint32(stack[0])
			src, dst := []byte(benchText), make([]byte, len(benchText))
			call := func() error {
				if !in.mem.Write(ptr, src) {
					return fmt.Errorf("write 1 KiB at %#x", ptr)
				}
				if err := fn.CallWithStack(ctx, stack); err != nil {
					return err
				}
				got, ok := in.mem.Read(ptr, uint32(len(dst)))
				if !ok {
					return fmt.Errorf("read 1 KiB at %#x", ptr)
				}
				copy(dst, got)
				return nil
			}
			if err := call(); err != nil || !bytes.Equal(dst, src) {
				b.Fatalf("round trip: %v, equal %v", err, bytes.Equal(dst, src))
			}
			loop(b, call)
			reportLatency(b, call)
		})
	}
}

// extismEcho returns a warm instance of the bench-pdk guest under extism
// go-sdk, with a log host function that does what dsh's does (read the
// request, decode it, log it) and counts its calls and failures. The
// runtime shares dsh's compilation cache and memory cap; timeout adds
// dsh's per-call deadline (Manifest.Timeout), which makes go-sdk build
// the runtime WithCloseOnContextDone as dsh does.
func extismEcho(b *testing.B, timeout bool) (*extism.Plugin, *atomic.Int64, *atomic.Int64) {
	b.Helper()
	ctx := context.Background()
	asked, hostErrs := new(atomic.Int64), new(atomic.Int64)
	logger := slog.New(countingDiscard{asked})
	logFn := extism.NewHostFunctionWithStack("log", func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
		req, err := p.ReadBytes(stack[0])
		if err != nil {
			hostErrs.Add(1)
			return
		}
		var r hostfns.LogRequest
		if err := json.Unmarshal(req, &r); err != nil {
			hostErrs.Add(1)
			return
		}
		logger.Log(ctx, logLevel(r.Level), r.Message)
	}, []extism.ValueType{extism.ValueTypePTR}, nil)
	path, err := guestbuild.Build("testdata/guests/bench-pdk")
	if err != nil {
		b.Fatal(err)
	}
	manifest := extism.Manifest{
		Wasm:   []extism.Wasm{extism.WasmFile{Path: path}},
		Memory: &extism.ManifestMemory{MaxPages: config.Limits{}.MemoryPages()},
	}
	if timeout {
		manifest.Timeout = uint64(config.DefaultCallTimeout / time.Millisecond)
	}
	compiled, err := extism.NewCompiledPlugin(ctx, manifest, extism.PluginConfig{EnableWasi: true,
		RuntimeConfig: sharedCache(b).m.RuntimeConfig(false)}, []extism.HostFunction{logFn})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { compiled.Close(context.Background()) })
	plug, err := compiled.Instance(ctx, extism.PluginInstanceConfig{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { plug.Close(context.Background()) })
	return plug, asked, hostErrs
}

func logLevel(s string) slog.Level {
	switch s {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// BenchmarkInstantiateWarm measures an agent's first call's setup cost with
// the module already compiled: instantiate (from the plugin's image, or
// with its initialiser: "-noimage"), the ABI version check and dsh_setup,
// then closing the instance when the agent ends. The -closeondone variant
// runs the uninstrumented fallback, which never uses images. It also
// reports the private memory of an idle instance ("private-B/instance":
// 100 agents' instances kept open, measured from /proc/self/smaps_rollup).
func BenchmarkInstantiateWarm(b *testing.B) {
	for _, v := range []struct {
		name     string
		source   func(testing.TB) string
		fallback bool
		noImage  bool
	}{
		{"dsh-go", testkit, false, false},
		{"dsh-go-noimage", testkit, false, true},
		{"dsh-c", cGuest, false, false},
		{"dsh-c-noimage", cGuest, false, true},
		{"dsh-go-closeondone", testkit, true, false},
	} {
		b.Run(v.name, func(b *testing.B) {
			ctx := context.Background()
			var asked atomic.Int64
			_, p := benchHostWith(b, &asked, Spec{Name: "kit", Source: v.source(b), noInterrupt: v.fallback,
				Grants: &config.Grants{Limits: config.Limits{Snapshot: snapshot(!v.noImage)}}})
			h := p.h
			b.ReportAllocs()
			i := 0
			cpu0 := cpuTime()
			for b.Loop() {
				i++
				facts := agent("agent-"+strconv.Itoa(i), "m")
				if _, err := p.instanceFor(ctx, facts); err != nil {
					b.Fatal(err)
				}
				h.EndAgent(ctx, facts.ID)
			}
			b.StopTimer()
			// CPU time is what a loaded machine distorts least.
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			if n := p.Instances(); n != 1 {
				b.Fatalf("%d instances open after the loop, want the load-time one", n)
			}
			if priv, ok := privateBytes(); ok {
				const n = 100
				for j := 0; j < n; j++ {
					if _, err := p.instanceFor(ctx, agent("idle-"+strconv.Itoa(j), "m")); err != nil {
						b.Fatal(err)
					}
				}
				if after, ok := privateBytes(); ok {
					b.ReportMetric(float64(after-priv)/n, "private-B/instance")
				}
				for j := 0; j < n; j++ {
					h.EndAgent(ctx, "idle-"+strconv.Itoa(j))
				}
			}
		})
	}
}

// cpuTime is the process's user and system CPU time, in nanoseconds.
func cpuTime() int64 {
	d, _ := cputime.Process()
	return int64(d)
}

// privateBytes is the process's private memory (Private_Clean +
// Private_Dirty of /proc/self/smaps_rollup), after a GC.
func privateBytes() (int64, bool) {
	runtime.GC()
	data, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		return 0, false
	}
	var total int64
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && (f[0] == "Private_Clean:" || f[0] == "Private_Dirty:") {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, false
			}
			total += kb << 10
		}
	}
	return total, true
}

// benchLoadUnload loads testkit (compile, load-time instance, dsh_init) and
// unloads it, in a loop, on a host with cache.
func benchLoadUnload(b *testing.B, cache *Cache) {
	ctx := context.Background()
	path := testkit(b)
	h, err := New(Options{Registry: prompt.NewRegistry(nil), Cache: cache, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close(context.Background()) })
	spec := Spec{Name: "kit", Source: path, Config: cfg(b, map[string]any{"tools": []string{"echo", "counter"}})}
	loadUnload := func() {
		if _, err := h.Load(ctx, spec); err != nil {
			b.Fatal(err)
		}
		if err := h.Unload(ctx, "kit"); err != nil {
			b.Fatal(err)
		}
	}
	loadUnload() // a warm cache holds the module before the clock starts
	b.ReportAllocs()
	for b.Loop() {
		loadUnload()
	}
}

// BenchmarkCompileCold loads and unloads testkit with no compilation
// cache: every load runs wazero's compiler.
func BenchmarkCompileCold(b *testing.B) { benchLoadUnload(b, NoCache()) }

// BenchmarkCompileWarm loads and unloads testkit with the shared on-disk
// cache, so every load reads compiled code from disk.
func BenchmarkCompileWarm(b *testing.B) { benchLoadUnload(b, sharedCache(b)) }
