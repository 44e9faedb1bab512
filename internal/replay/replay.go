// Package replay answers model requests from recorded sessions, and
// records live providers' answers in the same format.
//
// A recording is a session file in the JSONL session format (version 0).
// Its assistant/chunk events, grouped by (turn, step), are the scripted
// answers; a request's Meta.Turn and Meta.Step pick one, and the request
// itself is never checked. Next to the parent file (NAME.jsonl) may lie:
//
//   - child session files NAME.N.jsonl (subagents). Live sessions bind to
//     scripts in the order they first call the model; scripts are ordered
//     by header createdAt, the parent first. A fork child's file starts
//     with seedLength events copied from its parent, which are skipped.
//   - replay.override.json, a JSON array that replaces the parent's
//     script: entry N answers the parent session's Nth model call (kinds
//     chunks, hang and throw).
//
// This is the conformance corpus's layout (../shared/conformance); the
// package reads the files itself and depends on no session package.
package replay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/dsh-wasm/dsh-wasm/runtime/model"
)

// OverrideFile is the name of the override file Open looks for beside the
// parent session file.
const OverrideFile = "replay.override.json"

// Provider answers from recorded scripts. It is safe for concurrent use.
type Provider struct {
	scripts     []*Script // the parent first, then children by CreatedAt
	override    []Entry   // replaces scripts[0] when hasOverride
	hasOverride bool

	mu    sync.Mutex
	bound map[string]int // session id → index into scripts
	calls int            // model calls bound to the parent, for the override
}

var _ model.Provider = (*Provider)(nil)

// Options says where Open and New find the child scripts and the
// override. The zero value makes Open read both from files beside the
// parent, and New use neither.
type Options struct {
	// Override, when non-nil, replaces the parent's script: entry N
	// answers the parent session's Nth model call. Open then reads no
	// override file.
	Override []Entry
	// Children, when non-nil, are the child scripts; Open then reads no
	// child files. They are ordered by CreatedAt (ties keep the given
	// order).
	Children []*Script
	// NoOverrideFile stops Open from reading OverrideFile beside the
	// parent: without Override, the parent answers from its own script.
	NoOverrideFile bool
	// NoChildFiles stops Open from reading PREFIX.N.jsonl children.
	NoChildFiles bool
}

// Open loads the session file at path and, unless opts say otherwise,
// its siblings: PREFIX.N.jsonl children (PREFIX being path without
// .jsonl) and replay.override.json.
func Open(path string, opts Options) (*Provider, error) {
	parent, err := LoadScript(path)
	if err != nil {
		return nil, err
	}
	if opts.Children == nil && !opts.NoChildFiles {
		children, err := discoverChildren(path)
		if err != nil {
			return nil, err
		}
		opts.Children = children
	}
	if opts.Override == nil && !opts.NoOverrideFile {
		entries, err := LoadOverride(filepath.Join(filepath.Dir(path), OverrideFile))
		switch {
		case err == nil:
			opts.Override = entries // never nil
		case !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
	}
	return newProvider(parent, opts)
}

// New answers from parent and, as opts say, children and an override.
// It looks for no files.
func New(parent *Script, opts Options) (*Provider, error) {
	if parent == nil {
		return nil, errors.New("replay: nil parent script")
	}
	for i, c := range opts.Children {
		if c == nil {
			return nil, fmt.Errorf("replay: child script %d is nil", i)
		}
	}
	return newProvider(parent, opts)
}

func newProvider(parent *Script, o Options) (*Provider, error) {
	for i := range o.Override {
		if err := o.Override[i].validate(); err != nil {
			return nil, fmt.Errorf("%w: override entry %d: %v", ErrBadRecording, i, err)
		}
	}
	children := slices.Clone(o.Children)
	slices.SortStableFunc(children, func(a, b *Script) int { return cmp.Compare(a.CreatedAt, b.CreatedAt) })
	return &Provider{
		scripts:     append([]*Script{parent}, children...),
		override:    slices.Clone(o.Override),
		hasOverride: o.Override != nil,
		bound:       map[string]int{},
	}, nil
}

// discoverChildren loads PREFIX.N.jsonl beside path, ordered by N.
func discoverChildren(path string) ([]*Script, error) {
	dir, base := filepath.Split(path)
	prefix := strings.TrimSuffix(base, ".jsonl")
	entries, err := os.ReadDir(cmp.Or(dir, "."))
	if err != nil {
		return nil, fmt.Errorf("replay: looking for child sessions: %w", err)
	}
	pattern := regexp.MustCompile(`^` + regexp.QuoteMeta(prefix) + `\.([1-9][0-9]*)\.jsonl$`)
	type numbered struct {
		n    int
		name string
	}
	var found []numbered
	for _, e := range entries {
		m := pattern.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() {
			continue
		}
		n, err := strconv.Atoi(m[1])
		if err != nil {
			continue // too large to be a child number
		}
		found = append(found, numbered{n, e.Name()})
	}
	slices.SortFunc(found, func(a, b numbered) int { return cmp.Compare(a.n, b.n) })
	children := make([]*Script, 0, len(found))
	for _, f := range found {
		s, err := LoadScript(filepath.Join(dir, f.name))
		if err != nil {
			return nil, err
		}
		children = append(children, s)
	}
	return children, nil
}

// Scripts returns the scripts in binding order: the parent, then the
// children by CreatedAt.
func (p *Provider) Scripts() []*Script { return slices.Clone(p.scripts) }

// Generate streams the recorded answer to req: the script bound to
// req.Meta.SessionID, at (Meta.Turn, Meta.Step), or for the parent under an
// override the entry for this call. A session with no script, or a step
// with no recorded answer, is an error wrapping model.ErrNoScript. A
// recorded stream that never finished is streamed, then reported as an
// error wrapping model.ErrStreamCut; so is an override chunks entry
// without a finish chunk.
func (p *Provider) Generate(ctx context.Context, req *model.Request, emit func(model.Chunk) error) error {
	if req == nil {
		return errors.New("replay: nil request")
	}
	meta := req.Meta
	p.mu.Lock()
	idx, ok := p.bound[meta.SessionID]
	if !ok {
		idx = len(p.bound)
		if idx >= len(p.scripts) {
			p.mu.Unlock()
			return fmt.Errorf("replay: %w for session %q: it is session %d to call the model, the recording has %d",
				model.ErrNoScript, meta.SessionID, idx+1, len(p.scripts))
		}
		p.bound[meta.SessionID] = idx
	}
	call := -1
	if idx == 0 && p.hasOverride {
		call = p.calls
		p.calls++
	}
	p.mu.Unlock()

	if call >= 0 {
		return p.answerOverride(ctx, meta, call, emit)
	}
	script := p.scripts[idx]
	if meta.Purpose == model.PurposeCompaction {
		c, ok := script.LookupCompaction(meta.Turn, meta.Step)
		if !ok {
			return fmt.Errorf("replay: %w for the compaction of session %q (script %s) before turn %d step %d",
				model.ErrNoScript, meta.SessionID, script.Name, meta.Turn, meta.Step)
		}
		return stream(ctx, textChunks(c.Summary), emit)
	}
	step, ok := script.Lookup(meta.Turn, meta.Step)
	if !ok {
		return fmt.Errorf("replay: %w for session %q (script %s) turn %d step %d",
			model.ErrNoScript, meta.SessionID, script.Name, meta.Turn, meta.Step)
	}
	if err := stream(ctx, step.Chunks, emit); err != nil {
		return err
	}
	if !step.Finished() {
		return fmt.Errorf("replay: %w: the recorded answer of turn %d step %d (%s) never finished",
			model.ErrStreamCut, meta.Turn, meta.Step, script.Name)
	}
	return nil
}

// textChunks is a whole answer of one text block.
func textChunks(text string) []model.Chunk {
	part := model.Part{Type: model.BlockText, Text: text}
	return []model.Chunk{
		{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockText},
		{Type: model.ChunkTextDelta, Index: 0, Text: text},
		{Type: model.ChunkBlockEnd, Index: 0, Block: &part},
		{Type: model.ChunkFinish, Reason: &model.FinishReason{Kind: model.FinishStop}},
	}
}

func (p *Provider) answerOverride(ctx context.Context, meta model.RequestMeta, call int, emit func(model.Chunk) error) error {
	if call >= len(p.override) {
		return fmt.Errorf("replay: %w for session %q: the override answers %d model calls, this is call %d (turn %d step %d)",
			model.ErrNoScript, meta.SessionID, len(p.override), call+1, meta.Turn, meta.Step)
	}
	e := p.override[call]
	switch e.Kind {
	case KindHang:
		partial := []model.Chunk{
			{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockText},
			{Type: model.ChunkTextDelta, Index: 0, Text: HangText},
		}
		if err := stream(ctx, partial, emit); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	case KindThrow:
		if err := stream(ctx, e.Chunks, emit); err != nil {
			return err
		}
		return &model.APIError{Status: e.Status, Code: e.Code, Message: e.Message}
	case KindChunks:
		if err := stream(ctx, e.Chunks, emit); err != nil {
			return err
		}
		if !(Step{Chunks: e.Chunks}).Finished() {
			return fmt.Errorf("replay: %w: override entry %d never finishes", model.ErrStreamCut, call)
		}
		return nil
	}
	return fmt.Errorf("%w: override entry %d has unknown kind %q", ErrBadRecording, call, e.Kind)
}

// stream emits copies of chunks, stopping when ctx is done.
func stream(ctx context.Context, chunks []model.Chunk, emit func(model.Chunk) error) error {
	for _, c := range chunks {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := emit(cloneChunk(c)); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// cloneChunk copies what a chunk points to, so consumers cannot alter
// the recording.
func cloneChunk(c model.Chunk) model.Chunk {
	if c.Block != nil {
		b := *c.Block
		c.Block = &b
	}
	if c.Usage != nil {
		u := *c.Usage
		c.Usage = &u
	}
	if c.Reason != nil {
		r := *c.Reason
		c.Reason = &r
	}
	return c
}
