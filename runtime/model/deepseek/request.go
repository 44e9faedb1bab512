package deepseek

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/runtime/model"
)

// The request body of POST /chat/completions. Its keys are in the order
// the reference harness writes them (llm-deepseek/src/serialize.ts), so
// the same conversation serialises to the same bytes.
type chatRequest struct {
	Model           string        `json:"model"`
	Messages        []chatMessage `json:"messages"`
	Stream          bool          `json:"stream"`
	StreamOptions   streamOptions `json:"stream_options"`
	Thinking        *thinking     `json:"thinking,omitempty"`
	ReasoningEffort string        `json:"reasoning_effort,omitempty"`
	Tools           []chatTool    `json:"tools,omitempty"`
	Temperature     *float64      `json:"temperature,omitempty"`
	MaxTokens       int           `json:"max_tokens,omitempty"`
	Stop            []string      `json:"stop,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type thinking struct {
	Type ThinkingMode `json:"type"`
}

type chatMessage struct {
	Role             string
	Content          string
	ReasoningContent *string
	ToolCalls        []chatToolCall
	ToolCallID       string
}

// MarshalJSON writes a message with the reference's keys in its order: a
// tool message {role, tool_call_id, content}; an assistant message {role,
// content, reasoning_content?, tool_calls?}, its content null when it has
// neither text nor tool calls; others {role, content}.
func (m chatMessage) MarshalJSON() ([]byte, error) {
	b := []byte(`{"role":`)
	b = appendJSON(b, m.Role)
	if m.Role == "tool" {
		b = append(b, `,"tool_call_id":`...)
		b = appendJSON(b, m.ToolCallID)
	}
	b = append(b, `,"content":`...)
	if m.Role == "assistant" && m.Content == "" && len(m.ToolCalls) == 0 {
		b = append(b, "null"...)
	} else {
		b = appendJSON(b, m.Content)
	}
	if m.ReasoningContent != nil {
		b = append(b, `,"reasoning_content":`...)
		b = appendJSON(b, *m.ReasoningContent)
	}
	if len(m.ToolCalls) > 0 {
		b = append(b, `,"tool_calls":`...)
		b = appendJSON(b, m.ToolCalls)
	}
	return append(b, '}'), nil
}

// appendJSON appends v encoded as JSON without HTML escaping, as
// JSON.stringify writes it. v is always encodable here (strings and
// plain structs).
func appendJSON(b []byte, v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})...)
}

type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string      `json:"type"`
	Function chatToolDef `json:"function"`
}

type chatToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// noOutput is the content of a tool message whose result has no text.
const noOutput = "(no output)"

// emptySchema stands for a tool that takes no parameters.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// encodeRequest renders req in DeepSeek's shape.
//
// The system prompt becomes the first message. User and tool messages
// carry their text parts concatenated, as the reference harness joins
// them; an empty tool output is sent as "(no output)", since the API
// wants some content. A tool's description is sent even when empty.
// Temperature and Stop are sent when the request sets them. An assistant message
// carries its text parts concatenated, its tool calls, and its reasoning
// as reasoning_content when keepToolTurnReasoning says thinking mode needs
// it back.
func (p *Provider) encodeRequest(req *model.Request) ([]byte, error) {
	body := chatRequest{
		Model:           req.Model,
		MaxTokens:       req.MaxTokens,
		Stream:          true,
		StreamOptions:   streamOptions{IncludeUsage: true},
		ReasoningEffort: p.opts.ReasoningEffort,
	}
	if body.Model == "" {
		body.Model = p.opts.Model
	}
	if req.MaxTokens < 0 {
		return nil, fmt.Errorf("negative max tokens %d", req.MaxTokens)
	}
	if t := req.Temperature; t != nil {
		if !(*t >= 0 && *t <= 2) { // also refuses NaN
			return nil, fmt.Errorf("temperature %v is outside [0, 2]", *t)
		}
		body.Temperature = t
	}
	body.Stop = req.Stop
	if p.opts.Thinking != ThinkingDefault {
		body.Thinking = &thinking{Type: p.opts.Thinking}
	}
	body.Messages = make([]chatMessage, 0, len(req.Messages)+1)
	if req.System != "" {
		body.Messages = append(body.Messages, chatMessage{Role: "system", Content: req.System})
	}
	for i, m := range req.Messages {
		cm, err := encodeMessage(m)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		body.Messages = append(body.Messages, cm)
	}
	body.Messages = dropUnansweredCalls(body.Messages)
	keepToolTurnReasoning(body.Messages)
	for i, t := range req.Tools {
		if t.Name == "" {
			return nil, fmt.Errorf("tool %d has no name", i)
		}
		params := t.Parameters
		if len(params) == 0 || string(params) == "null" {
			params = emptySchema
		} else if !json.Valid(params) {
			return nil, fmt.Errorf("tool %q: parameters are not valid JSON", t.Name)
		}
		body.Tools = append(body.Tools, chatTool{
			Type:     "function",
			Function: chatToolDef{Name: t.Name, Description: t.Description, Parameters: params},
		})
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

func encodeMessage(m model.Message) (chatMessage, error) {
	switch m.Role {
	case model.RoleUser, model.RoleTool:
		texts := make([]string, 0, len(m.Content))
		for _, p := range m.Content {
			if p.Type != model.BlockText {
				return chatMessage{}, fmt.Errorf("%s part in a %s message", p.Type, m.Role)
			}
			texts = append(texts, p.Text)
		}
		cm := chatMessage{Role: m.Role, Content: strings.Join(texts, "")}
		if m.Role == model.RoleTool {
			if cm.Content == "" {
				cm.Content = noOutput
			}
			if m.ToolCallID == "" {
				return chatMessage{}, fmt.Errorf("tool message without a tool call id")
			}
			cm.ToolCallID = m.ToolCallID
		}
		return cm, nil

	case model.RoleAssistant:
		var text, reasoning strings.Builder
		hasReasoning := false
		cm := chatMessage{Role: m.Role}
		for _, p := range m.Content {
			switch p.Type {
			case model.BlockText:
				text.WriteString(p.Text)
			case model.BlockReasoning:
				hasReasoning = true
				reasoning.WriteString(p.Text)
			case model.BlockToolCall:
				if p.ID == "" || p.Name == "" {
					return chatMessage{}, fmt.Errorf("tool call without an id or name")
				}
				args := p.Arguments
				if args == "" {
					args = "{}"
				}
				cm.ToolCalls = append(cm.ToolCalls, chatToolCall{
					ID: p.ID, Type: "function",
					Function: chatFunction{Name: p.Name, Arguments: args},
				})
			default:
				return chatMessage{}, fmt.Errorf("unknown part type %q", p.Type)
			}
		}
		cm.Content = text.String()
		if hasReasoning {
			r := reasoning.String()
			cm.ReasoningContent = &r
		}
		return cm, nil
	}
	return chatMessage{}, fmt.Errorf("unknown role %q", m.Role)
}

// dropUnansweredCalls removes from each assistant message the tool calls
// that no tool message answers before the next user or assistant
// message. A turn cancelled between two calls of one step records nothing
// for the calls that did not run, as the reference harness does, and the
// API refuses a request in which a tool call has no response; the model
// is shown only the calls that ran. An assistant message left with no
// text and no call says nothing to the model, and is left out.
func dropUnansweredCalls(msgs []chatMessage) []chatMessage {
	out := msgs[:0]
	for i := range msgs {
		if msgs[i].Role != "assistant" || len(msgs[i].ToolCalls) == 0 {
			out = append(out, msgs[i])
			continue
		}
		answered := map[string]bool{}
		for _, m := range msgs[i+1:] {
			if m.Role != "tool" {
				break
			}
			answered[m.ToolCallID] = true
		}
		calls := msgs[i].ToolCalls[:0:0]
		for _, c := range msgs[i].ToolCalls {
			if answered[c.ID] {
				calls = append(calls, c)
			}
		}
		msgs[i].ToolCalls = calls
		if len(calls) > 0 || msgs[i].Content != "" {
			out = append(out, msgs[i])
		}
	}
	return out
}

// keepToolTurnReasoning applies DeepSeek's thinking-mode rule: within a
// user turn in which the model called tools, every assistant message
// carries its reasoning_content back — the final answer too, and an empty
// one where the model gave none. Outside such turns earlier reasoning is
// dropped: the API ignores it, and it only costs tokens.
func keepToolTurnReasoning(msgs []chatMessage) {
	start := 0
	for i := 0; i <= len(msgs); i++ {
		if i < len(msgs) && msgs[i].Role != "user" {
			continue
		}
		seg := msgs[start:i]
		tools := false
		for _, m := range seg {
			tools = tools || m.Role == "assistant" && len(m.ToolCalls) > 0
		}
		for j := range seg {
			if seg[j].Role != "assistant" {
				continue
			}
			switch {
			case !tools:
				seg[j].ReasoningContent = nil
			case seg[j].ReasoningContent == nil:
				empty := ""
				seg[j].ReasoningContent = &empty
			}
		}
		start = i + 1
	}
}
