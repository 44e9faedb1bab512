package hookbridge

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Output is what one hook run said.
type Output struct {
	// ExitCode is the process's exit status when Exited; a hook that
	// timed out, was killed or cancelled, or could not start has none,
	// and hook/result then records no exitCode (as the reference).
	ExitCode int
	Exited   bool
	TimedOut bool
	Stdout   string
	Stderr   string
	// Decision is the hook's verdict as it spelled it: "block" (exit 2 or
	// JSON decision), "approve", "allow", "deny", "ask"; empty for none.
	Decision string
	Reason   string
	// Context is additional context for the model.
	Context string
	// Stop: the hook said "continue": false.
	Stop bool
}

// Recorded is the decision a hook/result records: the hook's own, "stop"
// for continue:false, else "pass".
func (o *Output) Recorded() string {
	switch {
	case o.Decision != "":
		return o.Decision
	case o.Stop:
		return "stop"
	}
	return "pass"
}

// ParseOutput reads a finished hook: exit 2 blocks with stderr as the
// reason; exit 0 may print JSON with decision/reason/continue and
// hookSpecificOutput (permissionDecision, permissionDecisionReason,
// additionalContext), which counts only when its hookEventName is point.
// plainContext makes the stdout of exit 0 the context, where the
// dialect's agent does that (Codex), when it does not start with "{" and
// the hook gave no structured context: JSON, even malformed, never leaks
// as prose. Any other exit is a non-blocking error: no decision.
func ParseOutput(exit int, stdout, stderr, point string, plainContext bool) Output {
	o := Output{ExitCode: exit, Exited: true, Stdout: strings.TrimSpace(stdout), Stderr: strings.TrimSpace(stderr)}
	switch exit {
	case 2:
		o.Decision = "block"
		o.Reason = o.Stderr
	case 0:
		if strings.HasPrefix(o.Stdout, "{") {
			var v map[string]json.RawMessage
			if json.Unmarshal([]byte(o.Stdout), &v) == nil {
				o.structured(v, point)
			}
			return o
		}
		if plainContext && o.Stdout != "" {
			o.Context = o.Stdout
		}
	}
	return o
}

func (o *Output) structured(v map[string]json.RawMessage, point string) {
	str := func(m map[string]json.RawMessage, k string) (string, bool) {
		var s string
		if raw, ok := m[k]; ok && json.Unmarshal(raw, &s) == nil {
			return s, true
		}
		return "", false
	}
	var cont bool
	if raw, ok := v["continue"]; ok && json.Unmarshal(raw, &cont) == nil && !cont {
		o.Stop = true
	}
	if d, ok := str(v, "decision"); ok && (d == "approve" || d == "block") {
		o.Decision = d
	}
	if r, ok := str(v, "reason"); ok {
		o.Reason = r
	}
	var hso map[string]json.RawMessage
	if raw, ok := v["hookSpecificOutput"]; !ok || json.Unmarshal(raw, &hso) != nil || hso == nil {
		return
	}
	if name, _ := str(hso, "hookEventName"); name != point {
		return // written for another event: ignored, as the agents do
	}
	if d, ok := str(hso, "permissionDecision"); ok && (d == "allow" || d == "deny" || d == "ask") {
		o.Decision = d
	}
	if r, ok := str(hso, "permissionDecisionReason"); ok {
		o.Reason = r
	}
	if c, ok := str(hso, "additionalContext"); ok {
		o.Context = c
	}
}

// Merged is the outcome of every hook run at a point.
type Merged struct {
	// Decision: "deny" (a block or deny), "ask", "allow" or "" (none).
	Decision string
	// Reason joins the reasons of the hooks that made the decision, with
	// a blank line between two (the reference's "\n\n"); empty when none
	// of them gave one.
	Reason  string
	Context []string
}

func rank(d string) int {
	switch d {
	case "deny", "block":
		return 3
	case "ask":
		return 2
	case "approve", "allow":
		return 1
	}
	return 0
}

// ReasonSeparator joins the reasons of several hooks that made one
// decision: a blank line, as in the reference.
const ReasonSeparator = "\n\n"

// Merge folds the outputs of a point's hooks: the most restrictive
// decision wins, with the reasons given for it.
func Merge(outs []Output) Merged {
	var m Merged
	top := 0
	reasons := map[int][]string{}
	for _, o := range outs {
		r := rank(o.Decision)
		if r > top {
			top = r
		}
		if r >= 2 && o.Reason != "" {
			reasons[r] = append(reasons[r], o.Reason)
		}
		if o.Context != "" {
			m.Context = append(m.Context, o.Context)
		}
	}
	m.Decision = [...]string{"", "allow", "ask", "deny"}[top]
	m.Reason = strings.Join(reasons[top], ReasonSeparator)
	return m
}

// Summary cuts s to max characters, adding an ellipsis when it cut.
func Summary(s string, max int) string {
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max]) + "…"
}
