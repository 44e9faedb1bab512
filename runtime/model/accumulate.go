package model

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Accumulator builds the assistant message of one model call from its
// streamed chunks, checking that they follow the chunk protocol:
//
//   - blocks are opened with block-start at the next free index (0, 1, …,
//     in order of appearance) and a known block type;
//   - a delta names an open block of the matching type; the first delta of
//     a tool call carries its ID and Name, later ones may repeat them but
//     not change them;
//   - block-end names an open block; the block it carries, when present,
//     must equal what the deltas built;
//   - finish comes last, after every block has ended; usage may come
//     anywhere before it (a later usage replaces an earlier one).
//
// The first violation is returned by Add, wrapping ErrMalformedStream, and
// every later Add returns it again. A chunk that passes one of Limits is
// kept up to the bound (see Fit) and Add returns an error wrapping
// ErrOutputLimit, again on every later Add. The zero value is ready to
// use and unbounded. An Accumulator is not safe for concurrent use.
type Accumulator struct {
	// Limits bound what the stream may carry; set them before the first
	// Add. Zero fields are no bound.
	Limits Limits

	bytes     int64 // charged to Limits.Bytes so far
	blocks    []*accBlock
	usage     *Usage
	finish    *FinishReason
	chunks    int
	err       error
	toolCalls int // number of tool-call blocks
}

type accBlock struct {
	part  Part
	text  strings.Builder // reasoning/text content or tool-call arguments
	ended bool
	named bool // a tool call's first delta has been seen
}

// Limits bound one stream's output. Zero fields are no bound.
type Limits struct {
	// Bytes bounds the whole stream as a session records it: the text
	// of every delta, a tool call's id, name and arguments each time a
	// chunk carries them, a finish's message and code, each counted
	// JSON-encoded, and ChunkRecordBytes per chunk, so that a stream of
	// tiny chunks cannot store more than its bound either.
	Bytes int64
	// ArgumentBytes bounds the arguments of one tool call.
	ArgumentBytes int64
}

// ChunkRecordBytes is what each chunk counts against Limits.Bytes beyond
// what it carries: what a session record of a chunk takes besides its
// content (type, sequence number, time, turn, step, chunk type, index:
// about 140 bytes).
const ChunkRecordBytes = 160

// Add consumes the next chunk. A chunk that passes Limits is consumed up
// to the bound, as Fit cuts it, and Add returns the limit error.
func (a *Accumulator) Add(c Chunk) error {
	if a.err != nil {
		return a.err
	}
	n := a.chunks
	kept, over := a.Fit(c)
	if over != nil {
		// What fits is kept, if it is a valid chunk on its own; the limit
		// is the error either way.
		if a.add(kept) == nil {
			a.charge(kept)
		}
		a.chunks++
		a.err = fmt.Errorf("model: chunk %d (%s): %w", n, c.Type, over)
		return a.err
	}
	a.chunks++
	if err := a.add(c); err != nil {
		a.err = fmt.Errorf("model: %w: chunk %d (%s): %s", ErrMalformedStream, n, c.Type, err)
		return a.err
	}
	a.charge(c)
	return nil
}

// Fit returns the part of c that Add would keep, and a nil error when
// that is all of c. When c would pass Limits, it is cut to the bound: a
// delta's text or arguments are shortened (never inside a UTF-8
// sequence), a tool call's id and name or a finish's message that do not
// fit are dropped, and the error wraps ErrOutputLimit naming the bound.
// A caller that records chunks records what Fit returns, so that what it
// stores is bounded too. Fit changes nothing.
func (a *Accumulator) Fit(c Chunk) (Chunk, error) {
	l := a.Limits
	if l.Bytes <= 0 && l.ArgumentBytes <= 0 {
		return c, nil
	}
	bounded := l.Bytes > 0
	room := l.Bytes - a.bytes - ChunkRecordBytes // what the chunk may carry
	var over error
	stepOver := func() {
		if over == nil {
			over = fmt.Errorf("%w: the step's output passed %d bytes (each chunk counted %d bytes beyond its content)",
				ErrOutputLimit, l.Bytes, ChunkRecordBytes)
		}
	}
	if bounded && room < 0 {
		// Not even the chunk's record fits: nothing of it is kept.
		stepOver()
		return Chunk{Type: c.Type, Index: c.Index}, over
	}
	// take cuts *s to what is left, charging what it keeps.
	take := func(s *string) {
		if !bounded {
			return
		}
		n, cost := jsonPrefix(*s, room)
		if n < len(*s) {
			stepOver()
			*s = (*s)[:n]
		}
		room -= cost
	}
	// drop keeps *s only when all of it fits.
	drop := func(s *string) {
		if !bounded {
			return
		}
		if n, cost := jsonPrefix(*s, room); n < len(*s) {
			stepOver()
			*s = ""
		} else {
			room -= cost
		}
	}
	switch c.Type {
	case ChunkReasoningDelta, ChunkTextDelta:
		take(&c.Text)
	case ChunkToolCallDelta:
		drop(&c.ID)
		drop(&c.Name)
		if l.ArgumentBytes > 0 && c.Index >= 0 && c.Index < len(a.blocks) {
			left := l.ArgumentBytes - int64(a.blocks[c.Index].text.Len())
			if int64(len(c.ArgumentsDelta)) > left {
				over = fmt.Errorf("%w: the arguments of tool call %d passed %d bytes",
					ErrOutputLimit, c.Index, l.ArgumentBytes)
				c.ArgumentsDelta = cutUTF8(c.ArgumentsDelta, int(max(left, 0)))
			}
		}
		take(&c.ArgumentsDelta)
	case ChunkFinish:
		if c.Reason != nil {
			r := *c.Reason
			drop(&r.Message)
			drop(&r.Code)
			c.Reason = &r
		}
	case ChunkBlockEnd:
		// The block must equal what the deltas built, which is charged
		// already; only what it carries beyond that counts.
		if bounded && c.Block != nil && c.Index >= 0 && c.Index < len(a.blocks) {
			extra := partBytes(*c.Block) - partBytes(a.blocks[c.Index].built())
			if extra > room {
				stepOver()
				c.Block = nil
			}
		}
	}
	return c, over
}

// charge counts a consumed chunk against Limits.Bytes.
func (a *Accumulator) charge(c Chunk) {
	n := ChunkRecordBytes + jsonSize(c.Text) + jsonSize(c.ID) + jsonSize(c.Name) + jsonSize(c.ArgumentsDelta)
	if c.Reason != nil {
		n += jsonSize(c.Reason.Message) + jsonSize(c.Reason.Code)
	}
	a.bytes += n
}

func partBytes(p Part) int64 {
	return jsonSize(p.Text) + jsonSize(p.ID) + jsonSize(p.Name) + jsonSize(p.Arguments)
}

// jsonSize is what s takes in a session record, JSON-encoded (at most:
// escapes are counted at their longest).
func jsonSize(s string) int64 {
	_, cost := jsonPrefix(s, int64(len(s))*6)
	return cost
}

// cutUTF8 is s cut to at most n bytes, not inside a UTF-8 sequence.
func cutUTF8(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// jsonPrefix returns how many bytes of s fit in room once JSON-encoded,
// never cutting a character, and what they take encoded. The stream's
// bound counts encoded bytes, so that text the encoder escapes (control
// characters, invalid UTF-8: six bytes each) cannot store several times
// the bound.
func jsonPrefix(s string, room int64) (int, int64) {
	var cost int64
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var c int64
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			c = 6
		case r == '"', r == '\\', r == '\n', r == '\r', r == '\t':
			c = 2
		case r < 0x20:
			c = 6
		default:
			c = int64(size)
		}
		if cost+c > room {
			return i, cost
		}
		cost += c
		i += size
	}
	return len(s), cost
}

// malformed is the detail of a protocol violation; Add wraps it.
type malformed string

func (m malformed) Error() string { return string(m) }

func malformedf(format string, args ...any) error {
	return malformed(fmt.Sprintf(format, args...))
}

func (a *Accumulator) add(c Chunk) error {
	if a.finish != nil {
		return malformed("chunk after finish")
	}
	switch c.Type {
	case ChunkBlockStart:
		if c.Index != len(a.blocks) {
			if c.Index >= 0 && c.Index < len(a.blocks) {
				return malformedf("block %d started twice", c.Index)
			}
			return malformedf("block-start index %d, want next index %d", c.Index, len(a.blocks))
		}
		switch c.BlockType {
		case BlockReasoning, BlockText, BlockToolCall:
		default:
			return malformedf("block %d has unknown block type %q", c.Index, c.BlockType)
		}
		if c.BlockType == BlockToolCall {
			a.toolCalls++
		}
		a.blocks = append(a.blocks, &accBlock{part: Part{Type: c.BlockType}})
		return nil

	case ChunkReasoningDelta, ChunkTextDelta:
		want := BlockReasoning
		if c.Type == ChunkTextDelta {
			want = BlockText
		}
		b, err := a.open(c.Index, want)
		if err != nil {
			return err
		}
		b.text.WriteString(c.Text)
		return nil

	case ChunkToolCallDelta:
		b, err := a.open(c.Index, BlockToolCall)
		if err != nil {
			return err
		}
		if !b.named {
			if c.ID == "" || c.Name == "" {
				return malformedf("first delta of tool call %d lacks its id or name", c.Index)
			}
			b.part.ID, b.part.Name, b.named = c.ID, c.Name, true
		} else {
			if c.ID != "" && c.ID != b.part.ID {
				return malformedf("tool call %d changed id from %q to %q", c.Index, b.part.ID, c.ID)
			}
			if c.Name != "" && c.Name != b.part.Name {
				return malformedf("tool call %d changed name from %q to %q", c.Index, b.part.Name, c.Name)
			}
		}
		b.text.WriteString(c.ArgumentsDelta)
		return nil

	case ChunkBlockEnd:
		if c.Index < 0 || c.Index >= len(a.blocks) {
			return malformedf("end of unopened block %d", c.Index)
		}
		b := a.blocks[c.Index]
		if b.ended {
			return malformedf("block %d ended twice", c.Index)
		}
		if b.part.Type == BlockToolCall && !b.named {
			return malformedf("tool call %d ended without an id and name", c.Index)
		}
		b.ended = true
		built := b.built()
		if c.Block != nil && *c.Block != built {
			return malformedf("block-end %d carries %s, but the deltas built %s",
				c.Index, describePart(*c.Block), describePart(built))
		}
		return nil

	case ChunkUsage:
		if c.Usage == nil {
			return malformed("usage chunk without usage")
		}
		u := *c.Usage
		a.usage = &u
		return nil

	case ChunkFinish:
		if c.Reason == nil || c.Reason.Kind == "" {
			return malformed("finish chunk without a reason")
		}
		if !knownFinish(c.Reason.Kind) {
			return malformedf("unknown finish reason %q", c.Reason.Kind)
		}
		for i := range a.blocks {
			if !a.blocks[i].ended {
				return malformedf("finish while block %d is still open", i)
			}
		}
		r := *c.Reason
		a.finish = &r
		return nil
	}
	return malformedf("unknown chunk type %q", c.Type)
}

// open returns the open block at index, which must be of type want.
func (a *Accumulator) open(index int, want string) (*accBlock, error) {
	if index < 0 || index >= len(a.blocks) {
		return nil, malformedf("delta for unopened block %d", index)
	}
	b := a.blocks[index]
	if b.ended {
		return nil, malformedf("delta for ended block %d", index)
	}
	if b.part.Type != want {
		return nil, malformedf("%s delta for %s block %d", want, b.part.Type, index)
	}
	return b, nil
}

func (b *accBlock) built() Part {
	p := b.part
	if p.Type == BlockToolCall {
		p.Arguments = b.text.String()
	} else {
		p.Text = b.text.String()
	}
	return p
}

func describePart(p Part) string {
	const limit = 80
	s := p.Text
	if p.Type == BlockToolCall {
		s = p.Name + "#" + p.ID + " " + p.Arguments
	}
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return fmt.Sprintf("%s %q", p.Type, s)
}

// Err returns the protocol violation or limit Add reported, if any.
func (a *Accumulator) Err() error { return a.err }

// Parts returns the content built so far, one part per block in index
// order. Blocks still open are included with what their deltas carried,
// so a cut or cancelled stream keeps its partial content.
func (a *Accumulator) Parts() []Part {
	parts := make([]Part, len(a.blocks))
	for i := range a.blocks {
		parts[i] = a.blocks[i].built()
	}
	return parts
}

// ToolCalls returns the tool-call parts, in index order.
func (a *Accumulator) ToolCalls() []Part {
	calls := make([]Part, 0, a.toolCalls)
	for i := range a.blocks {
		if a.blocks[i].part.Type == BlockToolCall {
			calls = append(calls, a.blocks[i].built())
		}
	}
	return calls
}

// Message returns the assistant message built so far.
func (a *Accumulator) Message() Message {
	return Message{Role: RoleAssistant, Content: a.Parts()}
}

// Usage returns the last usage reported, and whether there was one.
func (a *Accumulator) Usage() (Usage, bool) {
	if a.usage == nil {
		return Usage{}, false
	}
	return *a.usage, true
}

// FinishReason returns the finish reason, and whether the stream finished.
func (a *Accumulator) FinishReason() (FinishReason, bool) {
	if a.finish == nil {
		return FinishReason{}, false
	}
	return *a.finish, true
}

// Finished reports whether the finish chunk has been consumed.
func (a *Accumulator) Finished() bool { return a.finish != nil }

// Complete reports whether the stream is a whole answer: the first
// protocol violation if there was one, otherwise an error wrapping
// ErrStreamCut when no finish chunk arrived, otherwise nil.
func (a *Accumulator) Complete() error {
	if a.err != nil {
		return a.err
	}
	if a.finish == nil {
		open := 0
		for i := range a.blocks {
			if !a.blocks[i].ended {
				open++
			}
		}
		return fmt.Errorf("model: %w: no finish chunk after %d chunks (%d blocks, %d still open)",
			ErrStreamCut, a.chunks, len(a.blocks), open)
	}
	return nil
}
