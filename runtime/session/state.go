package session

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/dsh-wasm/dsh-wasm/runtime/model"
)

// state is a session's log in memory with what is derived from it: the
// surface and the open turn. Loading and appending both go through add,
// so a file is held to the same rules as live appends.
type state struct {
	header Header
	events []Event
	surf   surface
	turn   turnTracker
}

// add validates e and appends it. On error nothing changes.
func (st *state) add(e Event) error {
	if e.Type == "" {
		return errors.New("event has no type")
	}
	if e.Type == typeSession {
		return errors.New(`event type "session" is reserved for the header`)
	}
	if want := int64(len(st.events)); e.Seq != want {
		return fmt.Errorf("seq %d, want %d", e.Seq, want)
	}
	for _, s := range e.SourceEventSeqs {
		if s < 0 || s >= e.Seq {
			return fmt.Errorf("sourceEventSeqs cites %d, which is not an earlier event", s)
		}
	}
	if e.SurfaceOp != nil && isKnownType(e.Type) && !isSurfaceType(e.Type) {
		return fmt.Errorf("%s event has a surfaceOp; only messages enter the surface", e.Type)
	}
	decoded, err := decodeKnown(e)
	if err != nil {
		return err
	}
	var msg *model.Message
	if e.SurfaceOp != nil {
		msg = project(decoded)
		if err := st.surf.check(e.SurfaceOp); err != nil {
			return err
		}
	}
	st.events = append(st.events, e)
	if e.SurfaceOp != nil {
		st.surf.apply(e.Seq, e.SurfaceOp, msg)
	}
	st.turn.observe(e, decoded)
	return nil
}

// decodeKnown decodes the data of the event types the session interprets
// (messages, tool calls and turn and step boundaries) and checks the
// fields it relies on. Other types, chunks and compaction included, are
// not looked into: a file may carry shapes this package does not know.
func decodeKnown(e Event) (Payload, error) {
	var p Payload
	var err error
	switch e.Type {
	case TypeTurnStart:
		p, err = As[TurnStart](e)
	case TypeTurnEnd:
		var v TurnEnd
		if v, err = As[TurnEnd](e); err == nil && v.Reason.Kind == "" {
			err = errors.New("turn/end has no reason kind")
		}
		p = v
	case TypeStepStart:
		p, err = As[StepStart](e)
	case TypeStepEnd:
		p, err = As[StepEnd](e)
	case TypeUserMessage:
		p, err = As[UserMessage](e)
	case TypeAssistantMessage:
		p, err = As[AssistantMessage](e)
	case TypeToolCall:
		var v ToolCall
		if v, err = As[ToolCall](e); err == nil && v.CallID == "" {
			err = errors.New("tool/call has no callId")
		}
		p = v
	case TypeToolResult:
		var v ToolResult
		if v, err = As[ToolResult](e); err == nil && v.CallID == "" {
			err = errors.New("tool/result has no callId")
		}
		p = v
	case TypeContextMessage:
		p, err = As[ContextMessage](e)
	case TypeSteeringMessage:
		p, err = As[SteeringMessage](e)
	case TypePromptBlocked:
		p, err = As[PromptBlocked](e)
	case TypeHookInvoked:
		p, err = As[HookInvoked](e)
	case TypeHookResult:
		p, err = As[HookResult](e)
	default:
		return nil, nil
	}
	if err == nil && !bytes.HasPrefix(bytes.TrimLeft(e.Data, " \t\r\n"), []byte{'{'}) {
		err = fmt.Errorf("%s data is not a JSON object", e.Type)
	}
	return p, err
}

// surface is the model-visible conversation: the events that entered it
// through a SurfaceOp and were not replaced since, in order, each with
// the message it projects to.
type surface struct {
	nodes []surfaceNode
}

type surfaceNode struct {
	seq int64
	msg *model.Message // nil when the event projects to no message
}

func (s *surface) index(seq int64) int {
	return slices.IndexFunc(s.nodes, func(n surfaceNode) bool { return n.seq == seq })
}

// check reports whether op can be applied.
func (s *surface) check(op *SurfaceOp) error {
	switch op.Op {
	case SurfaceAppend:
		return nil
	case SurfaceReplace:
		if op.Range == nil {
			return nil
		}
		i, j := s.index(op.Range.Start), s.index(op.Range.End)
		switch {
		case i < 0:
			return fmt.Errorf("replace start %d is not on the surface", op.Range.Start)
		case j < 0:
			return fmt.Errorf("replace end %d is not on the surface", op.Range.End)
		case j < i:
			return fmt.Errorf("replace end %d comes before start %d on the surface", op.Range.End, op.Range.Start)
		}
		return nil
	}
	return fmt.Errorf("unknown surface op %q", op.Op)
}

// apply applies an op that check accepted.
func (s *surface) apply(seq int64, op *SurfaceOp, msg *model.Message) {
	n := surfaceNode{seq: seq, msg: msg}
	switch {
	case op.Op == SurfaceAppend:
		s.nodes = append(s.nodes, n)
	case op.Range == nil:
		s.nodes = []surfaceNode{n}
	default:
		i, j := s.index(op.Range.Start), s.index(op.Range.End)
		s.nodes = slices.Replace(s.nodes, i, j+1, n)
	}
}

// messages returns the conversation the model sees, sharing nothing with
// the surface.
func (s *surface) messages() []model.Message {
	msgs := make([]model.Message, 0, len(s.nodes))
	for _, n := range s.nodes {
		if n.msg != nil {
			m := *n.msg
			m.Content = slices.Clone(m.Content)
			msgs = append(msgs, m)
		}
	}
	return msgs
}

// project turns a decoded message payload into the model message, or nil
// when it makes none: unknown types, and an assistant message without
// content (a step cut off before any output).
func project(p Payload) *model.Message {
	switch v := p.(type) {
	case UserMessage:
		return &model.Message{Role: model.RoleUser, Content: slices.Clone(v.Content)}
	case AssistantMessage:
		if len(v.Content) == 0 {
			return nil
		}
		return &model.Message{Role: model.RoleAssistant, Content: slices.Clone(v.Content)}
	case ToolResult:
		return &model.Message{
			Role:       model.RoleTool,
			Content:    textParts(v.Content),
			ToolCallID: v.CallID,
			IsError:    v.IsError,
		}
	case ContextMessage:
		return &model.Message{Role: model.RoleUser, Content: tagged("context", v.Content, v.Source)}
	case SteeringMessage:
		return &model.Message{Role: model.RoleUser, Content: tagged("steering", v.Content, v.Source)}
	}
	return nil
}

// textParts returns the text parts of content.
func textParts(content Parts) []model.Part {
	out := make([]model.Part, 0, len(content))
	for _, p := range content {
		if p.Type == model.BlockText {
			out = append(out, p)
		}
	}
	return out
}

// tagged wraps content the harness injected in <tag source="KIND"> and
// </tag> text parts, as the reference harness renders context and
// steering for the model (session/src/index.ts, renderTagged).
func tagged(tag string, content Parts, src Source) []model.Part {
	kind, _ := marshal(src.Kind) // a string always encodes
	out := make([]model.Part, 0, len(content)+2)
	out = append(out, model.Part{Type: model.BlockText, Text: "<" + tag + " source=" + string(kind) + ">"})
	out = append(out, content...)
	return append(out, model.Part{Type: model.BlockText, Text: "</" + tag + ">"})
}

// Messages derives the conversation the model sees from a session's
// events: each user/message, assistant/message and tool/result with a
// surface op becomes a user, assistant or tool message (a tool message
// keeps the text parts of the result); a context/message or
// steering/message becomes a user message whose parts are its content
// between <context source="KIND"> and </context> (or <steering ...>)
// text parts, as the reference harness sends them. "append" adds the message at the end; a
// ranged "replace" puts it in place of the run of messages it names; a
// bare "replace" puts it in place of all before it. Events without a
// surface op are not seen. An assistant message with no content is left
// out.
func Messages(events []Event) ([]model.Message, error) {
	var s surface
	for _, e := range events {
		if e.SurfaceOp == nil {
			continue
		}
		if isKnownType(e.Type) && !isSurfaceType(e.Type) {
			return nil, fmt.Errorf("%w: event %d: %s event has a surfaceOp", ErrInvalidEvent, e.Seq, e.Type)
		}
		p, err := decodeKnown(e)
		if err != nil {
			return nil, fmt.Errorf("%w: event %d: %w", ErrInvalidEvent, e.Seq, err)
		}
		if err := s.check(e.SurfaceOp); err != nil {
			return nil, fmt.Errorf("%w: event %d: %w", ErrInvalidEvent, e.Seq, err)
		}
		s.apply(e.Seq, e.SurfaceOp, project(p))
	}
	return s.messages(), nil
}

// turnTracker follows the open turn, so that a session cut off in the
// middle of one can be closed.
type turnTracker struct {
	open     bool
	turn     int
	stepOpen bool
	step     int
	calls    []openCall // tool calls of the open turn without a result
}

type openCall struct {
	seq        int64 // of the tool/call, or -1 when the call never ran
	turn, step int
	id, name   string
}

func (t *turnTracker) observe(e Event, p Payload) {
	switch v := p.(type) {
	case TurnStart:
		*t = turnTracker{open: true, turn: v.Turn}
	case StepStart:
		t.stepOpen, t.step = true, v.Step
	case StepEnd:
		// A closed step owes nothing: calls a cancel left unrun are
		// not answered, as the reference's repair reads them.
		t.stepOpen, t.calls = false, nil
	case AssistantMessage:
		// The calls the model made are open from the moment its message
		// is recorded: the loop writes each tool/call only when it runs
		// it, so a crash between the two must still answer every call.
		if t.open {
			for _, part := range v.Content {
				if part.Type == model.BlockToolCall && !t.hasCall(part.ID) {
					t.calls = append(t.calls, openCall{seq: -1, turn: v.Turn, step: v.Step, id: part.ID, name: part.Name})
				}
			}
		}
	case ToolCall:
		if !t.open {
			break
		}
		// A repair result cites the tool/call when there is one.
		if i := slices.IndexFunc(t.calls, func(c openCall) bool { return c.id == v.CallID }); i >= 0 {
			t.calls[i].seq = e.Seq
		}
	case ToolResult:
		t.calls = slices.DeleteFunc(t.calls, func(c openCall) bool { return c.id == v.CallID })
	case TurnEnd:
		*t = turnTracker{}
	}
}

func (t *turnTracker) hasCall(id string) bool {
	return slices.ContainsFunc(t.calls, func(c openCall) bool { return c.id == id })
}

// Crash repair's tool result, as the reference harness writes it
// (session/src/repair.ts).
const (
	interruptedText      = "Tool call interrupted by a crash; no result was recorded."
	interruptedErrorName = "InterruptedError"
	interruptedErrorCode = "interrupted"
)

// closing returns the events that close the open turn, if any: an error
// result for each call of an assistant message of the open step that has
// no result, step/end for an open step, and turn/end with kind
// interrupted. Their Seq and Time are not set.
func (t *turnTracker) closing() []Event {
	if !t.open {
		return nil
	}
	var evs []Event
	for _, c := range t.calls {
		e := NewEvent(ToolResult{
			Turn:    t.turn,
			Step:    c.step,
			CallID:  c.id,
			Content: TextContent(interruptedText),
			IsError: true,
			Error:   &ToolError{Name: interruptedErrorName, Code: interruptedErrorCode},
		})
		if c.seq >= 0 {
			e = e.WithSources(c.seq)
		}
		evs = append(evs, e)
	}
	if t.stepOpen {
		evs = append(evs, NewEvent(StepEnd{Turn: t.turn, Step: t.step}))
	}
	return append(evs, NewEvent(TurnEnd{Turn: t.turn, Reason: EndReason{Kind: EndInterrupted}}))
}
