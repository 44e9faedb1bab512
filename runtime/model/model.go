// Package model defines what flows between the agent loop and a model
// provider: the request, the streamed chunks and the messages, in the shapes
// the session format records.
//
// A provider streams its answer as Chunks through a callback. The chunk
// vocabulary is the session format's (block-start, reasoning-delta,
// text-delta, tool-call-delta, block-end, usage, finish), so what a live
// provider emits can be recorded verbatim and replayed later.
package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// Chunk types.
const (
	ChunkBlockStart     = "block-start"
	ChunkReasoningDelta = "reasoning-delta"
	ChunkTextDelta      = "text-delta"
	ChunkToolCallDelta  = "tool-call-delta"
	ChunkBlockEnd       = "block-end"
	ChunkUsage          = "usage"
	ChunkFinish         = "finish"
)

// Block (content part) types.
const (
	BlockReasoning = "reasoning"
	BlockText      = "text"
	BlockToolCall  = "tool-call"
)

// Finish reason kinds: the reference harness's vocabulary. An answer
// finishing any other way is malformed.
const (
	FinishStop      = "stop"       // the model chose to stop
	FinishToolCalls = "tool-calls" // the model stopped to call tools
	FinishMaxTokens = "max-tokens" // the answer hit the output-token ceiling
	FinishAborted   = "aborted"    // the provider aborted the stream
	FinishError     = "error"      // the provider reported a failure: Message, Code
)

// knownFinish reports whether kind is one of the Finish kinds.
func knownFinish(kind string) bool {
	switch kind {
	case FinishStop, FinishToolCalls, FinishMaxTokens, FinishAborted, FinishError:
		return true
	}
	return false
}

// Chunk is one element of a streamed answer. Which fields are meaningful
// depends on Type; MarshalJSON writes only those, in the session format.
type Chunk struct {
	Type string

	// Index is the content block the chunk belongs to (every type but
	// usage and finish).
	Index int

	// BlockType is set on block-start.
	BlockType string

	// Text is the delta of reasoning-delta and text-delta.
	Text string

	// ID, Name and ArgumentsDelta are set on tool-call-delta. The first
	// delta of a call carries ID and Name; later ones only ArgumentsDelta.
	ID             string
	Name           string
	ArgumentsDelta string

	// Block is the completed block, on block-end.
	Block *Part

	// Usage is set on usage.
	Usage *Usage

	// Reason is set on finish.
	Reason *FinishReason
}

type chunkJSON struct {
	Type           string        `json:"type"`
	Index          *int          `json:"index,omitempty"`
	BlockType      string        `json:"blockType,omitempty"`
	Text           *string       `json:"text,omitempty"`
	ID             string        `json:"id,omitempty"`
	Name           string        `json:"name,omitempty"`
	ArgumentsDelta *string       `json:"argumentsDelta,omitempty"`
	Block          *Part         `json:"block,omitempty"`
	Usage          *Usage        `json:"usage,omitempty"`
	Reason         *FinishReason `json:"reason,omitempty"`
}

// MarshalJSON writes the chunk in the session format.
func (c Chunk) MarshalJSON() ([]byte, error) {
	j := chunkJSON{Type: c.Type}
	switch c.Type {
	case ChunkBlockStart:
		j.Index, j.BlockType = &c.Index, c.BlockType
	case ChunkReasoningDelta, ChunkTextDelta:
		j.Index, j.Text = &c.Index, &c.Text
	case ChunkToolCallDelta:
		j.Index, j.ID, j.Name, j.ArgumentsDelta = &c.Index, c.ID, c.Name, &c.ArgumentsDelta
	case ChunkBlockEnd:
		j.Index, j.Block = &c.Index, c.Block
	case ChunkUsage:
		j.Usage = c.Usage
	case ChunkFinish:
		j.Reason = c.Reason
	default:
		return nil, fmt.Errorf("model: unknown chunk type %q", c.Type)
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads a chunk in the session format. Unknown chunk types
// are an error: a provider must not invent them.
func (c *Chunk) UnmarshalJSON(b []byte) error {
	var j chunkJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*c = Chunk{Type: j.Type, BlockType: j.BlockType, ID: j.ID, Name: j.Name,
		Block: j.Block, Usage: j.Usage, Reason: j.Reason}
	if j.Index != nil {
		c.Index = *j.Index
	}
	if j.Text != nil {
		c.Text = *j.Text
	}
	if j.ArgumentsDelta != nil {
		c.ArgumentsDelta = *j.ArgumentsDelta
	}
	switch c.Type {
	case ChunkBlockStart, ChunkReasoningDelta, ChunkTextDelta, ChunkToolCallDelta,
		ChunkBlockEnd, ChunkUsage, ChunkFinish:
		return nil
	}
	return fmt.Errorf("model: unknown chunk type %q", c.Type)
}

// Part is one content part of a message: reasoning, text or a tool call.
type Part struct {
	Type      string `json:"type"`
	Text      string `json:"text,omitempty"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

// Usage is the token accounting of one model call. InputTokens counts the
// prompt tokens that missed the provider's cache; CacheReadTokens those
// that hit it.
type Usage struct {
	InputTokens     int `json:"inputTokens"`
	OutputTokens    int `json:"outputTokens"`
	CacheReadTokens int `json:"cacheReadTokens"`
	ReasoningTokens int `json:"reasoningTokens"`
}

// PromptTokens is the whole prompt size: cache misses plus hits.
func (u Usage) PromptTokens() int { return u.InputTokens + u.CacheReadTokens }

// FinishReason says why the model stopped. An error finish carries a
// message and, when the provider gave one, a code (e.g. CONTENT_FILTER).
type FinishReason struct {
	Kind    string `json:"kind"`
	Message string `json:"message,omitempty"`
	Code    string `json:"code,omitempty"`
}

// Roles of a Message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one entry of the conversation sent to the model. The system
// prompt is not a message: it travels in Request.System.
type Message struct {
	Role string `json:"role"`
	// Content holds text parts for user and tool messages, and reasoning,
	// text and tool-call parts for assistant messages.
	Content []Part `json:"content"`
	// ToolCallID and IsError are set on tool messages.
	ToolCallID string `json:"toolCallId,omitempty"`
	IsError    bool   `json:"isError,omitempty"`
}

// Request is one model call: one per agent step.
type Request struct {
	Model    string        `json:"model"`
	System   string        `json:"system"`
	Messages []Message     `json:"messages"`
	Tools    []prompt.Tool `json:"tools,omitempty"`
	// MaxTokens caps the answer; zero leaves it to the provider.
	MaxTokens int `json:"maxTokens,omitempty"`
	// Temperature, when set, is the sampling temperature.
	Temperature *float64 `json:"temperature,omitempty"`
	// Stop, when set, are sequences that end the answer.
	Stop []string `json:"stop,omitempty"`
	// Meta says who is asking. Providers that answer from recordings key
	// on it; live providers ignore it.
	Meta RequestMeta `json:"meta"`
}

// RequestMeta identifies the step a request belongs to.
type RequestMeta struct {
	SessionID string `json:"sessionId"`
	// ParentSessionID is set for a subagent's session.
	ParentSessionID string `json:"parentSessionId,omitempty"`
	Turn            int    `json:"turn"`
	Step            int    `json:"step"`
	// Purpose is empty for a step's request; PurposeCompaction for the
	// summary request of a compaction, whose Step is the step it
	// prepares.
	Purpose string `json:"purpose,omitempty"`
}

// PurposeCompaction is the RequestMeta.Purpose of a compaction's summary
// request.
const PurposeCompaction = "compaction"

// Provider answers model requests by streaming chunks to emit. It returns
// when the answer is complete (after the finish chunk), when emit returns an
// error (which it returns), or when ctx is cancelled (returning ctx.Err()).
// A provider is safe for concurrent use by several agents.
type Provider interface {
	Generate(ctx context.Context, req *Request, emit func(Chunk) error) error
}

// ProviderFunc adapts a function to Provider.
type ProviderFunc func(ctx context.Context, req *Request, emit func(Chunk) error) error

// Generate calls f.
func (f ProviderFunc) Generate(ctx context.Context, req *Request, emit func(Chunk) error) error {
	return f(ctx, req, emit)
}

// Errors a provider returns, wrapped with detail. Callers test with
// errors.Is. They carry no "model: " prefix because the provider that
// returns one puts its own name first ("deepseek: malformed model stream:
// line 3: ..."); the Accumulator, which returns them itself, writes
// "model: ".
var (
	// ErrStreamCut: the stream ended before its finish chunk.
	ErrStreamCut = errors.New("model stream ended before it finished")
	// ErrMalformedStream: the provider sent something that is not a valid
	// chunk.
	ErrMalformedStream = errors.New("malformed model stream")
	// ErrNoScript: a replay has no recorded answer for the request.
	ErrNoScript = errors.New("no recorded answer")
	// ErrOutputLimit: the stream passed a bound on its output (an
	// Accumulator's Limits, or the caller's time bound).
	ErrOutputLimit = errors.New("model output limit passed")
)

// APIError is a failure reported by the model's API.
type APIError struct {
	Status  int    // HTTP status, 0 when not from HTTP
	Code    string // provider error code, if any
	Message string
}

func (e *APIError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("model API error %d: %s", e.Status, e.Message)
	}
	return "model API error: " + e.Message
}
