// Package scripted is a model that follows a script, for tests, examples
// and recorded demos: no network, the same answers every run.
//
// Answer builds one step's answer as the chunk stream a provider would
// send; Script and Provider replay such answers turn by turn; Tools is
// a model that calls tools in order and then answers, the usual shape
// of a plugin's or an embedder's test.
package scripted

import (
	"github.com/dsh-wasm/dsh-wasm/internal/replay"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
)

// Call is one tool call of a step.
type Call struct {
	ID, Name, Arguments string
}

// Answer is one step's answer: optional reasoning, optional text, then
// tool calls. A step with calls finishes "tool-calls", otherwise "stop".
type Answer struct {
	Reasoning string
	Text      string
	Calls     []Call
	// Usage, when set, is streamed before the finish.
	Usage *model.Usage
}

// Chunks returns the answer's chunk stream: each block's start, deltas and
// end, in order, then usage and finish.
func (a Answer) Chunks() []model.Chunk {
	var cs []model.Chunk
	idx := 0
	block := func(typ, text string) {
		if text == "" {
			return
		}
		delta := model.ChunkTextDelta
		if typ == model.BlockReasoning {
			delta = model.ChunkReasoningDelta
		}
		cs = append(cs, model.Chunk{Type: model.ChunkBlockStart, Index: idx, BlockType: typ})
		for _, w := range words(text) {
			cs = append(cs, model.Chunk{Type: delta, Index: idx, Text: w})
		}
		cs = append(cs, model.Chunk{Type: model.ChunkBlockEnd, Index: idx, Block: &model.Part{Type: typ, Text: text}})
		idx++
	}
	block(model.BlockReasoning, a.Reasoning)
	block(model.BlockText, a.Text)
	for _, c := range a.Calls {
		cs = append(cs,
			model.Chunk{Type: model.ChunkBlockStart, Index: idx, BlockType: model.BlockToolCall},
			model.Chunk{Type: model.ChunkToolCallDelta, Index: idx, ID: c.ID, Name: c.Name, ArgumentsDelta: c.Arguments},
			model.Chunk{Type: model.ChunkBlockEnd, Index: idx, Block: &model.Part{Type: model.BlockToolCall, ID: c.ID, Name: c.Name, Arguments: c.Arguments}})
		idx++
	}
	if a.Usage != nil {
		cs = append(cs, model.Chunk{Type: model.ChunkUsage, Usage: a.Usage})
	}
	kind := model.FinishStop
	if len(a.Calls) > 0 {
		kind = model.FinishToolCalls
	}
	return append(cs, model.Chunk{Type: model.ChunkFinish, Reason: &model.FinishReason{Kind: kind}})
}

// words splits text into deltas as a model streams them: each word with
// the spaces before it.
func words(text string) []string {
	var out []string
	start := 0
	for i := 1; i < len(text); i++ {
		if text[i] == ' ' && text[i-1] != ' ' {
			out = append(out, text[start:i])
			start = i
		}
	}
	return append(out, text[start:])
}

// turnsScript makes a replay script whose turn N+1 answers with turns[N],
// step by step.
func turnsScript(name string, turns ...[]Answer) *replay.Script {
	s := &replay.Script{Name: name}
	for t, answers := range turns {
		for i, a := range answers {
			s.Steps = append(s.Steps, replay.Step{Turn: t + 1, Step: i + 1, Chunks: a.Chunks()})
		}
	}
	return s
}

// Provider is a model that answers turn N+1 with turns[N], step by step,
// as a recorded session replays.
func Provider(turns ...[]Answer) (model.Provider, error) {
	p, err := replay.New(turnsScript("scripted", turns...), replay.Options{})
	if err != nil {
		// Not a nil *replay.Provider in a non-nil interface.
		return nil, err
	}
	return p, nil
}
