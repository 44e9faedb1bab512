package session

import (
	"fmt"
)

// compactionPlugin is the Source.Plugin of the user message that carries a
// compaction summary.
const compactionPlugin = "compact"

// Compaction describes a compaction for Session.Compact.
type Compaction struct {
	// ID identifies the compaction in its records; empty for a random one.
	ID string
	// Turn is the turn the compaction runs in.
	Turn int
	// Summary is the summary of the replaced messages.
	Summary string
	// Start and End are the seqs of the first and last surface events to
	// replace (see Session.Surface), in surface order, both included.
	Start, End int64
	// ShadowedTokens is the estimated token count of the replaced events.
	ShadowedTokens int
	// Error, when set, records a compaction that failed: compact/start
	// and compact/end carrying it, and no change to the surface.
	Error string
}

// Compact records a compaction: compact/start; compact/summary with the
// summary and the seqs of the replaced surface events; a user message
// whose content is the summary wrapped in <compacted-summary> tags and
// whose surface op replaces the events from Start to End; compact/end.
// After it, Messages has the summary message in place of the replaced
// ones. The four events are appended together and returned. A Compaction
// with Error records the failure instead: compact/start and compact/end
// with the error.
//
// It fails with ErrInvalidEvent, appending nothing, when Start or End is
// not on the surface or End comes before Start.
func (s *Session) Compact(c Compaction) ([]Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	op := &SurfaceOp{Op: SurfaceReplace, Range: &SurfaceRange{Start: c.Start, End: c.End}}
	if err := s.st.surf.check(op); err != nil {
		return nil, fmt.Errorf("session %s: compact: %w: %w", s.st.header.ID, ErrInvalidEvent, err)
	}
	i, j := s.st.surf.index(c.Start), s.st.surf.index(c.End)
	var shadowed []int64
	for _, n := range s.st.surf.nodes[i : j+1] {
		shadowed = append(shadowed, n.seq)
	}
	if c.ID == "" {
		c.ID = newID()
	}

	var out []Event
	add := func(e Event) error {
		e, err := s.appendLocked(e)
		if err != nil {
			return err
		}
		out = append(out, e)
		return nil
	}
	if err := add(NewEvent(CompactStart{ID: c.ID, Turn: c.Turn})); err != nil {
		return nil, err
	}
	if c.Error != "" {
		if err := add(NewEvent(CompactEnd{ID: c.ID, Turn: c.Turn, Error: c.Error})); err != nil {
			return out, err
		}
		return out, nil
	}
	if err := add(NewEvent(CompactSummary{ID: c.ID, Summary: TextContent(c.Summary), ShadowedSeqs: shadowed,
		ShadowedRange: SurfaceRange{Start: c.Start, End: c.End}, ShadowedTokenCount: c.ShadowedTokens})); err != nil {
		return out, err
	}
	msg := NewEvent(UserMessage{
		Content: TextContent("<compacted-summary>\n" + c.Summary + "\n</compacted-summary>"),
		Source:  Source{Kind: SourcePlugin, Plugin: compactionPlugin},
	}).WithSources(append([]int64{out[0].Seq, out[1].Seq}, shadowed...)...)
	msg.SurfaceOp = op
	if err := add(msg); err != nil {
		return out, err
	}
	if err := add(NewEvent(CompactEnd{ID: c.ID, Turn: c.Turn})); err != nil {
		return out, err
	}
	return out, nil
}

// ClosedPrefix returns the longest prefix of events that does not end
// inside a turn: what a fork copies from its parent as its seed while the
// parent's current turn is still running.
func ClosedPrefix(events []Event) []Event {
	var t turnTracker
	n := 0
	for i, e := range events {
		p, err := decodeKnown(e)
		if err != nil {
			break
		}
		t.observe(e, p)
		if !t.open {
			n = i + 1
		}
	}
	return events[:n:n]
}
