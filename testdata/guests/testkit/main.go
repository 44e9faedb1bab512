//go:build wasip1

// Command testkit is a test plugin whose behaviour its config chooses. It
// exercises every host function, valid and invalid, for internal/plugin's
// tests and benchmarks.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/hostfns/guest"
)

type section struct {
	Name    string `json:"name"`
	Order   int    `json:"order"`
	Text    string `json:"text"`
	Dynamic bool   `json:"dynamic"`
}

type subscription struct {
	Event string `json:"event"`
	Mode  string `json:"mode"`
}

type config struct {
	Sections   []section             `json:"sections"`
	Variables  []string              `json:"variables"`
	Tools      []string              `json:"tools"`
	Subscribe  []subscription        `json:"subscribe"`
	Needs      *hostfns.Capabilities `json:"needs"`
	InitProbes []probe               `json:"init_probes"`
	// SetupProbes run in every per-agent instance's dsh_setup.
	SetupProbes []probe `json:"setup_probes"`
	InitFail    string  `json:"init_fail"`
	InitTrap    bool    `json:"init_trap"`
	InitSpin    bool    `json:"init_spin"`
	SetModel    string  `json:"set_model"`
	// WaterfallReturn: the waterfall handler of an event returns this
	// exact JSON, whatever it was given.
	WaterfallReturn map[string]json.RawMessage `json:"waterfall_return"`
	// ClockRead reads the wall clock in dsh_init; ClockSection registers
	// a section that shows it.
	ClockRead    bool `json:"clock_read"`
	ClockSection bool `json:"clock_section"`
	// ClockInitSection registers a section showing the time read as the
	// module started (_initialize), not in dsh_init.
	ClockInitSection bool `json:"clock_init_section"`
	// EventProbes run in every listener, after the event is logged.
	EventProbes []probe `json:"event_probes"`
	// EventClockSection: every listener registers a section showing the
	// wall clock as it runs, after its probes.
	EventClockSection bool `json:"event_clock_section"`
	// EventBusyMs: every listener computes for this many milliseconds of
	// wall time, making no host call, before it returns.
	EventBusyMs int `json:"event_busy_ms"`
	// InitRead reads this file in dsh_init; InitPrint prints this line.
	InitRead  string                     `json:"init_read"`
	InitPrint string                     `json:"init_print"`
	Extra     map[string]json.RawMessage `json:"extra"`
}

// probe is one raw host call. Req is sent as the request unless a pointer
// override is given.
type probe struct {
	Fn      string  `json:"fn"`
	Req     string  `json:"req"`
	InPtr   *uint32 `json:"in_ptr"`
	InLen   *uint32 `json:"in_len"`
	OutPtr  *uint32 `json:"out_ptr"`
	OutCap  *uint32 `json:"out_cap"`
	Overlap bool    `json:"overlap"` // out buffer = the request itself
	BadUTF8 bool    `json:"bad_utf8"`
}

type probeResult struct {
	Status  uint32 `json:"status"`
	Message string `json:"message"`
}

// startedAt is read as the module starts, in _initialize.
var startedAt = time.Now().UTC()

var (
	counter     int
	probeLog    []probeResult
	eventLog    []string
	initCounter int
)

func runProbe(pr probe) probeResult {
	req := []byte(pr.Req)
	if pr.BadUTF8 {
		req = append(req, 0xff, 0xfe)
	}
	out := make([]byte, 256)
	inPtr, inLen := guest.Addr(req), uint32(len(req))
	outPtr, outCap := guest.Addr(out), uint32(len(out))
	if pr.InPtr != nil {
		inPtr = *pr.InPtr
	}
	if pr.InLen != nil {
		inLen = *pr.InLen
	}
	if pr.OutPtr != nil {
		outPtr = *pr.OutPtr
	}
	if pr.OutCap != nil {
		outCap = *pr.OutCap
	}
	if pr.Overlap {
		outPtr, outCap = inPtr, inLen
	}
	r := guest.RawCall(pr.Fn, inPtr, inLen, outPtr, outCap)
	st, n := hostfns.Unpack(r)
	msg := ""
	if n > 0 {
		if n <= outCap && pr.OutPtr == nil && !pr.Overlap {
			msg = string(out[:n])
		} else {
			buf := make([]byte, n)
			if guest.RawCall(hostfns.FnTake, guest.Addr(buf), n, 0, 0) == uint64(n) {
				msg = string(buf)
			} else {
				msg = "<take failed>"
			}
		}
	}
	return probeResult{Status: uint32(st), Message: msg}
}

func main() {}

func init() {
	guest.Main(func(p *guest.Plugin) error {
		var c config
		if err := json.Unmarshal(p.Config, &c); err != nil {
			return fmt.Errorf("testkit config: %w", err)
		}
		if p.Loading() {
			initCounter++
			if c.InitTrap {
				var m map[string]int
				m["boom"] = 1 // nil map write: a Go panic, a trap for the host
			}
			if c.InitSpin {
				for {
				}
			}
			for _, pr := range c.InitProbes {
				probeLog = append(probeLog, runProbe(pr))
			}
			if c.InitRead != "" {
				os.ReadFile(c.InitRead)
			}
			if c.InitPrint != "" {
				fmt.Println(c.InitPrint)
			}
			if c.ClockRead && time.Now().Year() < 2000 {
				return errors.New("testkit: the clock is before 2000")
			}
			if c.ClockInitSection {
				if err := p.Section("started", 51, "Started at "+startedAt.Format(time.RFC3339Nano)+"."); err != nil {
					return err
				}
			}
			if c.ClockSection {
				if err := p.Section("clock", 50, "Loaded at "+time.Now().UTC().Format(time.RFC3339Nano)+"."); err != nil {
					return err
				}
			}
		}
		if !p.Loading() {
			for _, pr := range c.SetupProbes {
				runProbe(pr)
			}
		}
		if c.Needs != nil {
			if err := p.Need(*c.Needs); err != nil {
				return err
			}
		}
		for _, s := range c.Sections {
			var err error
			if s.Dynamic {
				err = p.DynamicSection(s.Name, s.Order, dynamicText)
			} else {
				err = p.Section(s.Name, s.Order, s.Text)
			}
			if err != nil {
				return err
			}
		}
		for _, v := range c.Variables {
			if err := p.Variable(v, variable(v)); err != nil {
				return err
			}
		}
		for _, t := range c.Tools {
			desc := guest.Tool{Name: t, Description: "testkit tool " + t, Parameters: json.RawMessage(`{"type":"object"}`)}
			var err error
			if fn := tools[t]; fn != nil {
				err = p.Tool(desc, fn)
			} else if fn := argsTools[t]; fn != nil {
				err = p.ToolArgs(desc, fn)
			} else {
				err = fmt.Errorf("testkit: unknown tool %q", t)
			}
			if err != nil {
				return err
			}
		}
		for _, s := range c.Subscribe {
			ev := s.Event
			var err error
			if s.Mode == hostfns.ModeWaterfall {
				model, ret := c.SetModel, c.WaterfallReturn[ev]
				err = p.Waterfall(ev, func(ctx guest.Context, payload []byte) ([]byte, error) {
					eventLog = append(eventLog, ev)
					if ret != nil {
						return ret, nil
					}
					return waterfall(ev, model, payload)
				})
			} else {
				probes, clock, busy := c.EventProbes, c.EventClockSection, time.Duration(c.EventBusyMs)*time.Millisecond
				err = p.On(ev, func(ctx guest.Context, payload []byte) error {
					eventLog = append(eventLog, ev+" "+string(payload))
					for start := time.Now(); time.Since(start) < busy; {
					}
					for _, pr := range probes {
						probeLog = append(probeLog, runProbe(pr))
					}
					if clock {
						req, _ := json.Marshal(hostfns.SectionRequest{Name: "kit:event-clock", Order: 142,
							Text: "Event at " + time.Now().UTC().Format(time.RFC3339Nano) + "."})
						probeLog = append(probeLog, runProbe(probe{Fn: hostfns.FnSectionRegister, Req: string(req)}))
					}
					if strings.Contains(string(payload), "fail-please") {
						return errors.New("listener refused")
					}
					return nil
				})
			}
			if err != nil {
				return err
			}
		}
		if c.InitFail != "" && p.Loading() {
			return errors.New(c.InitFail)
		}
		return nil
	})
}

func dynamicText(ctx guest.Context) (string, error) {
	f, err := ctx.Facts()
	if err != nil {
		return "", err
	}
	if f.AgentID == "" {
		b, _ := json.Marshal(map[string]any{"probes": probeLog, "init_runs": initCounter, "events": eventLog})
		return string(b), nil
	}
	return fmt.Sprintf("agent %s runs %s", f.AgentID, f.Model), nil
}

func variable(name string) func(guest.Context) (string, bool, error) {
	return func(ctx guest.Context) (string, bool, error) {
		f, err := ctx.Facts()
		if err != nil {
			return "", false, err
		}
		if f.Model == "" {
			return "", false, nil
		}
		return name + ":" + f.Model, true, nil
	}
}

func waterfall(event, model string, payload []byte) ([]byte, error) {
	if model == "" {
		return nil, nil
	}
	var a map[string]any
	if err := json.Unmarshal(payload, &a); err != nil {
		return nil, err
	}
	vars, _ := a["variables"].(map[string]any)
	if vars == nil {
		vars = map[string]any{}
		a["variables"] = vars
	}
	vars["model"] = map[string]any{"text": model, "ok": true}
	return json.Marshal(a)
}

// argsTools are tools on the SDK's parsed-arguments fast path.
var argsTools = map[string]guest.ArgsToolFunc{
	// echo_args is echo without reflection or allocation.
	"echo_args": func(_ guest.Context, args *guest.Args, out *guest.Result) error {
		text, err := args.Bytes("text")
		if err != nil {
			return fmt.Errorf("echo: %w", err)
		}
		guest.Log("debug", "echo")
		out.Write(text)
		return nil
	},
	// args_probe reports what the SDK's accessors make of each argument.
	"args_probe": func(_ guest.Context, args *guest.Args, out *guest.Result) error {
		for _, name := range []string{"s", "n", "f", "b", "missing"} {
			var v any
			var err error
			switch name {
			case "s", "missing":
				var b []byte
				b, err = args.Bytes(name)
				v = string(b)
			case "n":
				v, err = args.Int(name)
			case "f":
				v, err = args.Float(name)
			case "b":
				v, err = args.Bool(name)
			}
			if err != nil {
				fmt.Fprintf(out, "%s: error: %v\n", name, err)
			} else {
				fmt.Fprintf(out, "%s: %v\n", name, v)
			}
		}
		if strings.Contains(string(args.Raw()), "fail") {
			return errors.New("args_probe failed on purpose")
		}
		return nil
	},
}

var tools = map[string]guest.ToolFunc{
	"counter": func(guest.Context, []byte) (string, error) {
		counter++
		return strconv.Itoa(counter), nil
	},
	"echo": func(_ guest.Context, args []byte) (string, error) {
		var a struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			return "", fmt.Errorf("echo: bad arguments: %w", err)
		}
		guest.Log("debug", "echo")
		return a.Text, nil
	},
	"trap": func(guest.Context, []byte) (string, error) {
		var p *int
		return strconv.Itoa(*p), nil // nil dereference: a trap
	},
	"spin": func(guest.Context, []byte) (string, error) {
		for {
		}
	},
	"fail": func(guest.Context, []byte) (string, error) {
		return "", errors.New("the tool failed on purpose")
	},
	"probe": func(_ guest.Context, args []byte) (string, error) {
		var ps []probe
		if err := json.Unmarshal(args, &ps); err != nil {
			return "", err
		}
		out := make([]probeResult, len(ps))
		for i, p := range ps {
			out[i] = runProbe(p)
		}
		b, _ := json.Marshal(out)
		return string(b), nil
	},
	"state": func(_ guest.Context, args []byte) (string, error) {
		var n int
		if _, err := guest.StateGet("n", &n); err != nil {
			return "", err
		}
		n++
		if err := guest.StateSet("n", n); err != nil {
			return "", err
		}
		return strconv.Itoa(n), nil
	},
	"emit": func(_ guest.Context, args []byte) (string, error) {
		var a struct {
			Event   string          `json:"event"`
			Payload json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			return "", err
		}
		return "emitted", guest.Emit(a.Event, a.Payload)
	},
	"events": func(guest.Context, []byte) (string, error) {
		b, _ := json.Marshal(eventLog)
		return string(b), nil
	},
	"readfile": func(_ guest.Context, args []byte) (string, error) {
		b, err := os.ReadFile(string(args))
		return string(b), err
	},
	"writefile": func(_ guest.Context, args []byte) (string, error) {
		path, data, _ := strings.Cut(string(args), "\n")
		return "written", os.WriteFile(path, []byte(data), 0o644)
	},
	"exec": func(_ guest.Context, args []byte) (string, error) {
		var req hostfns.ExecRequest
		if err := json.Unmarshal(args, &req); err != nil {
			return "", err
		}
		r, err := guest.Exec(req)
		if err != nil {
			return "", err
		}
		b, _ := json.Marshal(r)
		return string(b), nil
	},
	"http": func(_ guest.Context, args []byte) (string, error) {
		r, err := guest.HTTP(hostfns.HTTPRequest{URL: string(args)})
		if err != nil {
			return "", err
		}
		b, _ := json.Marshal(r)
		return string(b), nil
	},
	// wasi_getenv reads the WASI environment, which the Go runtime copied
	// as the module initialised: what an image would carry to another
	// instance.
	"wasi_getenv": func(_ guest.Context, args []byte) (string, error) {
		return os.Getenv(string(args)), nil
	},
	"getenv": func(_ guest.Context, args []byte) (string, error) {
		v, found, err := guest.Getenv(string(args))
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%v:%s", found, v), nil
	},
}
