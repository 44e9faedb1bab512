package session

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/runtime/model"
)

// Event types this package knows. Others are kept as they are.
const (
	// TypePluginState records a plugin's host-side state change
	// (state_set): data {plugin, key, value}, a null value for a
	// deletion. It is a record, not part of the conversation; the agent
	// writes it and replays it into a resumed session's plugin state.
	TypePluginState = "plugin/state"

	TypeTurnStart        = "turn/start"
	TypeUserMessage      = "user/message"
	TypeStepStart        = "step/start"
	TypeAssistantChunk   = "assistant/chunk"
	TypeAssistantMessage = "assistant/message"
	TypeToolCall         = "tool/call"
	TypeToolResult       = "tool/result"
	TypeStepEnd          = "step/end"
	TypeTurnEnd          = "turn/end"
	TypeCompactStart     = "compact/start"
	TypeCompactSummary   = "compact/summary"
	TypeCompactEnd       = "compact/end"
	TypeContextMessage   = "context/message"
	TypeSteeringMessage  = "steering/message"
	TypePromptBlocked    = "prompt/blocked"
	TypeHookInvoked      = "hook/invoked"
	TypeHookResult       = "hook/result"
)

// Turn end kinds (TurnEnd.Reason.Kind): the reference harness's.
const (
	EndCompleted   = "completed"
	EndAborted     = "aborted"     // cancelled; Reason says by what, e.g. "session/cancel"
	EndError       = "error"       // failed; Step, Message and, when known, Code
	EndDisposed    = "disposed"    // the agent was closed while the turn ran
	EndInterrupted = "interrupted" // written only by crash recovery
	EndMaxTokens   = "max-tokens"  // an answer hit the output-token ceiling, or the step cap was reached
	EndRejected    = "rejected"    // every prompt of the turn was blocked; Reason says why
)

// Source and trigger kinds.
const (
	SourceUser     = "user"
	SourcePlugin   = "plugin"
	TriggerMessage = "message"
)

// Payload is the typed data of an event type this package knows.
type Payload interface {
	// EventType is the Event.Type of events carrying this payload.
	EventType() string
}

// Source says who wrote a user message.
type Source struct {
	Kind string `json:"kind"` // SourceUser or SourcePlugin
	// Plugin names the plugin of a SourcePlugin message.
	Plugin string `json:"plugin,omitempty"`
}

// Trigger says what started a turn.
type Trigger struct {
	Kind   string  `json:"kind"` // TriggerMessage
	Source *Source `json:"source,omitempty"`
}

// Parts is the content of a message. It encodes every field its part type
// requires (a text part with empty text keeps "text":""), as the
// reference harness expects.
type Parts []model.Part

// TextContent is content of one text part.
func TextContent(text string) Parts {
	return Parts{{Type: model.BlockText, Text: text}}
}

// Text joins the text of the text parts with newlines.
func (p Parts) Text() string {
	var texts []string
	for _, part := range p {
		if part.Type == model.BlockText {
			texts = append(texts, part.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// MarshalJSON writes the parts; nil is an empty array.
func (p Parts) MarshalJSON() ([]byte, error) {
	b := []byte{'['}
	for i, part := range p {
		if i > 0 {
			b = append(b, ',')
		}
		var o object
		add := func(key, val string) {
			v, _ := marshal(val) // a string always encodes
			o.addRaw(key, v)
		}
		switch part.Type {
		case model.BlockText, model.BlockReasoning:
			add("type", part.Type)
			add("text", part.Text)
		case model.BlockToolCall:
			add("type", part.Type)
			add("id", part.ID)
			add("name", part.Name)
			add("arguments", part.Arguments)
		default:
			v, err := marshal(part)
			if err != nil {
				return nil, err
			}
			b = append(b, v...)
			continue
		}
		b = append(b, o.bytes()...)
	}
	return append(b, ']'), nil
}

// TurnStart opens a turn: one user prompt and the steps that answer it.
type TurnStart struct {
	Turn    int      `json:"turn"`
	Trigger *Trigger `json:"trigger,omitempty"`
}

// UserMessage is a message of the user, or one a plugin injects.
type UserMessage struct {
	Content Parts  `json:"content"`
	Source  Source `json:"source"`
}

// StepStart opens a step: one model call and the tool calls it asks for.
type StepStart struct {
	Turn int `json:"turn"`
	Step int `json:"step"`
}

// AssistantChunk is one chunk of the model's streamed answer.
type AssistantChunk struct {
	Turn  int         `json:"turn"`
	Step  int         `json:"step"`
	Chunk model.Chunk `json:"chunk"`
}

// AssistantMessage is the model's whole answer for a step, assembled from
// its chunks.
type AssistantMessage struct {
	Turn    int          `json:"turn"`
	Step    int          `json:"step"`
	Content Parts        `json:"content"`
	Usage   *model.Usage `json:"usage,omitempty"`
}

// ToolCall is a tool call the model asked for. Arguments is the JSON text
// the model wrote.
type ToolCall struct {
	Turn      int    `json:"turn"`
	Step      int    `json:"step"`
	CallID    string `json:"callId"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolResult is what a tool call returned.
type ToolResult struct {
	Turn    int    `json:"turn"`
	Step    int    `json:"step"`
	CallID  string `json:"callId"`
	Content Parts  `json:"content"`
	IsError bool   `json:"isError"`
	// Error identifies a failure for programs; the model sees Content.
	Error *ToolError `json:"error,omitempty"`
	// Meta is the tool's own data for displays (diffs, cards); the model
	// does not see it.
	Meta json.RawMessage `json:"meta,omitempty"`
}

// ToolError identifies a tool failure.
type ToolError struct {
	Name string `json:"name"`
	Code string `json:"code"`
}

// StepEnd closes a step.
type StepEnd struct {
	Turn int `json:"turn"`
	Step int `json:"step"`
}

// TurnEnd closes a turn.
type TurnEnd struct {
	Turn   int       `json:"turn"`
	Reason EndReason `json:"reason"`
}

// EndReason says why a turn ended. It is written in the reference
// harness's shapes: {kind:"error", step, message, code?}, {kind:"aborted",
// reason?}, {kind:"rejected", reason}, and {kind} alone for the other
// kinds. Fields a kind does not carry are not written.
type EndReason struct {
	Kind string `json:"kind"` // one of the End* constants
	// Reason is the cause of an aborted or rejected turn, e.g.
	// "session/cancel".
	Reason string `json:"reason,omitempty"`
	// Step is the step an error happened in.
	Step int `json:"step"`
	// Message explains an error.
	Message string `json:"message,omitempty"`
	// Code classifies an error when it has a class (see the Code*
	// constants of the agent package): AUTH, RATE_LIMIT, ...
	Code string `json:"code,omitempty"`
}

// MarshalJSON writes the fields of r's kind, in the reference's key order.
// A kind this package does not know keeps every field that is set.
func (r EndReason) MarshalJSON() ([]byte, error) {
	var o object
	add := func(key string, v any) error {
		b, err := marshal(v)
		if err != nil {
			return err
		}
		o.addRaw(key, b)
		return nil
	}
	if err := add("kind", r.Kind); err != nil {
		return nil, err
	}
	var err error
	switch r.Kind {
	case EndError:
		o.addRaw("step", strconv.AppendInt(nil, int64(r.Step), 10))
		err = add("message", r.Message)
		if err == nil && r.Code != "" {
			err = add("code", r.Code)
		}
	case EndAborted:
		if r.Reason != "" {
			err = add("reason", r.Reason)
		}
	case EndRejected:
		err = add("reason", r.Reason)
	case EndCompleted, EndDisposed, EndInterrupted, EndMaxTokens:
	default:
		for _, f := range []struct{ k, v string }{{"reason", r.Reason}, {"message", r.Message}, {"code", r.Code}} {
			if err == nil && f.v != "" {
				err = add(f.k, f.v)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	return o.bytes(), nil
}

// ContextMessage is context injected into the conversation (a hook's
// additional context, a file-change notice). The model sees it as a user
// message wrapped in <context source="KIND"> tags.
type ContextMessage struct {
	Content Parts  `json:"content"`
	Source  Source `json:"source"`
}

// SteeringMessage is input that joins a running turn between steps (a
// Stop hook's continuation). The model sees it as a user message wrapped
// in <steering source="KIND"> tags.
type SteeringMessage struct {
	Turn    int    `json:"turn"`
	Content Parts  `json:"content"`
	Source  Source `json:"source"`
}

// PromptBlocked records a queued prompt a policy refused, in place of the
// user message it would have become. The model does not see it.
type PromptBlocked struct {
	Content Parts  `json:"content"`
	Source  Source `json:"source"`
	Reason  string `json:"reason"`
}

// HookInvoked records that a hook handler was called at a hook point
// (PreToolUse, PostToolUse, UserPromptSubmit, Stop, ...).
type HookInvoked struct {
	Turn      int    `json:"turn"`
	Point     string `json:"point"`
	Dialect   string `json:"dialect"`
	HandlerID string `json:"handlerId"`
	// Matcher is the tool-name matcher that selected the handler, if any.
	Matcher string `json:"matcher,omitempty"`
}

// HookResult records what a hook handler decided.
type HookResult struct {
	Turn      int    `json:"turn"`
	Point     string `json:"point"`
	HandlerID string `json:"handlerId"`
	// Decision is the handler's verdict: pass, block, ask, ...
	Decision string `json:"decision"`
	// ExitCode is the handler's exit status; nil when it has none (it
	// timed out, was killed, or could not start), as the reference
	// records it: omitted.
	ExitCode *int `json:"exitCode,omitempty"`
	// StderrSummary is the start of the handler's stderr, when it wrote
	// any; for a block it is the reason.
	StderrSummary string  `json:"stderrSummary,omitempty"`
	DurationMs    float64 `json:"durationMs"`
}

// CompactStart opens a compaction. Session.Compact writes the whole
// sequence: compact/start, compact/summary, a user message that replaces
// the summarised part of the surface, compact/end.
type CompactStart struct {
	ID   string `json:"compactionId"`
	Turn int    `json:"turn"`
}

// CompactSummary records the summary and the surface events it replaces,
// with the reference harness's provenance fields: the surface range it
// shadows, the seqs in it, and their estimated tokens.
type CompactSummary struct {
	ID                 string       `json:"compactionId"`
	Summary            Parts        `json:"summary"`
	ShadowedRange      SurfaceRange `json:"shadowedRange"`
	ShadowedSeqs       []int64      `json:"shadowedSeqs"`
	ShadowedTokenCount int          `json:"shadowedTokenCount"`
}

// CompactEnd closes a compaction. Error is set when it failed; the
// surface is then unchanged.
type CompactEnd struct {
	ID    string `json:"compactionId"`
	Turn  int    `json:"turn"`
	Error string `json:"error,omitempty"`
}

func (TurnStart) EventType() string        { return TypeTurnStart }
func (UserMessage) EventType() string      { return TypeUserMessage }
func (StepStart) EventType() string        { return TypeStepStart }
func (AssistantChunk) EventType() string   { return TypeAssistantChunk }
func (AssistantMessage) EventType() string { return TypeAssistantMessage }
func (ToolCall) EventType() string         { return TypeToolCall }
func (ToolResult) EventType() string       { return TypeToolResult }
func (StepEnd) EventType() string          { return TypeStepEnd }
func (TurnEnd) EventType() string          { return TypeTurnEnd }
func (CompactStart) EventType() string     { return TypeCompactStart }
func (CompactSummary) EventType() string   { return TypeCompactSummary }
func (CompactEnd) EventType() string       { return TypeCompactEnd }
func (ContextMessage) EventType() string   { return TypeContextMessage }
func (SteeringMessage) EventType() string  { return TypeSteeringMessage }
func (PromptBlocked) EventType() string    { return TypePromptBlocked }
func (HookInvoked) EventType() string      { return TypeHookInvoked }
func (HookResult) EventType() string       { return TypeHookResult }

// isSurfaceType reports whether events of type t become model messages.
func isSurfaceType(t string) bool {
	switch t {
	case TypeUserMessage, TypeAssistantMessage, TypeToolResult, TypeContextMessage, TypeSteeringMessage:
		return true
	}
	return false
}

// isKnownType reports whether t is one of the Type constants.
func isKnownType(t string) bool {
	switch t {
	case TypeTurnStart, TypeUserMessage, TypeStepStart, TypeAssistantChunk,
		TypeAssistantMessage, TypeToolCall, TypeToolResult, TypeStepEnd,
		TypeTurnEnd, TypeCompactStart, TypeCompactSummary, TypeCompactEnd,
		TypeContextMessage, TypeSteeringMessage, TypePromptBlocked, TypeHookInvoked, TypeHookResult:
		return true
	}
	return false
}

// NewEvent builds an event carrying p. Messages (user/message,
// assistant/message, tool/result) get SurfaceOp append, the normal way
// into the conversation. Seq and Time are set by Session.Append.
//
// If p cannot be encoded (invalid Meta JSON, an unknown chunk type),
// Append reports the error.
func NewEvent(p Payload) Event {
	data, err := marshal(p)
	e := Event{Type: p.EventType(), Data: data}
	if err != nil {
		e.Data = nil
		e.err = fmt.Errorf("encode %s: %w", p.EventType(), err)
	}
	if isSurfaceType(e.Type) {
		e.SurfaceOp = &SurfaceOp{Op: SurfaceAppend}
	}
	return e
}

// WithSources returns e citing the events with seqs as its sources: the
// chunks of an assistant message, the tool/call of a tool result.
func (e Event) WithSources(seqs ...int64) Event {
	e.SourceEventSeqs = append([]int64(nil), seqs...)
	return e
}

// As decodes the data of e as T. It fails with ErrWrongType when e is not
// of T's type.
func As[T Payload](e Event) (T, error) {
	var v T
	if e.Type != v.EventType() {
		return v, fmt.Errorf("%w: event %d is %q, not %q", ErrWrongType, e.Seq, e.Type, v.EventType())
	}
	if err := json.Unmarshal(e.Data, &v); err != nil {
		return v, fmt.Errorf("decode %s event %d: %w", e.Type, e.Seq, err)
	}
	return v, nil
}
