//go:build wasip1

// Command tool-bash is dsh-wasm's built-in shell plugin, loaded as
// builtin:tool-bash. It registers bash, bash_output and bash_kill with the
// reference harness's names and parameters, and the guidance section
// tool:bash (105).
//
// Commands run through the host's exec grant (exec_run, exec_start), in
// the agent's working directory or a workdir inside a granted root. The
// result text is stdout; then "[stderr]" and stderr when there is any;
// "(no output)" when there is neither. A stream longer than the exec
// grant's output cap keeps its head and tail, and a marker names the file
// in the workspace's scratch directory where the host saved all of it.
// Markers close the result, each on its own line: "[timed out after Nms]",
// then "[killed by signal: SIG]" or "[exit code: N]". A failing command is
// a result, not a tool error.
//
// Background commands (run_in_background) answer "started background task
// bash-N"; bash_output gives what they wrote since the last look and a
// status line, bash_kill stops them. The host kills them when the agent's
// session ends.
//
// Config (all optional): default_timeout_ms (120000), max_timeout_ms
// (600000), scratch_dir (".dsh-wasm/scratch", relative to the working
// directory or absolute inside a granted root).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/guests/internal/toolpath"
	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/hostfns/guest"
)

func main() {}

func init() { guest.Main(setup) }

type config struct {
	DefaultTimeoutMs int64  `json:"default_timeout_ms"`
	MaxTimeoutMs     int64  `json:"max_timeout_ms"`
	ScratchDir       string `json:"scratch_dir"`
}

var cfg = config{DefaultTimeoutMs: 120_000, MaxTimeoutMs: 600_000, ScratchDir: ".dsh-wasm/scratch"}

func parseConfig(raw []byte) error {
	if len(bytes.TrimSpace(raw)) > 0 {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&cfg); err != nil {
			return fmt.Errorf("tool-bash config: %w", err)
		}
	}
	if cfg.DefaultTimeoutMs < 1 || cfg.MaxTimeoutMs < cfg.DefaultTimeoutMs {
		return fmt.Errorf("tool-bash config: want 0 < default_timeout_ms (%d) <= max_timeout_ms (%d)", cfg.DefaultTimeoutMs, cfg.MaxTimeoutMs)
	}
	if strings.TrimSpace(cfg.ScratchDir) == "" {
		return errors.New("tool-bash config: scratch_dir is empty")
	}
	return nil
}

const section = "Every bash result ends with an [exit code: N] marker when the command failed (and [timed out after Nms] or [killed by signal: SIG] when it was stopped). Check for it on every result, quote it literally when you report the outcome, and investigate a failure before moving on."

func setup(p *guest.Plugin) error {
	if err := parseConfig(p.Config); err != nil {
		return err
	}
	if err := p.Need(hostfns.Capabilities{Exec: true, FS: []hostfns.FSNeed{{Path: "workspace", Mode: "ro"}}}); err != nil {
		return err
	}
	if err := p.Section("tool:bash", 105, section); err != nil {
		return err
	}
	if err := p.ToolArgs(guest.Tool{
		Name: "bash",
		Description: fmt.Sprintf("Run a bash command in the working directory and return its output: stdout, then stderr after a [stderr] line. "+
			"A non-zero exit adds an [exit code: N] line; a command stopped by its timeout or a signal says so. "+
			"Long output keeps its start and end and names the file holding all of it. "+
			"The timeout defaults to %d ms and may be raised to %d ms. "+
			"With run_in_background the command keeps running and the result is a task id for bash_output and bash_kill.", cfg.DefaultTimeoutMs, cfg.MaxTimeoutMs),
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"command":{"type":"string","description":"The command to run with bash -c."},` +
			`"description":{"type":"string","description":"A few words on what the command does, in active voice (\"List files in src\")."},` +
			`"timeoutMs":{"type":"number","description":"Timeout in milliseconds; the command is killed when it runs longer."},` +
			`"workdir":{"type":"string","description":"Directory to run in, relative to the working directory or absolute inside it. Defaults to the working directory."},` +
			`"run_in_background":{"type":"boolean","description":"Start the command and return at once with a task id; read its output with bash_output, stop it with bash_kill."}},` +
			`"required":["command"],"additionalProperties":false}`),
	}, bashTool); err != nil {
		return err
	}
	if err := p.ToolArgs(guest.Tool{
		Name:        "bash_output",
		Description: "Read what a background bash task wrote since the last bash_output for it, and whether it is still running or how it ended.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"task_id":{"type":"string","description":"The id bash returned, such as bash-1."}},"required":["task_id"],"additionalProperties":false}`),
	}, outputTool); err != nil {
		return err
	}
	return p.ToolArgs(guest.Tool{
		Name:        "bash_kill",
		Description: "Stop a background bash task and everything it started, and return its last output.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"task_id":{"type":"string","description":"The id bash returned, such as bash-1."}},"required":["task_id"],"additionalProperties":false}`),
	}, killTool)
}

func bashTool(ctx guest.Context, args *guest.Args, out *guest.Result) error {
	command, err := args.String("command")
	if err != nil {
		return err
	}
	if strings.TrimSpace(command) == "" {
		return errors.New("argument \"command\": empty")
	}
	timeout := cfg.DefaultTimeoutMs
	if args.Has("timeoutMs") {
		f, err := args.Float("timeoutMs")
		if err != nil {
			return err
		}
		if f < 1 || f != math.Trunc(f) || f > float64(cfg.MaxTimeoutMs) {
			return fmt.Errorf("argument \"timeoutMs\": must be a whole number of milliseconds from 1 to %d, not %v", cfg.MaxTimeoutMs, f)
		}
		timeout = int64(f)
	}
	background := false
	if args.Has("run_in_background") {
		if background, err = args.Bool("run_in_background"); err != nil {
			return err
		}
	}
	facts, err := ctx.Facts()
	if err != nil {
		return fmt.Errorf("bad call context: %w", err)
	}
	roots := toolpath.Roots()
	req := hostfns.ExecRequest{Command: command, TimeoutMs: timeout}
	if args.Has("workdir") {
		wd, err := args.String("workdir")
		if err != nil {
			return err
		}
		if req.Cwd, err = toolpath.Resolve(wd, facts.Cwd, roots); err != nil {
			return fmt.Errorf("workdir: %w", err)
		}
	} else if facts.Cwd != "" {
		req.Cwd = facts.Cwd
	}
	if dir, err := toolpath.Resolve(cfg.ScratchDir, facts.Cwd, roots); err == nil {
		req.SpillDir = dir
	}
	if background {
		return startTask(req, out)
	}
	res, err := guest.Exec(req)
	if spillRefused(err) {
		// No writable root for the scratch directory (a read-only
		// workspace): run without saving long output.
		req.SpillDir = ""
		res, err = guest.Exec(req)
	}
	if err != nil {
		return err
	}
	out.WriteString(render(res, timeout, facts.Cwd))
	return nil
}

// spillRefused reports that the host refused the scratch directory, not
// the command.
func spillRefused(err error) bool {
	var he *guest.HostError
	return errors.As(err, &he) && strings.Contains(he.Message, "spill_dir")
}

// render is the result text of a finished command.
func render(r hostfns.ExecResult, timeoutMs int64, cwd string) string {
	body := streamText(r.Stdout, cwd)
	if errText := streamText(r.Stderr, cwd); errText != "" {
		if body != "" && !strings.HasSuffix(body, "\n") {
			body += "\n"
		}
		body += "[stderr]\n" + errText
	}
	if body == "" {
		body = "(no output)"
	}
	markers := endMarkers(r, timeoutMs)
	if len(markers) == 0 {
		return body
	}
	if !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	return body + strings.Join(markers, "\n")
}

func endMarkers(r hostfns.ExecResult, timeoutMs int64) []string {
	var m []string
	if r.TimedOut {
		m = append(m, "[timed out after "+strconv.FormatInt(timeoutMs, 10)+"ms]")
	} else if r.Canceled {
		m = append(m, "[canceled]")
	}
	if r.Signal != "" {
		m = append(m, "[killed by signal: "+r.Signal+"]")
	} else if r.ExitCode != 0 {
		m = append(m, "[exit code: "+strconv.Itoa(r.ExitCode)+"]")
	}
	return m
}

// streamText is one stream's text, with a marker where the host dropped
// the middle of a long stream.
func streamText(o hostfns.ExecOutput, cwd string) string {
	if !o.Truncated {
		return o.Data
	}
	at := min(max(o.OmittedAt, 0), len(o.Data))
	where := "(not saved)"
	if o.SpillPath != "" {
		where = shownPath(o.SpillPath, cwd)
		if o.SpillTruncated {
			where += fmt.Sprintf(" (its first %d bytes)", hostfns.MaxSpillBytes)
		}
	}
	head, tail := o.Data[:at], o.Data[at:]
	if head != "" && !strings.HasSuffix(head, "\n") {
		head += "\n"
	}
	return fmt.Sprintf("%s[output truncated: %d bytes omitted; full output: %s]\n%s", head, o.Omitted, where, tail)
}

// shownPath names p relative to cwd when it lies below it.
func shownPath(p, cwd string) string {
	if cwd != "" && strings.HasPrefix(p, cwd+"/") {
		return strings.TrimPrefix(p, cwd+"/")
	}
	return path.Clean(p)
}
