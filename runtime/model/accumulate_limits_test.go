package model

import (
	"errors"
	"strings"
	"testing"
)

// A delta that passes the byte bound is kept up to the bound, never
// inside a UTF-8 sequence; Fit and Add agree on what is kept, and every
// later Add returns the limit.
func TestAccumulatorKeepsOutputUpToTheBound(t *testing.T) {
	const bound = 1001 // leaves an odd room: a cut by bytes would split "é"
	a := &Accumulator{Limits: Limits{Bytes: bound}}
	addAll(t, a, start(0, BlockText))
	used := int64(ChunkRecordBytes)
	big := text(0, strings.Repeat("é", 1000)) // 2000 bytes
	kept, err := a.Fit(big)
	if !errors.Is(err, ErrOutputLimit) {
		t.Fatalf("Fit = %v, want ErrOutputLimit", err)
	}
	room := bound - used - ChunkRecordBytes
	if n := int64(len(kept.Text)); n > room || n < room-1 || !strings.HasPrefix(big.Text, kept.Text) || !isValidUTF8(kept.Text) {
		t.Fatalf("kept %d bytes (%q…), want the %d that fit, whole characters", n, kept.Text[:4], room)
	}
	if err := a.Add(big); !errors.Is(err, ErrOutputLimit) {
		t.Fatalf("Add = %v, want ErrOutputLimit", err)
	}
	if got := a.Parts()[0].Text; got != kept.Text {
		t.Errorf("the accumulator kept %d bytes, Fit said %d", len(got), len(kept.Text))
	}
	if err := a.Add(text(0, "x")); !errors.Is(err, ErrOutputLimit) {
		t.Errorf("a later Add = %v, want the limit again", err)
	}
	if err := a.Complete(); !errors.Is(err, ErrOutputLimit) {
		t.Errorf("Complete = %v", err)
	}
}

// Tiny chunks count their record too, so a stream of them stops at the
// bound as well: here after bound/ChunkRecordBytes chunks at most.
func TestAccumulatorCountsEachChunk(t *testing.T) {
	const bound = 64 * ChunkRecordBytes
	a := &Accumulator{Limits: Limits{Bytes: bound}}
	addAll(t, a, start(0, BlockText))
	n := 0
	for ; n < 10*bound; n++ {
		if err := a.Add(text(0, "")); err != nil {
			if !errors.Is(err, ErrOutputLimit) {
				t.Fatal(err)
			}
			break
		}
	}
	if n >= bound/ChunkRecordBytes {
		t.Errorf("%d empty chunks were taken under a bound of %d bytes", n, bound)
	}
}

// One tool call's arguments are bounded on their own, whatever the step
// bound; the call's id and name are kept.
func TestAccumulatorBoundsToolArguments(t *testing.T) {
	a := &Accumulator{Limits: Limits{ArgumentBytes: 10}}
	addAll(t, a, start(0, BlockToolCall), call(0, "c1", "bash", `{"a":"`), call(0, "", "", "1"))
	err := a.Add(call(0, "", "", "23456789"))
	if !errors.Is(err, ErrOutputLimit) || !strings.Contains(err.Error(), "arguments of tool call 0 passed 10 bytes") {
		t.Fatalf("Add = %v", err)
	}
	if p := a.ToolCalls()[0]; p.Arguments != `{"a":"1234` || p.ID != "c1" || p.Name != "bash" {
		t.Errorf("kept %+v", p)
	}
	// A second call starts its own count.
	b := &Accumulator{Limits: Limits{ArgumentBytes: 10}}
	addAll(t, b, start(0, BlockToolCall), call(0, "c1", "x", "0123456789"), end(0, nil),
		start(1, BlockToolCall), call(1, "c2", "x", "0123456789"), end(1, nil), finish(FinishToolCalls))
}

func isValidUTF8(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
