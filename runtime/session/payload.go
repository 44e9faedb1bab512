package session

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/runtime/model"
)

// Event types this package knows. Others are kept as they are.
const (
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
)

// Turn end kinds (TurnEnd.Reason.Kind).
const (
	EndCompleted   = "completed"
	EndAborted     = "aborted"
	EndError       = "error"
	EndInterrupted = "interrupted" // written only by crash recovery
	EndMaxTokens   = "max-tokens"
	EndRejected    = "rejected"
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

// EndReason says why a turn ended.
type EndReason struct {
	Kind string `json:"kind"` // one of the End* constants
	// Reason is a short machine-readable cause, e.g. "session/cancel".
	Reason string `json:"reason,omitempty"`
	// Message is a human-readable explanation, e.g. of an error.
	Message string `json:"message,omitempty"`
}

// CompactStart opens a compaction. Session.Compact writes the whole
// sequence: compact/start, compact/summary, a user message that replaces
// the summarised part of the surface, compact/end.
type CompactStart struct {
	ID   string `json:"compactionId"`
	Turn int    `json:"turn"`
}

// CompactSummary records the summary and the surface events it replaces.
type CompactSummary struct {
	ID           string  `json:"compactionId"`
	Summary      Parts   `json:"summary"`
	ShadowedSeqs []int64 `json:"shadowedSeqs"`
}

// CompactEnd closes a compaction.
type CompactEnd struct {
	ID   string `json:"compactionId"`
	Turn int    `json:"turn"`
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

// isSurfaceType reports whether events of type t become model messages.
func isSurfaceType(t string) bool {
	return t == TypeUserMessage || t == TypeAssistantMessage || t == TypeToolResult
}

// isKnownType reports whether t is one of the Type constants.
func isKnownType(t string) bool {
	switch t {
	case TypeTurnStart, TypeUserMessage, TypeStepStart, TypeAssistantChunk,
		TypeAssistantMessage, TypeToolCall, TypeToolResult, TypeStepEnd,
		TypeTurnEnd, TypeCompactStart, TypeCompactSummary, TypeCompactEnd:
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
