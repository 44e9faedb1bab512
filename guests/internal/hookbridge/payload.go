package hookbridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/hostfns/jsonobj"
)

// ErrArguments: the loop gave a hook point arguments that are not JSON.
// The loop reads a call's arguments once, into their canonical form
// (agent.CanonicalArguments), before any hook, so this means a loop that
// did not; the hook point then fails, and the call with it.
var ErrArguments = errors.New("the tool call's arguments are not JSON")

// ToolInput is a call's arguments as a Claude Code hook reads them in
// tool_input: the loop's canonical bytes, exactly, never decoded and
// encoded again (Stdin keeps them as they are).
func ToolInput(args string) (json.RawMessage, error) {
	if !json.Valid([]byte(args)) {
		return nil, fmt.Errorf("%w: %.60q", ErrArguments, args)
	}
	return json.RawMessage(args), nil
}

// CommandInput is Codex's tool_input, {"command": C}: C is the call's
// "command" member as its bytes stand in the canonical arguments, the
// member a tool reading them (jsonobj, keys matched exactly) takes, or ""
// when there is none or it is not a string, as in the reference.
func CommandInput(args string) (json.RawMessage, error) {
	if !json.Valid([]byte(args)) {
		return nil, fmt.Errorf("%w: %.60q", ErrArguments, args)
	}
	cmd := []byte(`""`)
	var o jsonobj.Obj
	if o.Parse([]byte(args)) == nil {
		if v, ok := o.Lookup("command"); ok && v.Kind() == jsonobj.String {
			cmd = v.Raw()
		}
	}
	b := append([]byte(`{"command":`), cmd...)
	return append(b, '}'), nil
}

// Stdin encodes a hook's input: JSON with no escaping beyond JSON's own
// (no \u003c for <, as JSON.stringify writes it), the raw values (tool
// input) as they are, and a trailing newline if newline.
func Stdin(m map[string]any, newline bool) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	b := buf.Bytes() // Encode ends it with a newline
	if !newline {
		b = b[:len(b)-1]
	}
	return b, nil
}

// ProjectDirVar is the variable Claude Code sets for a hook: the project's
// directory.
const ProjectDirVar = "CLAUDE_PROJECT_DIR"

// Command is the shell text the bridge runs for a hook's command. For
// Claude Code (d.ProjectEnv) it is the command with ${CLAUDE_PLUGIN_ROOT}
// and ${CLAUDE_PROJECT_DIR} replaced by the config's plugin_root and
// project_dir, each when set (a token whose value is unset stays as
// written), behind a line that exports CLAUDE_PROJECT_DIR, project_dir or
// else the session's working directory cwd, quoted for the shell: the
// exec grant takes no environment from a plugin, and the command runs
// in bash -c, so the variable is set where the command reads it. Codex's
// command runs as written.
func Command(command string, d Dialect, s *Settings, cwd string) string {
	if !d.ProjectEnv {
		return command
	}
	if s.PluginRoot != "" {
		command = strings.ReplaceAll(command, "${CLAUDE_PLUGIN_ROOT}", s.PluginRoot)
	}
	if s.ProjectDir != "" {
		command = strings.ReplaceAll(command, "${"+ProjectDirVar+"}", s.ProjectDir)
	}
	dir := s.ProjectDir
	if dir == "" {
		dir = cwd
	}
	if dir == "" {
		return command
	}
	return "export " + ProjectDirVar + "=" + shellQuote(dir) + "\n" + command
}

// shellQuote quotes s as one word for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
