//go:build wasip1

package hookbridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/hostfns/guest"
)

// Settings is the bridge plugin's config (the operator's `config:`).
type Settings struct {
	// ConfigPath is the hook file. A relative path resolves against the
	// directory the process started in (the plugin sees it through a
	// granted PWD), or, with ReadFromWorkspace, against the session's
	// working directory.
	ConfigPath string `json:"config_path"`
	// ReadFromWorkspace reads ConfigPath in each session's working
	// directory instead of once at load. Risky: see docs/HOOKS.md.
	ReadFromWorkspace bool `json:"read_from_workspace"`
	// DefaultTimeoutMs is a hook's timeout when it sets none.
	DefaultTimeoutMs int64 `json:"default_timeout_ms"`
	// SummaryChars caps hook/result's stderrSummary.
	SummaryChars int `json:"stderr_summary_max_chars"`
	// MaxTextChars caps the context and reasons a hook gives the model.
	MaxTextChars int `json:"max_text_chars"`
	// Model is stamped on Codex payloads.
	Model string `json:"model"`
}

// Payloads builds what a hook reads on stdin, per dialect.
type Payloads interface {
	// Build returns the stdin JSON object for point.
	Build(point string, ev *Event, facts hostfns.CallContext, s *Settings) map[string]any
	// PlainContext reports whether plain stdout of exit 0 is context at
	// point.
	PlainContext(point string) bool
	// TrailingNewline ends stdin with a newline.
	TrailingNewline() bool
}

// Event is the loop's payload at a hook point, as far as the bridge reads
// it (runtime/agent PromptSubmit, ToolExecution, TurnStopping).
type Event struct {
	Turn      int    `json:"turn"`
	Step      int    `json:"step"`
	Prompt    string `json:"prompt"`
	CallID    string `json:"callId"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Text      string `json:"text"`
	Result    *struct {
		Text    string `json:"text"`
		IsError bool   `json:"isError"`
	} `json:"result"`
}

var (
	dialect  Dialect
	payloads Payloads
	settings Settings
	loaded   *Config            // the file read at load
	perCwd   map[string]*Config // ReadFromWorkspace: per working directory
)

// Run makes the plugin a hook bridge of dialect d.
func Run(d Dialect, p Payloads) {
	dialect, payloads = d, p
	guest.Main(setup)
}

func setup(p *guest.Plugin) error {
	settings = Settings{DefaultTimeoutMs: 60_000, SummaryChars: 500, MaxTextChars: 10_000}
	if len(bytes.TrimSpace(p.Config)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(p.Config))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&settings); err != nil {
			return fmt.Errorf("hooks-%s config: %w", dialect.Name, err)
		}
	}
	if settings.DefaultTimeoutMs < 1 || settings.SummaryChars < 1 || settings.MaxTextChars < 1 {
		return fmt.Errorf("hooks-%s config: default_timeout_ms, stderr_summary_max_chars and max_text_chars must be positive", dialect.Name)
	}
	if settings.ConfigPath == "" {
		guest.Log("warn", fmt.Sprintf("hooks-%s: no config_path: no hooks registered", dialect.Name))
		return nil
	}
	if err := p.Need(hostfns.Capabilities{Exec: true, FS: []hostfns.FSNeed{{Path: "workspace", Mode: "ro"}}}); err != nil {
		return err
	}
	points := Points
	if settings.ReadFromWorkspace {
		perCwd = map[string]*Config{}
	} else {
		loaded = readConfig(settings.ConfigPath, p.Loading())
		points = nil
		for _, pt := range Points {
			if len(loaded.Points[pt]) > 0 {
				points = append(points, pt)
			}
		}
	}
	for _, pt := range points {
		if err := p.Waterfall(eventOf(pt), handler(pt)); err != nil {
			return err
		}
	}
	return nil
}

// eventOf is the loop's event for a hook point.
func eventOf(point string) string {
	switch point {
	case PointUserPromptSubmit:
		return "agent/prompt-submit"
	case PointPreToolUse:
		return "tools/pre-execute"
	case PointPostToolUse:
		return "tools/post-execute"
	}
	return "agent/turn-stopping"
}

// readConfig reads and parses the hook file. A missing file registers
// nothing; a malformed one is logged, with its file and line, and
// registers nothing: the agent runs as if there were no hooks. loud logs
// (the load-time instance); an agent's instance reads quietly.
func readConfig(file string, loud bool) *Config {
	empty := &Config{Points: map[string][]Group{}}
	data, err := os.ReadFile(file)
	if err != nil {
		if loud {
			if errors.Is(err, fs.ErrNotExist) {
				guest.Log("info", fmt.Sprintf("hooks-%s: no hook file %s: no hooks registered (a directory the plugin is not granted reads as missing)", dialect.Name, file))
			} else {
				guest.Log("error", fmt.Sprintf("hooks-%s: %s: %v: no hooks registered", dialect.Name, file, err))
			}
		}
		return empty
	}
	cfg, err := Parse(data, file, dialect)
	if err != nil {
		guest.Log("error", fmt.Sprintf("hooks-%s: %v: no hooks registered", dialect.Name, err))
		return empty
	}
	if loud {
		for _, s := range cfg.Skipped {
			guest.Log("warn", fmt.Sprintf("hooks-%s: %s: skipping %s", dialect.Name, file, s))
		}
	}
	return cfg
}

// configFor is the hook config for a call in working directory cwd.
func configFor(cwd string) *Config {
	if perCwd == nil {
		return loaded
	}
	if c, ok := perCwd[cwd]; ok {
		return c
	}
	file := settings.ConfigPath
	if !path.IsAbs(file) {
		file = path.Join(cwd, file)
	}
	c := readConfig(file, true)
	perCwd[cwd] = c
	return c
}

func handler(point string) func(ctx guest.Context, payload []byte) ([]byte, error) {
	return func(ctx guest.Context, payload []byte) ([]byte, error) {
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(payload, &doc); err != nil {
			return nil, fmt.Errorf("hooks-%s: %s payload: %w", dialect.Name, point, err)
		}
		var ev Event
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, fmt.Errorf("hooks-%s: %s payload: %w", dialect.Name, point, err)
		}
		facts, err := ctx.Facts()
		if err != nil {
			return nil, err
		}
		cfg := configFor(facts.Cwd)
		m := runPoint(cfg, point, &ev, facts)
		return apply(doc, point, m)
	}
}

// runPoint runs every hook of point whose matcher selects the event's
// tool, recording hook/invoked and hook/result around each.
func runPoint(cfg *Config, point string, ev *Event, facts hostfns.CallContext) Merged {
	var outs []Output
	var stdin []byte
	for _, g := range cfg.Points[point] {
		if (point == PointPreToolUse || point == PointPostToolUse) && !g.Matches(ev.Name) {
			continue
		}
		for _, h := range g.Hooks {
			if stdin == nil {
				b, _ := json.Marshal(payloads.Build(point, ev, facts, &settings))
				if payloads.TrailingNewline() {
					b = append(b, '\n')
				}
				stdin = b
			}
			id := handlerID(point)
			inv := map[string]any{"turn": ev.Turn, "point": point, "dialect": dialect.Name, "handlerId": id}
			if g.Matcher != "" {
				inv["matcher"] = g.Matcher
			}
			record("hook/invoked", inv)
			start := time.Now()
			o := runHook(h, point, string(stdin), facts.Cwd)
			ms := float64(time.Since(start).Microseconds()) / 1000
			res := map[string]any{"turn": ev.Turn, "point": point, "handlerId": id,
				"decision": o.Recorded(), "exitCode": o.ExitCode, "durationMs": ms}
			if o.Stderr != "" {
				res["stderrSummary"] = Summary(o.Stderr, settings.SummaryChars)
			}
			record("hook/result", res)
			outs = append(outs, o)
		}
	}
	return Merge(outs)
}

// runHook runs one command through the exec grant, in the session's
// working directory.
func runHook(h Hook, point, stdin, cwd string) Output {
	timeout := h.TimeoutMs
	if timeout == 0 {
		timeout = settings.DefaultTimeoutMs
	}
	r, err := guest.Exec(hostfns.ExecRequest{Command: h.Command, Cwd: cwd, Stdin: stdin, TimeoutMs: timeout})
	if err != nil {
		guest.Log("warn", fmt.Sprintf("hooks-%s: %s hook could not run: %v (not blocking)", dialect.Name, point, err))
		return Output{ExitCode: -1, Stderr: "hook could not run: " + err.Error()}
	}
	if r.TimedOut || r.Canceled || r.Signal != "" {
		why := "killed by signal " + r.Signal
		if r.TimedOut {
			why = "timed out after " + strconv.FormatInt(timeout, 10) + "ms"
		} else if r.Canceled {
			why = "cancelled"
		}
		guest.Log("warn", fmt.Sprintf("hooks-%s: %s hook %s (not blocking)", dialect.Name, point, why))
		return Output{ExitCode: -1, TimedOut: r.TimedOut, Stderr: "hook " + why}
	}
	o := ParseOutput(r.ExitCode, r.Stdout.Data, r.Stderr.Data, point, payloads.PlainContext(point))
	if o.ExitCode != 0 && o.ExitCode != 2 {
		guest.Log("warn", fmt.Sprintf("hooks-%s: %s hook exited %d (not blocking): %s", dialect.Name, point, o.ExitCode, Summary(o.Stderr, 200)))
	}
	return o
}

// record appends a hook record to the session; a refusal (the type not
// granted) is logged once per call and the hook still counts.
func record(typ string, data map[string]any) {
	if err := guest.AppendSessionEvent(typ, data); err != nil {
		guest.Log("warn", fmt.Sprintf("hooks-%s: %s not recorded: %v", dialect.Name, typ, err))
	}
}

// handlerID numbers hook runs per session, on host state so that a
// re-created instance does not repeat an id.
func handlerID(point string) string {
	var n int64
	_, _ = guest.StateGet("handler_seq", &n)
	n++
	_ = guest.StateSet("handler_seq", n)
	return dialect.Name + ":" + point + ":" + strconv.FormatInt(n, 10)
}

// apply writes the merged decision into the loop's payload.
func apply(doc map[string]json.RawMessage, point string, m Merged) ([]byte, error) {
	set := func(k string, v any) {
		b, _ := json.Marshal(v)
		doc[k] = b
	}
	reason := func(def string) string {
		if m.Reason == "" {
			return def
		}
		return Summary(m.Reason, settings.MaxTextChars)
	}
	addNotes := func(key string, texts []string) {
		if len(texts) == 0 {
			return
		}
		var notes []map[string]string
		if raw, ok := doc[key]; ok {
			_ = json.Unmarshal(raw, &notes)
		}
		for _, t := range texts {
			notes = append(notes, map[string]string{"text": Summary(t, settings.MaxTextChars)})
		}
		set(key, notes)
	}
	switch point {
	case PointUserPromptSubmit:
		if m.Decision == "deny" {
			set("block", reason("blocked by UserPromptSubmit hook"))
			break
		}
		addNotes("context", m.Context)
	case PointPreToolUse:
		switch m.Decision {
		case "deny":
			set("deny", reason("blocked by PreToolUse hook"))
		case "ask":
			set("ask", reason("a PreToolUse hook asks for confirmation"))
		}
	case PointPostToolUse:
		if m.Decision == "deny" {
			set("block", reason("blocked by PostToolUse hook"))
		}
		addNotes("context", m.Context)
	case PointStop:
		if m.Decision == "deny" {
			addNotes("continue", []string{reason("continue: blocked by Stop hook")})
		}
	}
	return json.Marshal(doc)
}
