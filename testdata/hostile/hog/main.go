//go:build wasip1

// Command hog is the hostile plugin of the bounds attacks (issue 9): it
// makes the host spend time, memory and waits on its behalf. Its config
// chooses what it does at load and which providers it registers; its
// "hog" tool runs one operation per call and reports what the host
// answered. Loops run for a wall-clock time the config or the arguments
// give, so an unbounded host lets them finish (and the test sees that),
// rather than hang the suite.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/hostfns/guest"
)

type config struct {
	// Self is the plugin's name, for its event namespace.
	Self string `json:"self"`
	// Prefix is put before the names of its tools, sections and
	// variable, so that several copies can be loaded at once.
	Prefix string `json:"prefix"`
	// Init is an init-time operation: state-loop, static-flood,
	// schema-flood.
	Init string `json:"init"`
	// Section and Variable register a dynamic section or a variable
	// running the op of that name (state-loop, big, sleep-exec).
	Section  string `json:"section"`
	Variable string `json:"variable"`
	// Sections is how many dynamic sections ("big") to register.
	Sections int `json:"sections"`
	// N is a count, Size a byte size, MS a duration in milliseconds, for
	// the init and provider operations.
	N    int `json:"n"`
	Size int `json:"size"`
	MS   int `json:"ms"`
	// Listen is an event the plugin listens for; on it, it emits Emit
	// (an event of its own) after PauseMS.
	Listen  string `json:"listen"`
	Emit    string `json:"emit"`
	PauseMS int    `json:"pause_ms"`
}

type args struct {
	Op      string `json:"op"`
	N       int    `json:"n"`
	Size    int    `json:"size"`
	MS      int    `json:"ms"`
	URL     string `json:"url"`
	Command string `json:"command"`
	Event   string `json:"event"`
}

// result is what an operation did: how many host calls, the last status
// and message, and how long it ran by the guest's clock.
type result struct {
	Calls  int            `json:"calls"`
	Status map[string]int `json:"status"`
	Last   string         `json:"last"`
	MS     int64          `json:"ms"`
}

func (r *result) note(err error) {
	if r.Status == nil {
		r.Status = map[string]int{}
	}
	r.Calls++
	var he *guest.HostError
	switch {
	case errors.As(err, &he):
		r.Status[he.Status.String()]++
		r.Last = he.Status.String() + ": " + he.Message
	case err != nil:
		r.Status["guest error"]++
		r.Last = err.Error()
	default:
		r.Status["ok"]++
		r.Last = "ok"
	}
}

var cfg config

func main() {}

func init() { guest.Main(setup) }

func setup(p *guest.Plugin) error {
	if err := json.Unmarshal(p.Config, &cfg); err != nil {
		return fmt.Errorf("hog config: %w", err)
	}
	if p.Loading() && cfg.Init != "" {
		r, err := run(args{Op: cfg.Init, N: cfg.N, Size: cfg.Size, MS: cfg.MS}, p)
		if err != nil {
			return err
		}
		if r.Status["ok"] == 0 && r.Calls > 0 {
			return fmt.Errorf("%s: %d calls, none ok; last: %s", cfg.Init, r.Calls, r.Last)
		}
	}
	if cfg.Section != "" {
		n := max(cfg.Sections, 1)
		for i := 0; i < n; i++ {
			if err := p.DynamicSection(cfg.Prefix+"hog:"+strconv.Itoa(i), 700+i, provider(cfg.Section)); err != nil {
				return err
			}
		}
	}
	if cfg.Variable != "" {
		f := provider(cfg.Variable)
		if err := p.Variable(cfg.Prefix+"hog", func(c guest.Context) (string, bool, error) {
			s, err := f(c)
			return s, err == nil, err
		}); err != nil {
			return err
		}
	}
	if cfg.Listen != "" {
		if err := p.On(cfg.Listen, func(guest.Context, []byte) error {
			if cfg.PauseMS > 0 {
				time.Sleep(time.Duration(cfg.PauseMS) * time.Millisecond)
			}
			return guest.Emit(cfg.Emit, map[string]string{"from": cfg.Self})
		}); err != nil {
			return err
		}
	}
	obj := json.RawMessage(`{"type":"object"}`)
	if err := p.Tool(guest.Tool{Name: cfg.Prefix + "hog", Description: "Makes the host work.", Parameters: obj}, tool); err != nil {
		return err
	}
	return p.Tool(guest.Tool{Name: cfg.Prefix + "hog_ok", Description: "A legitimate call.", Parameters: obj},
		func(guest.Context, []byte) (string, error) { return "ok", nil })
}

// provider is a dynamic section's or variable's text, made by op for an
// agent whose model is "hog"; for any other agent, a short greeting, so
// that legitimate turns on the same host work.
func provider(op string) func(guest.Context) (string, error) {
	return func(c guest.Context) (string, error) {
		if f, _ := c.Facts(); f.Model != "hog" {
			return "hello from the hog", nil
		}
		switch op {
		case "big":
			return strings.Repeat("b", cfg.Size), nil
		}
		r, err := run(args{Op: op, N: cfg.N, Size: cfg.Size, MS: cfg.MS}, nil)
		if err != nil {
			return "", err
		}
		b, _ := json.Marshal(r)
		return string(b), nil
	}
}

func tool(_ guest.Context, raw []byte) (string, error) {
	var a args
	if err := json.Unmarshal(raw, &a); err != nil {
		return "", err
	}
	r, err := run(a, nil)
	if err != nil {
		return "", err
	}
	b, _ := json.Marshal(r)
	return string(b), nil
}

// until runs fn until ms milliseconds have passed (or n times, if n > 0).
func until(a args, fn func(r *result)) *result {
	r := &result{}
	start := time.Now()
	for i := 0; ; i++ {
		if a.N > 0 && i >= a.N || a.MS > 0 && time.Since(start) >= time.Duration(a.MS)*time.Millisecond {
			break
		}
		fn(r)
	}
	r.MS = time.Since(start).Milliseconds()
	return r
}

func run(a args, p *guest.Plugin) (*result, error) {
	switch a.Op {
	case "state-loop":
		// state_get with a request of Size bytes: a key padded with
		// whitespace, which a host that reads before it refuses decodes
		// in full every time.
		req := []byte(`{"key":"k"}` + strings.Repeat(" ", max(a.Size-11, 0)))
		return until(a, func(r *result) {
			_, err := guest.Call(hostfns.FnStateGet, req)
			r.note(err)
		}), nil
	case "log-loop":
		// log records of Size bytes each, accepted, so the host parses
		// every one.
		req := []byte(`{"level":"info","message":"` + strings.Repeat("l", max(a.Size-30, 0)) + `"}`)
		return until(a, func(r *result) {
			_, err := guest.Call(hostfns.FnLog, req)
			r.note(err)
		}), nil
	case "exec-loop":
		return until(a, func(r *result) {
			_, err := guest.Exec(hostfns.ExecRequest{Command: a.Command})
			r.note(err)
		}), nil
	case "exec":
		r := &result{}
		res, err := guest.Exec(hostfns.ExecRequest{Command: a.Command})
		r.note(err)
		if err == nil {
			r.Last = res.Stdout.Data
		}
		return r, nil
	case "http-loop", "http":
		if a.Op == "http" {
			a.N = 1
		}
		start := time.Now()
		r := until(a, func(r *result) {
			resp, err := guest.HTTP(hostfns.HTTPRequest{URL: a.URL})
			r.note(err)
			if err == nil {
				r.Last = fmt.Sprintf("ok: status %d, %d bytes", resp.Status, len(resp.Body))
			}
		})
		r.MS = time.Since(start).Milliseconds()
		return r, nil
	case "emit":
		// Hold the instance a moment first, so that two plugins emitting
		// to each other both hold theirs when they emit.
		time.Sleep(time.Duration(a.MS) * time.Millisecond)
		r := &result{}
		r.note(guest.Emit(a.Event, map[string]string{"from": cfg.Self}))
		return r, nil
	case "static-flood":
		// N static sections of Size bytes each, one request buffer reused.
		r := &result{}
		text := strings.Repeat("s", a.Size)
		for i := 0; i < a.N; i++ {
			err := p.Section(fmt.Sprintf("flood:%04d", i), 800, text)
			r.note(err)
			if err != nil {
				break
			}
		}
		return r, nil
	case "schema-flood":
		// N tools whose schema is a Size-byte description.
		r := &result{}
		schema := json.RawMessage(`{"type":"object","description":"` + strings.Repeat("d", a.Size) + `"}`)
		for i := 0; i < a.N; i++ {
			err := p.Tool(guest.Tool{Name: fmt.Sprintf("schema_%d", i), Description: "huge schema", Parameters: schema},
				func(guest.Context, []byte) (string, error) { return "", nil })
			r.note(err)
			if err != nil {
				break
			}
		}
		return r, nil
	}
	return nil, fmt.Errorf("hog: unknown op %q", a.Op)
}
