package events

import (
	"fmt"
	"strconv"
)

// Mode is how a dispatch treats its listeners. The package documentation
// has the table of core events and their modes.
type Mode uint8

const (
	// Any is the mode of an event outside the core table: it may be
	// emitted in every mode.
	Any Mode = iota
	// Plain: listeners run in subscription order; the first failure stops
	// the dispatch and reaches the emitter (Emit).
	Plain
	// Contained: every listener runs; failures are logged and joined, and
	// never stop the dispatch (EmitContained).
	Contained
	// Serial: as Plain, and no two dispatches of the event overlap
	// (EmitSerial).
	Serial
	// Waterfall: listeners run in order, each receiving the previous one's
	// output; the first failure stops the dispatch (Waterfall).
	Waterfall
)

func (m Mode) String() string {
	switch m {
	case Any:
		return "any"
	case Plain:
		return "plain"
	case Contained:
		return "contained"
	case Serial:
		return "serial"
	case Waterfall:
		return "waterfall"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// Core event names. The comment gives each one's mode.
const (
	// EventProviderAdded (plain): a subagent provider was registered. A
	// failing listener fails the registration, which is rolled back.
	EventProviderAdded = "subagent/provider-added"
	// EventProviderRemoved (contained): a subagent provider was removed.
	// The removal always completes.
	EventProviderRemoved = "subagent/provider-removed"
	// EventAgentPreStep (serial): before each agent step; compaction
	// listens here.
	EventAgentPreStep = "agent/pre-step"
	// EventAssemble (waterfall): the assembled system prompt, before
	// rendering.
	EventAssemble = "system-prompt/assemble"
	// EventAgentRequest (waterfall): the model request, before it is sent.
	EventAgentRequest = "agent/request"
	// EventToolPreExecute (waterfall): a tool call, before it runs; a
	// listener may deny it. The reference harness's name.
	EventToolPreExecute = "tools/pre-execute"
	// EventToolPostExecute (waterfall): a tool result, before the model
	// sees it. The reference harness's name.
	EventToolPostExecute = "tools/post-execute"
	// EventPromptSubmit (waterfall): a user's prompt, before it joins the
	// conversation; a listener may block it or add context (the hook
	// point UserPromptSubmit).
	EventPromptSubmit = "agent/prompt-submit"
	// EventTurnStopping (waterfall): a turn is about to end completed; a
	// listener may ask for one more step with a reason (the hook point
	// Stop). The reference harness's name.
	EventTurnStopping = "agent/turn-stopping"
	// EventAgentOpen (plain): an agent is opening on its session, before
	// agent/start and before any turn; a listener that fails refuses the
	// open (a plugin reads the session's own files here, such as a hook
	// file in its working directory, and a file it cannot use must not
	// leave the session running without its policy).
	EventAgentOpen = "agent/open"
	// EventAgentStart (contained): an agent started.
	EventAgentStart = "agent/start"
	// EventAgentEnd (contained): an agent ended.
	EventAgentEnd = "agent/end"
	// EventTurnStart (contained): a turn started.
	EventTurnStart = "turn/start"
	// EventTurnEnd (contained): a turn ended.
	EventTurnEnd = "turn/end"
	// EventSubagentStart (contained): a subagent started.
	EventSubagentStart = "subagent/start"
	// EventSubagentEnd (contained): a subagent ended.
	EventSubagentEnd = "subagent/end"
	// EventPluginLoaded (contained): a plugin was loaded.
	EventPluginLoaded = "plugin/loaded"
	// EventPluginUnloaded (contained): a plugin was unloaded.
	EventPluginUnloaded = "plugin/unloaded"
)

var coreModes = map[string]Mode{
	EventProviderAdded:   Plain,
	EventProviderRemoved: Contained,
	EventAgentPreStep:    Serial,
	EventAssemble:        Waterfall,
	EventAgentRequest:    Waterfall,
	EventToolPreExecute:  Waterfall,
	EventToolPostExecute: Waterfall,
	EventPromptSubmit:    Waterfall,
	EventTurnStopping:    Waterfall,
	EventAgentOpen:       Plain,
	EventAgentStart:      Contained,
	EventAgentEnd:        Contained,
	EventTurnStart:       Contained,
	EventTurnEnd:         Contained,
	EventSubagentStart:   Contained,
	EventSubagentEnd:     Contained,
	EventPluginLoaded:    Contained,
	EventPluginUnloaded:  Contained,
}

// renamed maps the names events had before they took the reference
// harness's to their names now. A subscription to an old name is refused:
// nothing emits it, and a policy listening there would never be called.
var renamed = map[string]string{
	"tool/pre-execute":  EventToolPreExecute,
	"tool/post-execute": EventToolPostExecute,
}

// Renamed returns the current name of an event that was renamed, and
// whether event is such an old name.
func Renamed(event string) (string, bool) {
	n, ok := renamed[event]
	return n, ok
}

// checkRenamed refuses a subscription to an old event name, naming the
// new one.
func checkRenamed(event string) error {
	if n, ok := renamed[event]; ok {
		return fmt.Errorf("%w: %q is now %q", ErrRenamedEvent, event, n)
	}
	return nil
}

// ModeOf returns the mode of a core event, and Any for every other event.
func ModeOf(event string) Mode { return coreModes[event] }

// checkMode refuses to dispatch a core event in a mode not its own.
func checkMode(event string, used Mode) error {
	if m := ModeOf(event); m != Any && m != used {
		return fmt.Errorf("%w: %q is a %s event, not %s", ErrWrongMode, event, m, used)
	}
	return nil
}
