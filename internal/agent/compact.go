package agent

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// Compaction defaults.
const (
	DefaultTriggerRatio = 0.8
	// DefaultRetainRatio is the share of the context window kept verbatim
	// when RetainTokens is 0.
	DefaultRetainRatio = 0.2
)

// DefaultCompactionInstructions is the system prompt of the summary
// request when CompactionOptions.Instructions is empty.
const DefaultCompactionInstructions = "You compact the history of a conversation between a user and an AI agent, " +
	"so that the agent can continue its work with less context. Write a concise summary that keeps everything " +
	"needed to continue: the user's requests and constraints, decisions made, facts learned, files, commands " +
	"and tool calls with their outcomes, and the work that remains. Write it as notes for the agent, not as a " +
	"reply to the user."

// compactionListener names the compaction listener on the bus.
const compactionListener = "agent:compaction"

// maxTranscriptPart caps, in characters, each message part quoted in a
// summary request; longer parts keep their head and tail.
const maxTranscriptPart = 8000

// CompactionOptions configure compaction. The deployment file's
// compaction: section is decoded strictly by runtime/config and translated
// into them by runtime/deploy.
type CompactionOptions struct {
	// ContextWindow is the model's context window in tokens. It is
	// configured, never looked up from the model's name. Required.
	ContextWindow int
	// TriggerRatio: a step compacts first when its prompt (system prompt
	// and messages) reaches this share of the window. 0 means
	// DefaultTriggerRatio.
	TriggerRatio float64
	// RetainTokens bounds the tail of whole steps kept verbatim; the
	// rest is summarised. 0 means DefaultRetainRatio of the window.
	RetainTokens int
	// Instructions is the summary request's system prompt; empty means
	// DefaultCompactionInstructions.
	Instructions string
}

// withDefaults fills the zero fields.
func (o CompactionOptions) withDefaults() CompactionOptions {
	if o.TriggerRatio == 0 {
		o.TriggerRatio = DefaultTriggerRatio
	}
	if o.RetainTokens == 0 {
		o.RetainTokens = int(float64(o.ContextWindow) * DefaultRetainRatio)
	}
	if o.Instructions == "" {
		o.Instructions = DefaultCompactionInstructions
	}
	return o
}

// Validate reports options that cannot work, wrapping
// ErrInvalidCompaction. Zero fields are checked with their defaults.
func (o CompactionOptions) Validate() error {
	d := o.withDefaults()
	switch {
	case o.ContextWindow <= 0:
		return fmt.Errorf("%w: context_window must be a positive number of tokens, not %d", ErrInvalidCompaction, o.ContextWindow)
	case !(d.TriggerRatio > 0 && d.TriggerRatio <= 1): // also refuses NaN
		return fmt.Errorf("%w: trigger_ratio must be in (0, 1], not %v", ErrInvalidCompaction, o.TriggerRatio)
	case d.RetainTokens < 0:
		return fmt.Errorf("%w: retain_tokens may not be negative (%d)", ErrInvalidCompaction, o.RetainTokens)
	case float64(d.RetainTokens) >= d.TriggerRatio*float64(d.ContextWindow):
		return fmt.Errorf("%w: retain_tokens %d must be below the trigger point %v (trigger_ratio × context_window), or every step would compact",
			ErrInvalidCompaction, d.RetainTokens, d.TriggerRatio*float64(d.ContextWindow))
	}
	return nil
}

// AttachCompaction subscribes compaction to bus as an agent/pre-step
// listener, for every agent that emits there. Before each step it
// estimates the prompt's tokens: from the usage the provider reported for
// the last model call plus a chars/4 estimate of the messages since, or,
// when there is no such usage, chars/4 of the rendered system prompt and
// the messages. At TriggerRatio of ContextWindow it keeps a tail of whole
// steps (an assistant message with the results of its tool calls, a user
// message) up to RetainTokens, summarises the rest with one model request
// through the agent's request path (the agent/request waterfall, then its
// provider; Meta.Purpose is model.PurposeCompaction and Meta.Step the step
// it prepares, so a replay answers it from the recorded compact/summary),
// and records it with session.Compact: compact/start, compact/summary,
// the summary as a user message replacing what it summarises,
// compact/end. It runs before step/start, so its events come before the
// step they prepare.
//
// A compaction that fails is logged as a warning and recorded as
// compact/start and compact/end with the error; the step goes on with the
// full history. The returned off unsubscribes.
func AttachCompaction(bus *events.Bus, opts CompactionOptions) (off func(), err error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	c := &compactor{opts: opts.withDefaults()}
	return bus.On(events.EventAgentPreStep, compactionListener, c.preStep)
}

type compactor struct{ opts CompactionOptions }

func (c *compactor) preStep(ctx context.Context, payload any) error {
	p, ok := payload.(*PreStep)
	if !ok || p == nil || p.agent == nil {
		return fmt.Errorf("%w: %s payload is %T, not one the agent loop emitted", ErrCompaction, events.EventAgentPreStep, payload)
	}
	a := p.agent
	tokens := c.estimate(p)
	if float64(tokens) < c.opts.TriggerRatio*float64(c.opts.ContextWindow) {
		return nil
	}
	surface := a.sess.Surface()
	cut := c.cut(surface)
	if cut == 0 || (cut == 1 && isSummary(surface[0])) {
		return nil // everything left is the tail: nothing to summarise
	}
	replaced := surface[:cut]
	flat := make([]session.Event, len(replaced))
	for i, e := range replaced {
		flat[i] = appendOnly(e)
	}
	msgs, err := session.Messages(flat)
	if err != nil {
		a.log.Warn("agent: compaction failed; going on with the full history", "agent", p.Agent.ID, "err", err)
		return nil
	}
	shadowedTokens := 0
	for _, e := range replaced {
		shadowedTokens += tokensOf(eventChars(e))
	}
	comp := session.Compaction{Turn: p.Turn, Start: replaced[0].Seq, End: replaced[len(replaced)-1].Seq,
		ShadowedTokens: shadowedTokens}
	summary, err := c.summarize(ctx, p, msgs)
	if err != nil {
		if ctx.Err() != nil {
			return nil // the turn was cancelled: the loop ends it
		}
		// A failed compaction does not stop the step: the surface is
		// unchanged, and the model gets the full history
		// (compact/compact-basic, the agent/pre-step listener).
		a.log.Warn("agent: compaction failed; going on with the full history", "agent", p.Agent.ID,
			"turn", p.Turn, "step", p.Step, "err", err)
		comp.Error = err.Error()
		c.record(a, comp)
		return nil
	}
	comp.Summary = summary
	if !c.record(a, comp) {
		return nil
	}
	a.log.Info("agent: compacted the conversation", "agent", p.Agent.ID, "turn", p.Turn, "step", p.Step,
		"estimated_tokens", tokens, "replaced_messages", len(replaced), "kept_messages", len(surface)-cut)
	return nil
}

// record writes a compaction, or its failure, to the session. A session
// that cannot record it is logged; the step goes on either way.
func (c *compactor) record(a *Agent, comp session.Compaction) bool {
	_, err := a.sess.Compact(comp) // OnEvent sees the records once flushed
	if err != nil {
		a.log.Warn("agent: compaction not recorded; going on with the full history", "agent", a.facts.ID, "err", err)
		return false
	}
	return true
}

// estimate returns the prompt's size in tokens.
func (c *compactor) estimate(p *PreStep) int {
	if n, ok := usageEstimate(p.agent.sess.Events(), p.agent.sess.Surface()); ok {
		return n
	}
	chars := utf8.RuneCountInString(p.System)
	for _, m := range p.Messages {
		chars += messageChars(m)
	}
	return tokensOf(chars)
}

// usageEstimate sizes the conversation from the usage of the last model
// call that reported one: its prompt and answer tokens, plus chars/4 of
// the surface messages recorded after it. There is no estimate when no
// call reported usage since the last compaction, whose prompt it no
// longer describes.
func usageEstimate(evs, surface []session.Event) (int, bool) {
	for i := len(evs) - 1; i >= 0; i-- {
		e := evs[i]
		switch e.Type {
		case session.TypeCompactStart, session.TypeCompactSummary, session.TypeCompactEnd:
			return 0, false
		case session.TypeAssistantMessage:
			m, err := session.As[session.AssistantMessage](e)
			if err != nil || m.Usage == nil {
				continue
			}
			n := m.Usage.PromptTokens() + m.Usage.OutputTokens
			chars := 0
			for _, s := range surface {
				if s.Seq > e.Seq {
					chars += eventChars(s)
				}
			}
			return n + tokensOf(chars), true
		}
	}
	return 0, false
}

// cut returns how many leading surface events to summarise: all but the
// longest tail of whole units that fits RetainTokens. A unit is a user
// message, or an assistant message with the tool results after it, so
// that a tool call is never parted from its result.
func (c *compactor) cut(surface []session.Event) int {
	var starts []int // start index of each unit
	for i, e := range surface {
		if e.Type == session.TypeToolResult && len(starts) > 0 {
			continue // joins the unit of the assistant message that called it
		}
		starts = append(starts, i)
	}
	kept, end := 0, len(surface)
	for u := len(starts) - 1; u >= 0; u-- {
		n := 0
		for _, e := range surface[starts[u]:end] {
			n += tokensOf(eventChars(e))
		}
		if kept+n > c.opts.RetainTokens {
			return end
		}
		kept += n
		end = starts[u]
	}
	return 0
}

// isSummary reports whether e is the message of an earlier compaction.
func isSummary(e session.Event) bool {
	if e.Type != session.TypeUserMessage || e.SurfaceOp == nil || e.SurfaceOp.Op != session.SurfaceReplace {
		return false
	}
	m, err := session.As[session.UserMessage](e)
	return err == nil && m.Source.Kind == session.SourcePlugin
}

// summarize asks the model for a summary of msgs.
func (c *compactor) summarize(ctx context.Context, p *PreStep, msgs []model.Message) (string, error) {
	a := p.agent
	var b strings.Builder
	b.WriteString("Summarize this conversation history, which will be replaced by your summary:\n\n<conversation>\n")
	writeTranscript(&b, msgs)
	b.WriteString("</conversation>")
	req := &model.Request{
		Model:    p.Agent.Model,
		System:   c.opts.Instructions,
		Messages: []model.Message{{Role: model.RoleUser, Content: []model.Part{{Type: model.BlockText, Text: b.String()}}}},
		Meta: model.RequestMeta{SessionID: p.Agent.Session, ParentSessionID: a.parentID, Turn: p.Turn, Step: p.Step,
			Purpose: model.PurposeCompaction},
	}
	acc, err := a.generate(ctx, req, nil)
	if err != nil {
		return "", fmt.Errorf("%w: summary request: %w", ErrCompaction, err)
	}
	if r, _ := acc.FinishReason(); r.Kind != model.FinishStop {
		return "", fmt.Errorf("%w: the summary finished %q", ErrCompaction, r.Kind)
	}
	summary := strings.TrimSpace(session.Parts(acc.Parts()).Text())
	if summary == "" {
		return "", fmt.Errorf("%w: the summary is empty", ErrCompaction)
	}
	return summary, nil
}

// writeTranscript renders messages as plain text for the summary request.
// Reasoning is left out; long parts are shortened in the middle.
func writeTranscript(b *strings.Builder, msgs []model.Message) {
	for _, m := range msgs {
		for _, p := range m.Content {
			switch {
			case p.Type == model.BlockToolCall:
				fmt.Fprintf(b, "[assistant called tool %s (call %s) with %s]\n", p.Name, p.ID, shorten(p.Arguments))
			case p.Type != model.BlockText:
				continue
			case m.Role == model.RoleTool && m.IsError:
				fmt.Fprintf(b, "[tool error for call %s]\n%s\n", m.ToolCallID, shorten(p.Text))
			case m.Role == model.RoleTool:
				fmt.Fprintf(b, "[tool result for call %s]\n%s\n", m.ToolCallID, shorten(p.Text))
			default:
				fmt.Fprintf(b, "[%s]\n%s\n", m.Role, shorten(p.Text))
			}
		}
	}
}

func shorten(s string) string {
	if utf8.RuneCountInString(s) <= maxTranscriptPart {
		return s
	}
	r := []rune(s)
	half := maxTranscriptPart / 2
	return string(r[:half]) + fmt.Sprintf("\n[… %d characters left out …]\n", len(r)-2*half) + string(r[len(r)-half:])
}

// tokensOf estimates the tokens of chars characters: chars/4, rounded up.
func tokensOf(chars int) int { return (chars + 3) / 4 }

func messageChars(m model.Message) int {
	n := 0
	for _, p := range m.Content {
		n += utf8.RuneCountInString(p.Text) + utf8.RuneCountInString(p.Name) + utf8.RuneCountInString(p.Arguments)
	}
	return n
}

// eventChars counts the characters of a surface event's message.
func eventChars(e session.Event) int {
	msgs, err := session.Messages([]session.Event{appendOnly(e)})
	if err != nil || len(msgs) == 0 {
		return 0
	}
	return messageChars(msgs[0])
}

// appendOnly returns e entering the surface by append, so that it
// projects on its own whatever op it was recorded with.
func appendOnly(e session.Event) session.Event {
	e.SurfaceOp = &session.SurfaceOp{Op: session.SurfaceAppend}
	return e
}
