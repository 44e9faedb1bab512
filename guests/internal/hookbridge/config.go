// Package hookbridge runs Claude Code and Codex command hooks at the
// agent loop's hook points. It is the shared core of the built-in plugins
// hooks-claude and hooks-codex: each supplies its Dialect (the settings
// file's event names, matcher rules and the JSON a hook reads on stdin),
// and the bridge parses the operator's hook file, runs the matching
// commands through the host's exec grant and maps what they say onto the
// loop's decisions (docs/HOOKS.md).
package hookbridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Hook points, with the names both dialects use in their settings files.
const (
	PointPreToolUse       = "PreToolUse"
	PointPostToolUse      = "PostToolUse"
	PointUserPromptSubmit = "UserPromptSubmit"
	PointStop             = "Stop"
)

// Lifecycle events, run outside a turn (as the reference runs them,
// detached, without hook/* records): SessionStart as an agent opens on
// its session, SubagentStart as a subagent's agent opens (after its
// SessionStart), SubagentStop as it ends. Codex has SessionStart only.
const (
	PointSessionStart  = "SessionStart"
	PointSubagentStart = "SubagentStart"
	PointSubagentStop  = "SubagentStop"
)

// Points lists the hook points the bridge runs in a turn, each on one of
// the loop's waterfalls, in a fixed order.
var Points = []string{PointUserPromptSubmit, PointPreToolUse, PointPostToolUse, PointStop}

// Events lists every event the bridge runs: the points, then the
// lifecycle events of Dialect.Lifecycle.
func (d Dialect) Events() []string {
	return append(append([]string{}, Points...), d.Lifecycle...)
}

// ErrConfig marks a hook file that cannot be used; the message names the
// file and the line.
var ErrConfig = errors.New("hook config")

// Hook is one command hook.
type Hook struct {
	Command string
	// TimeoutMs is the hook's own timeout, 0 for the bridge's default.
	TimeoutMs int64
}

// Group is a matcher and the hooks it selects.
type Group struct {
	Matcher string
	match   func(tool string) bool
	Hooks   []Hook
}

// Matches reports whether the group's matcher selects tool.
func (g *Group) Matches(tool string) bool { return g.match == nil || g.match(tool) }

// Config is a parsed hook file: the groups of each point.
type Config struct {
	Points map[string][]Group
	// Skipped names what the file holds that the bridge does not run
	// (other events, hook types other than command), for the log.
	Skipped []string
	// Warnings name, with the file and line, each malformed matcher
	// group that was skipped (Parse).
	Warnings []string
}

// Empty reports whether the config runs nothing.
func (c *Config) Empty() bool {
	for _, gs := range c.Points {
		if len(gs) > 0 {
			return false
		}
	}
	return true
}

// Settings is the bridge plugin's config (the operator's `config:`).
type Settings struct {
	// ConfigPath is the hook file. An absolute path is the operator's,
	// read at load; a relative one names a file in each session's working
	// directory, read when the session opens (agent/open).
	ConfigPath string `json:"config_path"`
	// Obsolete: read_from_workspace is gone (a relative ConfigPath is
	// always read in the session's working directory); setting it is an
	// error that says so.
	Obsolete *bool `json:"read_from_workspace"`
	// DefaultTimeoutMs is a hook's timeout when it sets none.
	DefaultTimeoutMs int64 `json:"default_timeout_ms"`
	// SummaryChars caps hook/result's stderrSummary.
	SummaryChars int `json:"stderr_summary_max_chars"`
	// MaxTextChars caps the context and reasons a hook gives the model.
	MaxTextChars int `json:"max_text_chars"`
	// Model is stamped on Codex payloads.
	Model string `json:"model"`
	// AskClient (Claude Code): a PreToolUse "ask" asks the user (ACP
	// session/request_permission) instead of failing the call with the
	// hook's reason, which is what the reference does.
	AskClient bool `json:"ask_client"`
	// ProjectDir (Claude Code) replaces ${CLAUDE_PROJECT_DIR} in commands
	// and is the hook's CLAUDE_PROJECT_DIR; without it the variable is
	// the session's working directory and commands are left as written.
	ProjectDir string `json:"project_dir"`
	// PluginRoot (Claude Code) replaces ${CLAUDE_PLUGIN_ROOT} in commands.
	PluginRoot string `json:"plugin_root"`
}

// DefaultTimeoutMs is a hook's timeout when neither it nor the config
// sets one: ten minutes, Claude Code's and Codex's default, and the
// reference's.
const DefaultTimeoutMs = 600_000

// Dialect is what differs between Claude Code's and Codex's hooks.
type Dialect struct {
	// Name is the dialect in hook/invoked records and handler ids:
	// "claude" or "codex".
	Name string
	// LiteralMatchers: a matcher of only [A-Za-z0-9_|] is a list of exact
	// names (Claude Code); otherwise every matcher is a regular expression.
	// Names are matched as they are: there are no aliases (Bash is not
	// bash), as in the reference.
	LiteralMatchers bool
	// TimeoutKeys are the keys a hook's timeout (seconds) may have.
	TimeoutKeys []string
	// ProjectEnv: the hook's environment carries CLAUDE_PROJECT_DIR, and
	// the config keys project_dir and plugin_root substitute
	// ${CLAUDE_PROJECT_DIR} and ${CLAUDE_PLUGIN_ROOT} in commands (Claude
	// Code). Codex does neither.
	ProjectEnv bool
	// Lifecycle lists the lifecycle events the dialect runs (Claude Code:
	// SessionStart, SubagentStart, SubagentStop; Codex: SessionStart).
	Lifecycle []string
	// Ask: a PreToolUse "ask" means something (Claude Code: the call
	// fails with the hook's reason, or, with ask_client, the user is
	// asked). Codex honours blocks only, and an ask there is no decision.
	Ask bool
}

var literalMatcher = regexp.MustCompile(`^[A-Za-z0-9_|]+$`)

type rawGroup struct {
	Matcher *string                      `json:"matcher"`
	Hooks   []map[string]json.RawMessage `json:"hooks"`
}

// Parse reads a hook file of the dialect. A settings file whose "hooks"
// key holds the map is accepted as well as the bare map. file names the
// file in errors and warnings, which carry its line.
//
// What makes the file unusable is an error, and nothing of it applies:
// it is not JSON, not an object, its "hooks" is not an object, or an
// event's value is not a list. One malformed matcher group (not an
// object, hooks that are not a list of objects, a matcher RE2 cannot
// compile, a hook whose command or timeout is wrong) is skipped with a
// warning in Config.Warnings naming the file, line and group, and the
// rest of the file applies, as in the reference harness, which ignores a
// malformed entry.
func Parse(data []byte, file string, d Dialect) (*Config, error) {
	fail := func(off int64, format string, args ...any) error {
		return fmt.Errorf("%w: %s:%d: %s", ErrConfig, file, lineAt(data, off), fmt.Sprintf(format, args...))
	}
	var root map[string]json.RawMessage
	if err := json.Unmarshal(data, &root); err != nil {
		return nil, jsonError(err, data, file)
	}
	hooksRaw, ok := root["hooks"]
	if !ok {
		hooksRaw = data
	}
	var points map[string]json.RawMessage
	if err := json.Unmarshal(hooksRaw, &points); err != nil {
		return nil, fail(offsetOf(data, hooksRaw), "\"hooks\" must be an object of event names to lists of matcher groups")
	}
	cfg := &Config{Points: map[string][]Group{}}
	names := make([]string, 0, len(points))
	for name := range points {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		raw := points[name]
		known := false
		for _, p := range d.Events() {
			known = known || p == name
		}
		if !known {
			cfg.Skipped = append(cfg.Skipped, fmt.Sprintf("event %q (not run by this bridge)", name))
			continue
		}
		var groups []json.RawMessage
		if err := json.Unmarshal(raw, &groups); err != nil {
			return nil, fail(offsetOf(data, raw), "%s: want a list of {matcher, hooks: [...]} groups: %v", name, shortErr(err))
		}
		from := offsetOf(data, raw)
		for gi, graw := range groups {
			at := from
			if i := bytes.Index(data[from:], graw); i >= 0 {
				at = from + int64(i)
				from = at + int64(len(graw))
			}
			g, off, err := parseGroup(data, at, graw, name, gi, d, cfg)
			if err != nil {
				cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("%s:%d: %s[%d]: %v: this group is skipped, the rest of the file applies", file, lineAt(data, off), name, gi, err))
				continue
			}
			if len(g.Hooks) > 0 {
				cfg.Points[name] = append(cfg.Points[name], g)
			}
		}
	}
	return cfg, nil
}

// parseGroup reads group gi of point name, which starts at offset at of
// data; an error comes with the offset it is about.
func parseGroup(data []byte, at int64, graw json.RawMessage, name string, gi int, d Dialect, cfg *Config) (Group, int64, error) {
	var out Group
	var g rawGroup
	if err := json.Unmarshal(graw, &g); err != nil {
		return out, at, fmt.Errorf("want a {matcher, hooks: [...]} group: %v", shortErr(err))
	}
	if g.Matcher != nil {
		m, err := compileMatcher(*g.Matcher, d)
		if err != nil {
			return out, findString(data, at, *g.Matcher), fmt.Errorf("matcher: %v", err)
		}
		out.Matcher, out.match = *g.Matcher, m
	}
	off := func(v json.RawMessage) int64 {
		if i := bytes.Index(data[at:], v); i >= 0 {
			return at + int64(i)
		}
		return at
	}
	for hi, h := range g.Hooks {
		typ := "command"
		if t, ok := h["type"]; ok {
			if err := json.Unmarshal(t, &typ); err != nil {
				return out, off(t), fmt.Errorf("hooks[%d].type must be a string", hi)
			}
		}
		if typ != "command" {
			cfg.Skipped = append(cfg.Skipped, fmt.Sprintf("%s[%d].hooks[%d]: a %q hook (only command hooks run)", name, gi, hi, typ))
			continue
		}
		var async bool
		if a, ok := h["async"]; ok && json.Unmarshal(a, &async) == nil && async {
			cfg.Skipped = append(cfg.Skipped, fmt.Sprintf("%s[%d].hooks[%d]: an async hook (only synchronous hooks run)", name, gi, hi))
			continue
		}
		var hook Hook
		c, ok := h["command"]
		if !ok || json.Unmarshal(c, &hook.Command) != nil || strings.TrimSpace(hook.Command) == "" {
			o := at
			if ok {
				o = off(c)
			}
			return out, o, fmt.Errorf("hooks[%d].command must be a non-empty string", hi)
		}
		for _, k := range d.TimeoutKeys {
			t, ok := h[k]
			if !ok {
				continue
			}
			var secs float64
			if err := json.Unmarshal(t, &secs); err != nil || secs <= 0 || secs > 86400 {
				return out, off(t), fmt.Errorf("hooks[%d].%s must be a number of seconds in (0, 86400]", hi, k)
			}
			hook.TimeoutMs = int64(secs * 1000)
			break
		}
		out.Hooks = append(out.Hooks, hook)
	}
	return out, at, nil
}

// compileMatcher builds a tool-name matcher. Empty and "*" match every
// tool. A Claude Code literal ("bash", "bash|edit") lists exact names;
// anything else is a regular expression searched in the name (Go's RE2
// syntax), as JavaScript's RegExp.test does in the reference.
func compileMatcher(m string, d Dialect) (func(string) bool, error) {
	if m == "" || m == "*" {
		return nil, nil
	}
	if d.LiteralMatchers && literalMatcher.MatchString(m) {
		set := map[string]bool{}
		for _, n := range strings.Split(m, "|") {
			set[n] = true
		}
		return func(tool string) bool { return set[tool] }, nil
	}
	re, err := regexp.Compile(m)
	if err != nil {
		return nil, fmt.Errorf("invalid regular expression %q: %v", m, err)
	}
	return re.MatchString, nil
}

// jsonError turns a decoding error into one with the file's line.
func jsonError(err error, data []byte, file string) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("%w: %s:%d: invalid JSON: %v", ErrConfig, file, lineAt(data, se.Offset), se)
	case errors.As(err, &te):
		return fmt.Errorf("%w: %s:%d: the file must hold a JSON object, not %s", ErrConfig, file, lineAt(data, te.Offset), te.Value)
	}
	return fmt.Errorf("%w: %s:1: %v", ErrConfig, file, err)
}

func shortErr(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("%s is %s, want %s", te.Field, te.Value, te.Type)
		}
		return fmt.Sprintf("found %s, want %s", te.Value, te.Type)
	}
	return err.Error()
}

// lineAt is the 1-based line of byte offset off in data.
func lineAt(data []byte, off int64) int {
	if off < 0 {
		off = 0
	}
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// offsetOf finds where sub, a slice of data's bytes taken by
// json.RawMessage (a copy), starts in data: the first occurrence.
func offsetOf(data, sub []byte) int64 {
	if len(sub) == 0 {
		return 0
	}
	i := bytes.Index(data, sub)
	if i < 0 {
		return 0
	}
	return int64(i)
}

// findString finds s, JSON-encoded, in data from offset from.
func findString(data []byte, from int64, s string) int64 {
	enc, _ := json.Marshal(s)
	if from < 0 || from > int64(len(data)) {
		from = 0
	}
	if i := bytes.Index(data[from:], enc); i >= 0 {
		return from + int64(i)
	}
	return from
}
