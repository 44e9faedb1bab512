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
	"strings"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/hostfns/guest"
)

// eventAgentOpen is the loop's event as an agent opens on its session
// (internal/events.EventAgentOpen): a failing listener refuses the open.
const eventAgentOpen = "agent/open"

// eventAgentEnd is the loop's event as an agent ends
// (internal/events.EventAgentEnd); failures are only logged.
const eventAgentEnd = "agent/end"

// SubagentType is the agent_type of SubagentStart and SubagentStop, and
// what their matchers are tested against: Claude Code's default for its
// Task tool, as in the reference (the loop names no kind of subagent).
const SubagentType = "general-purpose"

// startContextKey is the host state key holding the context the start
// hooks (SessionStart, SubagentStart) gave, until the agent's first
// prompt takes it to the model.
const startContextKey = "start_context"

// openedKey is the host state key marking a session that was opened
// before: its next SessionStart is a "resume".
const openedKey = "opened"

// Payloads builds what a hook reads on stdin, per dialect.
type Payloads interface {
	// Build returns the stdin JSON object for point; an error fails the
	// hook point.
	Build(point string, ev *Event, facts hostfns.CallContext, s *Settings) (map[string]any, error)
	// PlainContext reports whether plain stdout of exit 0 is context at
	// point.
	PlainContext(point string) bool
	// TrailingNewline ends stdin with a newline.
	TrailingNewline() bool
}

// Event is the loop's payload at a hook point, as far as the bridge reads
// it (internal/agent PromptSubmit, ToolExecution, TurnStopping).
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
	// Source is SessionStart's source: "startup" or "resume".
	Source string `json:"-"`
	// AgentID is the subagent's agent id, at SubagentStart and
	// SubagentStop.
	AgentID string `json:"-"`
}

var (
	dialect    Dialect
	payloads   Payloads
	settings   Settings
	loaded     *Config // an absolute ConfigPath: the file read at load
	sessionCfg *Config // a relative ConfigPath: the file read at this agent's open
)

// hookFileKey is the host state key under which the bridge keeps the
// session's hook file as read at its open, so that an instance made later
// for the agent (after a trap, say) runs the same policy.
const hookFileKey = "hook_file"

// hookFile is a session's hook file as read at its open.
type hookFile struct {
	File    string `json:"file"`
	Present bool   `json:"present"`
	Data    string `json:"data,omitempty"`
}

// Run makes the plugin a hook bridge of dialect d.
func Run(d Dialect, p Payloads) {
	dialect, payloads = d, p
	guest.Main(setup)
}

func setup(p *guest.Plugin) error {
	settings = Settings{DefaultTimeoutMs: DefaultTimeoutMs, SummaryChars: 500, MaxTextChars: 10_000}
	if len(bytes.TrimSpace(p.Config)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(p.Config))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&settings); err != nil {
			return fmt.Errorf("hooks-%s config: %w", dialect.Name, err)
		}
	}
	if settings.Obsolete != nil {
		return fmt.Errorf("hooks-%s config: read_from_workspace is gone: a relative config_path is read in each session's working directory when the session opens, an absolute one at load (docs/HOOKS.md)", dialect.Name)
	}
	if !dialect.ProjectEnv && (settings.ProjectDir != "" || settings.PluginRoot != "") {
		return fmt.Errorf("hooks-%s config: project_dir and plugin_root are Claude Code's (hooks-claude); Codex substitutes nothing in commands", dialect.Name)
	}
	if !dialect.Ask && settings.AskClient {
		return fmt.Errorf("hooks-%s config: ask_client is Claude Code's (hooks-claude); a Codex hook can only block", dialect.Name)
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
	points, open, end := Points, true, len(dialect.Lifecycle) > 0
	if path.IsAbs(settings.ConfigPath) {
		// The operator's file: what it holds decides the points joined,
		// and a file that exists but cannot be used fails the load.
		cfg, err := readConfig(settings.ConfigPath, p.Loading())
		if err != nil {
			return err
		}
		loaded = cfg
		points = nil
		// The context of a start hook reaches the model with the
		// agent's first prompt (agent/prompt-submit).
		open = len(cfg.Points[PointSessionStart])+len(cfg.Points[PointSubagentStart]) > 0
		end = len(cfg.Points[PointSubagentStop]) > 0
		for _, pt := range Points {
			if len(loaded.Points[pt]) > 0 || (open && pt == PointUserPromptSubmit) {
				points = append(points, pt)
			}
		}
	}
	if open {
		if err := p.On(eventAgentOpen, openAgent); err != nil {
			return err
		}
	}
	if end {
		if err := p.On(eventAgentEnd, endAgent); err != nil {
			return err
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

// readFile reads a hook file: present false when there is none (a
// directory the plugin is not granted reads as missing); an error when it
// exists and cannot be read.
func readFile(file string) (data []byte, present bool, err error) {
	data, err = os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("hooks-%s: hook file %s: %w", dialect.Name, file, err)
	}
	return data, true, nil
}

// parseFile parses a hook file that was read; loud logs what it skips.
func parseFile(file string, data []byte, present, loud bool) (*Config, error) {
	if !present {
		if loud {
			guest.Log("info", fmt.Sprintf("hooks-%s: no hook file %s: no hooks (a directory the plugin is not granted reads as missing)", dialect.Name, file))
		}
		return &Config{Points: map[string][]Group{}}, nil
	}
	cfg, err := Parse(data, file, dialect)
	if err != nil {
		return nil, fmt.Errorf("hooks-%s: %w", dialect.Name, err)
	}
	if loud {
		for _, s := range cfg.Skipped {
			guest.Log("warn", fmt.Sprintf("hooks-%s: %s: skipping %s", dialect.Name, file, s))
		}
		for _, w := range cfg.Warnings {
			guest.Log("warn", fmt.Sprintf("hooks-%s: %s", dialect.Name, w))
		}
	}
	return cfg, nil
}

// readConfig reads and parses a hook file. A missing file is no hooks,
// logged at info; one that exists but cannot be read or parsed is an
// error naming it (and its line). loud logs (the load-time instance, a
// session's open); an agent's instance reads quietly.
func readConfig(file string, loud bool) (*Config, error) {
	data, present, err := readFile(file)
	if err != nil {
		return nil, err
	}
	return parseFile(file, data, present, loud)
}

// openAgent is the bridge at agent/open: it reads a session's own hook
// file (a relative config_path), then runs SessionStart, and for a
// subagent SubagentStart, keeping the context they give for the agent's
// first prompt. A start hook that fails is logged and changes nothing, as
// in the reference; a hook file that cannot be used refuses the open.
func openAgent(ctx guest.Context, _ []byte) error {
	facts, err := ctx.Facts()
	if err != nil {
		return err
	}
	if !path.IsAbs(settings.ConfigPath) {
		if err := openSession(facts); err != nil {
			return err
		}
	}
	cfg, err := configFor()
	if err != nil {
		return err
	}
	var notes []string
	if len(cfg.Points[PointSessionStart]) > 0 {
		// A session opened before (its mark is in the state the session
		// recorded) resumes. Only a bridge with SessionStart hooks marks
		// it, so that one without records nothing new.
		source := "startup"
		var opened bool
		if found, _ := guest.StateGet(openedKey, &opened); found && opened {
			source = "resume"
		} else if err := guest.StateSet(openedKey, true); err != nil {
			guest.Log("warn", fmt.Sprintf("hooks-%s: marking the session opened: %v", dialect.Name, err))
		}
		notes = append(notes, runLifecycle(cfg, PointSessionStart, source, &Event{Source: source}, facts)...)
	}
	if facts.Parent != "" {
		notes = append(notes, runLifecycle(cfg, PointSubagentStart, SubagentType, &Event{AgentID: facts.AgentID}, facts)...)
	}
	if len(notes) > 0 {
		if err := guest.StateSet(startContextKey, notes); err != nil {
			guest.Log("warn", fmt.Sprintf("hooks-%s: keeping the start hooks' context: %v (dropped)", dialect.Name, err))
		}
	}
	return nil
}

// endAgent is the bridge at agent/end: a subagent's end runs SubagentStop,
// which only observes.
func endAgent(ctx guest.Context, _ []byte) error {
	facts, err := ctx.Facts()
	if err != nil || facts.Parent == "" {
		return err
	}
	cfg, err := configFor()
	if err != nil {
		return err
	}
	runLifecycle(cfg, PointSubagentStop, SubagentType, &Event{AgentID: facts.AgentID}, facts)
	return nil
}

// runLifecycle runs the hooks of a lifecycle event whose matcher selects
// query, without hook/* records (there is no turn), and returns the
// context they give. What fails is logged, and the agent goes on.
func runLifecycle(cfg *Config, point, query string, ev *Event, facts hostfns.CallContext) []string {
	m, err := runHooks(cfg, point, query, ev, facts, false)
	if err != nil {
		guest.Log("warn", fmt.Sprintf("hooks-%s: %s: %v (not blocking)", dialect.Name, point, err))
		return nil
	}
	return m.Context
}

// openSession reads the session's own hook file, <cwd>/<config_path>,
// when the agent opens: before any turn, so a tool that writes the file
// later changes nothing until the next open. What was read is kept on
// the host for the session; a file that cannot be used fails the open.
func openSession(facts hostfns.CallContext) error {
	hf := hookFile{}
	if facts.Cwd == "" {
		guest.Log("info", fmt.Sprintf("hooks-%s: the session has no working directory for %s: no hooks", dialect.Name, settings.ConfigPath))
	} else {
		hf.File = path.Join(facts.Cwd, settings.ConfigPath)
		data, present, err := readFile(hf.File)
		if err != nil {
			return err
		}
		hf.Present, hf.Data = present, string(data)
	}
	cfg, err := parseFile(hf.File, []byte(hf.Data), hf.Present, hf.File != "")
	if err != nil {
		return err
	}
	// Kept as host state, which the session records: a resumed session
	// whose file is unchanged records nothing new.
	var prev hookFile
	if found, err := guest.StateGet(hookFileKey, &prev); err != nil || !found || prev != hf {
		if err := guest.StateSet(hookFileKey, hf); err != nil {
			return fmt.Errorf("hooks-%s: keeping the hook file %s for the session: %w", dialect.Name, hf.File, err)
		}
	}
	sessionCfg = cfg
	return nil
}

// configFor is the hook config of the calling session.
func configFor() (*Config, error) {
	if loaded != nil {
		return loaded, nil
	}
	if sessionCfg != nil {
		return sessionCfg, nil
	}
	// A new instance for an agent whose open an earlier one handled.
	var hf hookFile
	found, err := guest.StateGet(hookFileKey, &hf)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("hooks-%s: the session's hook file %s was not read when it opened (the bridge loaded after): open the session again", dialect.Name, settings.ConfigPath)
	}
	cfg, err := parseFile(hf.File, []byte(hf.Data), hf.Present, false)
	if err != nil {
		return nil, err
	}
	sessionCfg = cfg
	return cfg, nil
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
		cfg, err := configFor()
		if err != nil {
			return nil, err
		}
		m, err := runPoint(cfg, point, &ev, facts)
		if err != nil {
			return nil, err
		}
		if point == PointUserPromptSubmit && m.Decision != "deny" {
			// The start hooks' context goes first, with the first
			// prompt that reaches the model.
			var start []string
			if found, err := guest.StateGet(startContextKey, &start); err == nil && found && len(start) > 0 {
				m.Context = append(start, m.Context...)
				if err := guest.StateSet(startContextKey, []string{}); err != nil {
					return nil, fmt.Errorf("hooks-%s: %s: taking the start hooks' context: %w", dialect.Name, point, err)
				}
			}
		}
		return apply(doc, point, ev.Name, m)
	}
}

// runPoint runs every hook of a turn's point whose matcher selects the
// event's tool, recording hook/invoked and hook/result around each.
// UserPromptSubmit and Stop have no tool: their matchers are tested
// against the empty string, as the reference (6bca9cbeb3) does, so a
// group with no matcher, "" or "*" runs and one naming a tool never does.
func runPoint(cfg *Config, point string, ev *Event, facts hostfns.CallContext) (Merged, error) {
	query := ev.Name
	if point == PointUserPromptSubmit || point == PointStop {
		query = ""
	}
	return runHooks(cfg, point, query, ev, facts, true)
}

// runHooks runs every hook of point whose matcher selects query; records
// writes hook/invoked and hook/result around each.
func runHooks(cfg *Config, point, query string, ev *Event, facts hostfns.CallContext, records bool) (Merged, error) {
	var outs []Output
	var stdin []byte
	for _, g := range cfg.Points[point] {
		if !g.Matches(query) {
			continue
		}
		for _, h := range g.Hooks {
			if stdin == nil {
				m, err := payloads.Build(point, ev, facts, &settings)
				if err != nil {
					return Merged{}, err
				}
				if stdin, err = Stdin(m, payloads.TrailingNewline()); err != nil {
					return Merged{}, fmt.Errorf("hooks-%s: %s input: %w", dialect.Name, point, err)
				}
			}
			if !records {
				outs = append(outs, runHook(h, point, string(stdin), facts.Cwd))
				continue
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
				"decision": o.Recorded(), "durationMs": ms}
			if o.Exited {
				res["exitCode"] = o.ExitCode
			}
			if o.Stderr != "" {
				res["stderrSummary"] = Summary(o.Stderr, settings.SummaryChars)
			}
			record("hook/result", res)
			outs = append(outs, o)
		}
	}
	return Merge(outs), nil
}

// runHook runs one command through the exec grant, in the session's
// working directory.
func runHook(h Hook, point, stdin, cwd string) Output {
	timeout := h.TimeoutMs
	if timeout == 0 {
		timeout = settings.DefaultTimeoutMs
	}
	r, err := guest.Exec(hostfns.ExecRequest{Command: Command(h.Command, dialect, &settings, cwd), Cwd: cwd, Stdin: stdin, TimeoutMs: timeout})
	if err != nil {
		// No process, no exit code: the failure is the record's stderr,
		// as in the reference.
		guest.Log("warn", fmt.Sprintf("hooks-%s: %s hook could not run: %v (not blocking)", dialect.Name, point, err))
		return Output{Stderr: err.Error()}
	}
	if r.TimedOut || r.Canceled || r.Signal != "" {
		why := "killed by signal " + r.Signal
		if r.TimedOut {
			why = "timed out after " + strconv.FormatInt(timeout, 10) + "ms"
		} else if r.Canceled {
			why = "cancelled"
		}
		guest.Log("warn", fmt.Sprintf("hooks-%s: %s hook %s (not blocking)", dialect.Name, point, why))
		// Recorded without an exit code and with what the hook itself
		// wrote to stderr, nothing made up (the log says why).
		return Output{TimedOut: r.TimedOut, Stdout: strings.TrimSpace(r.Stdout.Data), Stderr: strings.TrimSpace(r.Stderr.Data)}
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
// tool is the call's tool name, at the tool points.
func apply(doc map[string]json.RawMessage, point, tool string, m Merged) ([]byte, error) {
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
		switch {
		case m.Decision == "deny":
			set("deny", reason("blocked by PreToolUse hook"))
		case m.Decision == "ask" && dialect.Ask:
			// No approval channel, as in the reference's deployments:
			// the call fails with the hook's reason, or the tools
			// layer's own words when it gave none. ask_client asks the
			// user instead; the loop needs a reason to show, and the
			// same words stand in for a missing one.
			why := reason(fmt.Sprintf("tool %q requires approval (not yet supported)", tool))
			if settings.AskClient {
				set("ask", why)
			} else {
				set("deny", why)
			}
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
