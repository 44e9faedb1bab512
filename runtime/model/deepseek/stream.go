package deepseek

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dsh-wasm/dsh-wasm/runtime/model"
)

// maxLineBytes bounds one SSE line; a chunk is a few hundred bytes.
const maxLineBytes = 8 << 20

var errLineTooLong = fmt.Errorf("line longer than %d bytes", maxLineBytes)

// The chat.completion.chunk fields the provider reads.
type chunkPayload struct {
	Choices []choicePayload `json:"choices"`
	Usage   *usagePayload   `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

type choicePayload struct {
	Index        int          `json:"index"`
	Delta        deltaPayload `json:"delta"`
	FinishReason *string      `json:"finish_reason"`
}

type deltaPayload struct {
	Content          *string           `json:"content"`
	ReasoningContent *string           `json:"reasoning_content"`
	ToolCalls        []toolCallPayload `json:"tool_calls"`
}

type toolCallPayload struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type usagePayload struct {
	PromptTokens          int  `json:"prompt_tokens"`
	CompletionTokens      int  `json:"completion_tokens"`
	PromptCacheHitTokens  *int `json:"prompt_cache_hit_tokens"`
	PromptCacheMissTokens *int `json:"prompt_cache_miss_tokens"`
	PromptTokensDetails   *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// usage maps DeepSeek's counts (or, from other servers, OpenAI's cached
// tokens) onto model.Usage: InputTokens are the prompt's cache misses.
func (u *usagePayload) usage() *model.Usage {
	hit := 0
	switch {
	case u.PromptCacheHitTokens != nil:
		hit = *u.PromptCacheHitTokens
	case u.PromptTokensDetails != nil:
		hit = u.PromptTokensDetails.CachedTokens
	}
	miss := max(u.PromptTokens-hit, 0)
	if u.PromptCacheMissTokens != nil {
		miss = *u.PromptCacheMissTokens
	}
	out := &model.Usage{InputTokens: miss, CacheReadTokens: hit, OutputTokens: u.CompletionTokens}
	if u.CompletionTokensDetails != nil {
		out.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	}
	return out
}

// finishReason maps DeepSeek's finish_reason to the reference harness's
// vocabulary. Every reason but stop, tool_calls and length is a failure
// whose code is the reason in capitals: content_filter is CONTENT_FILTER,
// insufficient_system_resource INSUFFICIENT_SYSTEM_RESOURCE, and a reason
// this code does not know yet is an error too, never a silent success.
func finishReason(raw string) *model.FinishReason {
	switch raw {
	case "stop":
		return &model.FinishReason{Kind: model.FinishStop}
	case "tool_calls":
		return &model.FinishReason{Kind: model.FinishToolCalls}
	case "length":
		return &model.FinishReason{Kind: model.FinishMaxTokens}
	}
	return &model.FinishReason{Kind: model.FinishError, Message: "model stopped: " + raw, Code: strings.ToUpper(raw)}
}

// stream is one response being read and mapped to chunks.
type stream struct {
	actx        context.Context
	cancel      context.CancelCauseFunc
	body        io.ReadCloser
	r           *bufio.Reader
	idle        *time.Timer
	idleLimit   time.Duration
	idleTimeout error // the cancel cause when idle fires
	line        int   // lines read so far

	emit      func(model.Chunk) error
	blocks    []*block
	reasoning int         // block index of the reasoning, or -1
	text      int         // block index of the text, or -1
	tools     map[int]int // API tool-call index → block index
	lastTool  int         // API index of the latest tool call, or -1
	nextTool  int         // lowest API index above every one seen
	usage     *model.Usage
	finish    *model.FinishReason
}

type block struct {
	part model.Part
	buf  strings.Builder
}

// idleReader re-arms the idle timer whenever data arrives.
type idleReader struct{ s *stream }

func (r idleReader) Read(b []byte) (int, error) {
	n, err := r.s.body.Read(b)
	if n > 0 && r.s.idle != nil {
		r.s.idle.Reset(r.s.idleLimit)
	}
	return n, err
}

func (s *stream) close() {
	if s.idle != nil {
		s.idle.Stop()
	}
	s.body.Close()
	s.cancel(nil)
}

// run reads the events and emits their chunks until [DONE], the end of
// the body, or a failure.
func (s *stream) run(ctx context.Context, emit func(model.Chunk) error) error {
	s.emit = emit
	s.reasoning, s.text, s.lastTool = -1, -1, -1
	s.tools = map[int]int{}
	var data []byte // the pending event's data
	dataLine := 0
	for {
		line, err := s.readLine()
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			switch {
			case errors.Is(err, io.EOF):
				return s.atEOF(data, dataLine)
			case errors.Is(err, errLineTooLong):
				return fmt.Errorf("deepseek: %w: line %d: %w", model.ErrMalformedStream, s.line+1, err)
			case context.Cause(s.actx) == s.idleTimeout:
				return fmt.Errorf("deepseek: %w: %w", model.ErrStreamCut, s.idleTimeout)
			}
			return fmt.Errorf("deepseek: %w: reading the stream: %w", model.ErrStreamCut, err)
		}
		if len(line) == 0 { // end of event
			if data == nil {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			done, err := s.event(data, dataLine)
			if err != nil || done {
				return err
			}
			data = nil
			continue
		}
		if line[0] == ':' { // comment, e.g. ": keep-alive"
			continue
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		if string(name) != "data" { // event, id, retry: unused
			continue
		}
		if data == nil {
			dataLine = s.line
			data = append([]byte{}, value...)
		} else {
			data = append(append(data, '\n'), value...)
		}
	}
}

// readLine returns the next line without its end of line. A last line
// without a newline is returned before io.EOF.
func (s *stream) readLine() ([]byte, error) {
	var long []byte
	for {
		frag, err := s.r.ReadSlice('\n')
		switch {
		case err == bufio.ErrBufferFull:
			if len(long)+len(frag) > maxLineBytes {
				return nil, errLineTooLong
			}
			long = append(long, frag...)
			continue
		case err == io.EOF && len(long)+len(frag) > 0:
			// fall through to return the unterminated line
		case err != nil:
			return nil, err
		}
		s.line++
		if long != nil {
			frag = append(long, frag...)
		}
		frag = bytes.TrimSuffix(frag, []byte("\n"))
		return bytes.TrimSuffix(frag, []byte("\r")), nil
	}
}

// atEOF ends a body that closed without [DONE]. A finished answer whose
// [DONE] was lost is still whole; anything else was cut.
func (s *stream) atEOF(data []byte, dataLine int) error {
	if data != nil {
		// An event not closed by a blank line: take it if it is whole.
		if !isDone(data) && !json.Valid(data) {
			return fmt.Errorf("deepseek: %w: the stream ended inside the event at line %d", model.ErrStreamCut, dataLine)
		}
		if done, err := s.event(data, dataLine); err != nil || done {
			return err
		}
	}
	if s.finish == nil {
		return fmt.Errorf("deepseek: %w: the stream ended after %d lines without a finish reason", model.ErrStreamCut, s.line)
	}
	return s.complete()
}

func isDone(data []byte) bool { return string(bytes.TrimSpace(data)) == "[DONE]" }

// event handles one event's data; done reports the end of the stream.
func (s *stream) event(data []byte, line int) (done bool, err error) {
	if isDone(data) {
		return true, s.complete()
	}
	var c chunkPayload
	if err := json.Unmarshal(data, &c); err != nil {
		return false, fmt.Errorf("deepseek: %w: line %d: %v: %q", model.ErrMalformedStream, line, err, excerpt(data, 200))
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return false, fmt.Errorf("deepseek: error event at line %d: %w", line, streamError(c.Error))
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // only one choice is asked for
		}
		if err := s.delta(ch.Delta); err != nil {
			var m malformed
			if errors.As(err, &m) {
				return false, fmt.Errorf("deepseek: %w: line %d: %s", model.ErrMalformedStream, line, m)
			}
			return false, err // from emit
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.finish = finishReason(*ch.FinishReason)
		}
	}
	if c.Usage != nil {
		s.usage = c.Usage.usage()
	}
	return false, nil
}

// streamError turns an error event's payload into an APIError.
func streamError(raw json.RawMessage) *model.APIError {
	var detail errorDetail
	if json.Unmarshal(raw, &detail) == nil && detail.Message != "" {
		return &model.APIError{Code: detail.code(), Message: detail.Message}
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && s != "" {
		return &model.APIError{Message: s}
	}
	return &model.APIError{Message: excerpt(raw, 512)}
}

// delta emits the chunks of one choice delta.
func (s *stream) delta(d deltaPayload) error {
	if s.finish != nil && (nonEmpty(d.ReasoningContent) || nonEmpty(d.Content) || len(d.ToolCalls) > 0) {
		return malformed("content after the finish reason")
	}
	if nonEmpty(d.ReasoningContent) {
		if err := s.appendText(&s.reasoning, model.BlockReasoning, model.ChunkReasoningDelta, *d.ReasoningContent); err != nil {
			return err
		}
	}
	if nonEmpty(d.Content) {
		if err := s.appendText(&s.text, model.BlockText, model.ChunkTextDelta, *d.Content); err != nil {
			return err
		}
	}
	for _, tc := range d.ToolCalls {
		if err := s.toolCall(tc); err != nil {
			return err
		}
	}
	return nil
}

func nonEmpty(s *string) bool { return s != nil && *s != "" }

// appendText adds text to the block *index points at, opening it first.
func (s *stream) appendText(index *int, blockType, chunkType, text string) error {
	if *index < 0 {
		i, err := s.open(blockType)
		if err != nil {
			return err
		}
		*index = i
	}
	s.blocks[*index].buf.WriteString(text)
	return s.send(model.Chunk{Type: chunkType, Index: *index, Text: text})
}

func (s *stream) toolCall(tc toolCallPayload) error {
	apiIndex := s.lastTool
	switch {
	case tc.Index != nil:
		apiIndex = *tc.Index
	case tc.ID != "": // a server that numbers no calls: key them by id
		known := false
		for ai, bi := range s.tools {
			if s.blocks[bi].part.ID == tc.ID {
				apiIndex, known = ai, true
				break
			}
		}
		if !known {
			apiIndex = s.nextTool
		}
	case apiIndex < 0:
		return malformed("tool call fragment without an index before any tool call")
	}
	if apiIndex < 0 {
		return malformedf("negative tool call index %d", apiIndex)
	}
	s.nextTool = max(s.nextTool, apiIndex+1)
	s.lastTool = apiIndex
	bi, seen := s.tools[apiIndex]
	if !seen {
		if tc.ID == "" || tc.Function.Name == "" {
			return malformedf("first fragment of tool call %d lacks its id or name", apiIndex)
		}
		i, err := s.open(model.BlockToolCall)
		if err != nil {
			return err
		}
		s.tools[apiIndex] = i
		b := s.blocks[i]
		b.part.ID, b.part.Name = tc.ID, tc.Function.Name
		b.buf.WriteString(tc.Function.Arguments)
		return s.send(model.Chunk{Type: model.ChunkToolCallDelta, Index: i,
			ID: tc.ID, Name: tc.Function.Name, ArgumentsDelta: tc.Function.Arguments})
	}
	b := s.blocks[bi]
	if tc.ID != "" && tc.ID != b.part.ID {
		return malformedf("tool call %d changed id from %q to %q", apiIndex, b.part.ID, tc.ID)
	}
	if tc.Function.Name != "" && tc.Function.Name != b.part.Name {
		return malformedf("tool call %d changed name from %q to %q", apiIndex, b.part.Name, tc.Function.Name)
	}
	// Every fragment is a delta carrying the call's id and name, as the
	// reference's translation writes them (llm-deepseek/src/translate.ts)
	// and its recorded sessions hold them.
	b.buf.WriteString(tc.Function.Arguments)
	return s.send(model.Chunk{Type: model.ChunkToolCallDelta, Index: bi,
		ID: b.part.ID, Name: b.part.Name, ArgumentsDelta: tc.Function.Arguments})
}

// open starts the next block.
func (s *stream) open(blockType string) (int, error) {
	i := len(s.blocks)
	s.blocks = append(s.blocks, &block{part: model.Part{Type: blockType}})
	return i, s.send(model.Chunk{Type: model.ChunkBlockStart, Index: i, BlockType: blockType})
}

// complete ends every block, then reports usage and the finish.
func (s *stream) complete() error {
	if s.finish == nil {
		// [DONE] ends a whole answer: with no finish_reason before it,
		// the model stopped (as the reference harness reads it).
		s.finish = &model.FinishReason{Kind: model.FinishStop}
	}
	for i, b := range s.blocks {
		part := b.part
		if part.Type == model.BlockToolCall {
			part.Arguments = b.buf.String()
		} else {
			part.Text = b.buf.String()
		}
		if err := s.send(model.Chunk{Type: model.ChunkBlockEnd, Index: i, Block: &part}); err != nil {
			return err
		}
	}
	if s.usage != nil {
		if err := s.send(model.Chunk{Type: model.ChunkUsage, Usage: s.usage}); err != nil {
			return err
		}
	}
	return s.send(model.Chunk{Type: model.ChunkFinish, Reason: s.finish})
}

// malformed is a protocol violation found in an event; event wraps it in
// model.ErrMalformedStream. Errors of emit are never of this type.
type malformed string

func (m malformed) Error() string { return string(m) }

func malformedf(format string, args ...any) error {
	return malformed(fmt.Sprintf(format, args...))
}

// send passes a chunk on; an error from emit is returned as is.
func (s *stream) send(c model.Chunk) error { return s.emit(c) }
