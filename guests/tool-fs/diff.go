//go:build wasip1

package main

import (
	"bytes"
	"encoding/json"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
)

// diffContext is how many unchanged lines a hunk shows around a change,
// as the reference's (and unified diff's) default.
const diffContext = 3

// fileDiff is one hunk of a change to a file, for the front ends: the
// lines it covers before (nil for none) and after, each joined with "\n"
// without the last line's newline. Path is the path the model gave.
type fileDiff struct {
	Path    string  `json:"path"`
	OldText *string `json:"oldText"`
	NewText string  `json:"newText"`
}

// change is a run of touched lines: [oldFrom, oldTo) of the file before
// and [newFrom, newTo) after, line numbers from 0.
type change struct {
	oldFrom, oldTo, newFrom, newTo int
}

// splitLines cuts text into lines without their newlines; a final
// newline ends the last line rather than starting an empty one.
func splitLines(text []byte) [][]byte {
	if len(text) == 0 {
		return nil
	}
	lines := bytes.Split(text, []byte{'\n'})
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// editChanges are the lines each replacement touched: the one at byte
// offset at[k] of before, replacing old (not empty) with repl, touches
// the lines from the one at at[k] to the one holding old's last byte, and
// sits in after at at[k] shifted by the replacements ahead of it. The
// lines after it are the same on both sides, so its new lines number its
// old ones plus the newlines repl adds (a deleted whole line leaves none).
func editChanges(before, after []byte, at []int, old, repl []byte) []change {
	out := make([]change, 0, len(at))
	shift := len(repl) - len(old)
	spans := countNL(old[:len(old)-1]) + 1
	added := countNL(repl) - countNL(old)
	for k, i := range at {
		c := change{oldFrom: countNL(before[:i]), newFrom: countNL(after[:i+k*shift])}
		c.oldTo = c.oldFrom + spans
		c.newTo = c.newFrom + spans + added
		out = append(out, c)
	}
	return out
}

// maxWriteDiffBytes bounds the file an overwrite diffs against: a larger
// one's card shows the new content alone.
const maxWriteDiffBytes = 1 << 20

// lineChange is the one run of lines that differs between before and
// after, between their common first and last lines; false when they have
// the same lines.
func lineChange(before, after []byte) (change, bool) {
	o, n := splitLines(before), splitLines(after)
	p := 0
	for p < len(o) && p < len(n) && bytes.Equal(o[p], n[p]) {
		p++
	}
	s := 0
	for s < len(o)-p && s < len(n)-p && bytes.Equal(o[len(o)-1-s], n[len(n)-1-s]) {
		s++
	}
	if p == len(o) && p == len(n) {
		return change{}, false
	}
	return change{oldFrom: p, oldTo: len(o) - s, newFrom: p, newTo: len(n) - s}, true
}

// hunks groups changes (in order, not overlapping) into hunks with
// diffContext lines around them, merging changes whose context meets. It
// returns nil, before copying any line, when the hunks would hold more
// than the host takes as a result's meta (a context line of a file with
// very long lines, say): the front ends then show the text, and the edit
// never fails for its diff.
func hunks(path string, before, after []byte, changes []change) []fileDiff {
	oldLines, newLines := splitLines(before), splitLines(after)
	clip := func(n, max int) int { return min(n, max) }
	size := 0
	span := func(lines [][]byte) int {
		n := 0
		for _, l := range lines {
			n += len(l) + 1
		}
		return n
	}
	var out []fileDiff
	for i := 0; i < len(changes); {
		first, last := changes[i], changes[i]
		i++
		for i < len(changes) && changes[i].oldFrom-last.oldTo <= 2*diffContext {
			last = changes[i]
			i++
		}
		lead := min(diffContext, first.oldFrom, first.newFrom)
		oldFrom, newFrom := first.oldFrom-lead, first.newFrom-lead
		trail := diffContext
		oldTo, newTo := clip(last.oldTo+trail, len(oldLines)), clip(last.newTo+trail, len(newLines))
		if size += span(oldLines[min(oldFrom, oldTo):oldTo]) + span(newLines[min(newFrom, newTo):newTo]); size > hostfns.MaxToolMeta {
			return nil
		}
		d := fileDiff{Path: path, NewText: string(bytes.Join(newLines[min(newFrom, newTo):newTo], []byte{'\n'}))}
		if o := oldLines[min(oldFrom, oldTo):oldTo]; len(o) > 0 {
			s := string(bytes.Join(o, []byte{'\n'}))
			d.OldText = &s
		}
		out = append(out, d)
	}
	return out
}

// diffMeta is a result's meta holding diffs, or nil when it would be
// larger than the host takes (the front ends then show the text).
func diffMeta(diffs []fileDiff) json.RawMessage {
	if len(diffs) == 0 {
		return nil
	}
	b, err := json.Marshal(struct {
		Diffs []fileDiff `json:"diffs"`
	}{diffs})
	if err != nil || len(b) > hostfns.MaxToolMeta {
		return nil
	}
	return b
}
