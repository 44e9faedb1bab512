package guests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

// envelope is read's and write's result for path: named by its absolute
// path, a relative one taken from the tool's working directory.
func (e *toolEnv) envelope(path, body string) string {
	if !filepath.IsAbs(path) {
		path = filepath.Join(e.dir, path)
	}
	return "<path>" + path + "</path>\n<type>file</type>\n<content>\n" + body + "\n</content>"
}

func TestToolFSReadWindowAndFooters(t *testing.T) {
	e := loadTool(t, "tool-fs", workspaceRW(), "", 0)
	var b strings.Builder
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	e.write(t, "ten.txt", b.String())

	all := e.ok(t, "read", `{"file_path":"ten.txt"}`)
	want := "1: line 1\n2: line 2\n3: line 3\n4: line 4\n5: line 5\n6: line 6\n7: line 7\n8: line 8\n9: line 9\n10: line 10\n\n(End of file - total 10 lines)"
	if all != e.envelope("ten.txt", want) {
		t.Fatalf("whole read:\n%s", all)
	}
	mid := e.ok(t, "read", `{"file_path":"ten.txt","offset":3,"limit":2}`)
	if mid != e.envelope("ten.txt", "3: line 3\n4: line 4\n\n(Showing lines 3-4 of 10. Use offset=5 to continue.)") {
		t.Fatalf("window:\n%s", mid)
	}
	tail := e.ok(t, "read", `{"file_path":"ten.txt","offset":9,"limit":5}`)
	if tail != e.envelope("ten.txt", "9: line 9\n10: line 10\n\n(End of file - total 10 lines)") {
		t.Fatalf("tail:\n%s", tail)
	}
	e.fails(t, "read", `{"file_path":"ten.txt","offset":11}`, `offset 11 is out of range for "ten.txt" (10 lines)`)
	e.fails(t, "read", `{"file_path":"ten.txt","offset":0}`, `"offset"`, "positive whole number")
	e.fails(t, "read", `{"file_path":"ten.txt","limit":2001}`, "at most 2000 lines")
	e.fails(t, "read", `{"file_path":"ten.txt","offset":1.5}`, "positive whole number")

	// The path as the model gave it, absolute inside the workspace.
	abs := filepath.Join(e.dir, "ten.txt")
	if got := e.ok(t, "read", `{"file_path":"`+abs+`","limit":1}`); got != e.envelope(abs, "1: line 1\n\n(Showing lines 1-1 of 10. Use offset=2 to continue.)") {
		t.Fatalf("absolute path:\n%s", got)
	}
}

func TestToolFSReadShapes(t *testing.T) {
	e := loadTool(t, "tool-fs", workspaceRW(), `{"max_line_length":10}`, 0)
	cases := []struct{ name, content, body string }{
		{"empty.txt", "", "(End of file - total 0 lines)"},
		{"nonl.txt", "a\nb", "1: a\n2: b\n\n(End of file - total 2 lines)"},
		{"crlf.txt", "one\r\ntwo\r\n", "1: one\n2: two\n\n(End of file - total 2 lines)"},
		{"blank.txt", "a\n\n", "1: a\n2: \n\n(End of file - total 2 lines)"},
		{"unicode.txt", "héllo wörld\n日本語\n", "1: héllo wörl... (line truncated to 10 chars)\n2: 日本語\n\n(End of file - total 2 lines)"},
		{"long.txt", strings.Repeat("x", 50) + "\n", "1: xxxxxxxxxx... (line truncated to 10 chars)\n\n(End of file - total 1 lines)"},
	}
	for _, c := range cases {
		e.write(t, c.name, c.content)
		if got := e.ok(t, "read", `{"file_path":"`+c.name+`"}`); got != e.envelope(c.name, c.body) {
			t.Errorf("%s:\n%s\nwant\n%s", c.name, got, e.envelope(c.name, c.body))
		}
	}
	e.write(t, "bin.dat", "PK\x03\x04\x00\x00binary")
	e.fails(t, "read", `{"file_path":"bin.dat"}`, `cannot read "bin.dat": binary file`)
	e.write(t, "latin1.txt", "caf\xe9\n")
	e.fails(t, "read", `{"file_path":"latin1.txt"}`, "binary file")
	if err := os.Mkdir(filepath.Join(e.dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.fails(t, "read", `{"file_path":"sub"}`, `cannot read "sub": it is a directory`)
	e.fails(t, "read", `{"file_path":"missing.txt"}`, `cannot read "missing.txt": not found`)
	e.fails(t, "read", `{"file_path":"../outside.txt"}`, `"../outside.txt"`, "outside the granted roots")
	e.fails(t, "read", `{"file_path":"/etc/passwd"}`, `"/etc/passwd"`, "outside the granted roots")
	e.fails(t, "read", `{}`, `"file_path"`)
	// A symlink out of the workspace is stopped by the jail.
	if err := os.Symlink("/etc/passwd", filepath.Join(e.dir, "link")); err != nil {
		t.Fatal(err)
	}
	e.fails(t, "read", `{"file_path":"link"}`, `cannot read "link"`)
}

func TestToolFSReadByteCap(t *testing.T) {
	e := loadTool(t, "tool-fs", workspaceRW(), `{"max_bytes":20}`, 0)
	e.write(t, "f.txt", "aaaaaaa\nbbbbbbb\nccccccc\nddddddd\n")
	got := e.ok(t, "read", `{"file_path":"f.txt"}`)
	if got != e.envelope("f.txt", "1: aaaaaaa\n2: bbbbbbb\n\n(Output capped. Showing lines 1-2. Use offset=3 to continue.)") {
		t.Fatalf("capped:\n%s", got)
	}
}

func TestToolFSWriteAndEditPolicy(t *testing.T) {
	e := loadTool(t, "tool-fs", workspaceRW(), "", 0)

	// A new file is created, parents too.
	if got := e.ok(t, "write", jsonArgs("file_path", "new/notes.txt", "content", "hello world")); got != e.envelope("new/notes.txt", "Created file") {
		t.Fatalf("create: %q", got)
	}
	if got := e.read(t, "new/notes.txt"); got != "hello world" {
		t.Fatalf("created %q", got)
	}
	// Written in this session, so it may be overwritten and edited.
	if got := e.ok(t, "write", jsonArgs("file_path", "new/notes.txt", "content", "hello again\n")); got != e.envelope("new/notes.txt", "Updated file") {
		t.Fatalf("update: %q", got)
	}

	e.write(t, "settings.txt", "color=blue\nsize=blue\n")
	// Refused as the reference refuses it, naming the absolute path, with
	// the failure's identity for programs.
	abs := filepath.Join(e.dir, "settings.txt")
	for _, c := range []struct{ args, want string }{
		{jsonArgs("file_path", "settings.txt", "old_string", "blue", "new_string", "green"), `Error: edit requires reading "` + abs + `" first`},
		{jsonArgs("file_path", "settings.txt", "content", "x"), `Error: cannot overwrite existing "` + abs + `" without reading it first`},
	} {
		name := "edit"
		if strings.Contains(c.args, "content") {
			name = "write"
		}
		r := e.call(t, name, c.args)
		if !r.IsError || r.Text != c.want || r.Failure == nil || *r.Failure != (tool.Failure{Name: "FsError", Code: "FS_NOT_OBSERVED"}) {
			t.Fatalf("%s of an unread file = %q %+v, want the error %q FsError/FS_NOT_OBSERVED", name, r.Text, r.Failure, c.want)
		}
	}
	if got := e.read(t, "settings.txt"); got != "color=blue\nsize=blue\n" {
		t.Fatalf("refused edits changed the file: %q", got)
	}

	e.ok(t, "read", `{"file_path":"settings.txt"}`)
	e.fails(t, "edit", jsonArgs("file_path", "settings.txt", "old_string", "blue", "new_string", "green"),
		`old_string matched 2 times in "settings.txt"`, "replace_all")
	e.fails(t, "edit", jsonArgs("file_path", "settings.txt", "old_string", "red", "new_string", "green"),
		`old_string was not found in "settings.txt"`)
	e.fails(t, "edit", jsonArgs("file_path", "settings.txt", "old_string", "", "new_string", "green"), "must not be empty")
	e.fails(t, "edit", jsonArgs("file_path", "settings.txt", "old_string", "blue", "new_string", "blue"), "the same")

	got := e.ok(t, "edit", jsonArgs("file_path", "settings.txt", "old_string", "color=blue", "new_string", "color=green"))
	if got != "The file "+abs+" has been updated successfully.\n\n@@ -1,1 +1,1 @@\n-color=blue\n+color=green\n" {
		t.Fatalf("unique edit: %q", got)
	}
	// The tool's own change does not make the file stale.
	got = e.ok(t, "edit", jsonArgs("file_path", "settings.txt", "old_string", "blue", "new_string", "red", "replace_all", true))
	if !strings.HasPrefix(got, "The file "+abs+" has been updated. All occurrences were successfully replaced (1).") {
		t.Fatalf("replace_all: %q", got)
	}
	if got := e.read(t, "settings.txt"); got != "color=green\nsize=red\n" {
		t.Fatalf("after edits: %q", got)
	}

	// A change on disk after the read makes the file stale, for edit and
	// write alike, until it is read again.
	time.Sleep(10 * time.Millisecond)
	e.write(t, "settings.txt", "color=green\nsize=huge\n")
	stale := e.call(t, "edit", jsonArgs("file_path", "settings.txt", "old_string", "green", "new_string", "teal"))
	if !stale.IsError || !strings.Contains(stale.Text, `cannot edit "settings.txt": file changed since it was read`) ||
		stale.Failure == nil || stale.Failure.Code != "FS_STALE_VERSION" {
		t.Fatalf("stale edit = %q %+v", stale.Text, stale.Failure)
	}
	e.fails(t, "write", jsonArgs("file_path", "settings.txt", "content", "x"), `cannot write "settings.txt": file changed since it was read`)
	if got := e.read(t, "settings.txt"); got != "color=green\nsize=huge\n" {
		t.Fatalf("stale edits changed the file: %q", got)
	}
	e.ok(t, "read", `{"file_path":"settings.txt"}`)
	e.ok(t, "edit", jsonArgs("file_path", "settings.txt", "old_string", "green", "new_string", "teal"))
	if got := e.read(t, "settings.txt"); got != "color=teal\nsize=huge\n" {
		t.Fatalf("after re-read: %q", got)
	}

	// The policy is per session: another session of the same plugin has
	// read nothing.
	other := *e.facts
	other.ID, other.Session = "a2", "s2"
	r, err := e.h.CallTool(e.ctx, &other, "edit", []byte(jsonArgs("file_path", "settings.txt", "old_string", "teal", "new_string", "x")))
	if err != nil || !r.IsError || !strings.Contains(r.Text, "requires reading") {
		t.Fatalf("other session: %+v, %v", r, err)
	}
}

func TestToolFSEditShapes(t *testing.T) {
	e := loadTool(t, "tool-fs", workspaceRW(), "", 0)
	e.write(t, "crlf.txt", "alpha\r\nbeta\r\ngamma\r\n")
	e.ok(t, "read", `{"file_path":"crlf.txt"}`)
	e.ok(t, "edit", jsonArgs("file_path", "crlf.txt", "old_string", "beta\ngamma", "new_string", "BETA\nGAMMA"))
	if got := e.read(t, "crlf.txt"); got != "alpha\r\nBETA\r\nGAMMA\r\n" {
		t.Fatalf("CRLF kept? %q", got)
	}

	e.write(t, "uni.txt", "naïve café\n日本語のテキスト\n")
	e.ok(t, "read", `{"file_path":"uni.txt"}`)
	got := e.ok(t, "edit", jsonArgs("file_path", "uni.txt", "old_string", "日本語", "new_string", "中文"))
	if !strings.Contains(got, "-日本語のテキスト\n+中文のテキスト") {
		t.Fatalf("unicode diff: %q", got)
	}
	if got := e.read(t, "uni.txt"); got != "naïve café\n中文のテキスト\n" {
		t.Fatalf("unicode edit: %q", got)
	}

	e.write(t, "nonl.txt", "last line")
	e.ok(t, "read", `{"file_path":"nonl.txt"}`)
	e.ok(t, "edit", jsonArgs("file_path", "nonl.txt", "old_string", "line", "new_string", "words"))
	if got := e.read(t, "nonl.txt"); got != "last words" {
		t.Fatalf("no final newline: %q", got)
	}

	e.write(t, "empty.txt", "")
	e.ok(t, "read", `{"file_path":"empty.txt"}`)
	e.fails(t, "edit", jsonArgs("file_path", "empty.txt", "old_string", "x", "new_string", "y"), "not found in")
	e.ok(t, "write", jsonArgs("file_path", "empty.txt", "content", "filled\n"))
	if got := e.read(t, "empty.txt"); got != "filled\n" {
		t.Fatalf("write over empty: %q", got)
	}

	// A multi-line replacement shifts the later hunks' new line numbers.
	e.write(t, "multi.txt", "x\nold\ny\nold\n")
	e.ok(t, "read", `{"file_path":"multi.txt"}`)
	got = e.ok(t, "edit", jsonArgs("file_path", "multi.txt", "old_string", "old", "new_string", "new1\nnew2", "replace_all", true))
	if !strings.Contains(got, "@@ -2,1 +2,2 @@\n-old\n+new1\n+new2\n") || !strings.Contains(got, "@@ -4,1 +5,2 @@\n-old\n+new1\n+new2\n") {
		t.Fatalf("multi-hunk diff: %q", got)
	}
}

func TestToolFSReadOnlyGrant(t *testing.T) {
	e := loadTool(t, "tool-fs", config.Grants{FS: []config.FSGrant{{Path: config.Workspace, Mode: config.ModeRO}}}, "", 0)
	e.write(t, "ro.txt", "data\n")
	e.ok(t, "read", `{"file_path":"ro.txt"}`)
	e.fails(t, "edit", jsonArgs("file_path", "ro.txt", "old_string", "data", "new_string", "x"), `cannot edit "ro.txt"`)
	e.fails(t, "write", jsonArgs("file_path", "new.txt", "content", "x"), `cannot write "new.txt"`)
	if got := e.read(t, "ro.txt"); got != "data\n" {
		t.Fatalf("read-only file changed: %q", got)
	}
}

// TestToolFSHugeFile reads a 100 MB file through a plugin whose memory is
// capped at 64 MiB: the window comes back, with the exact line count, so
// the file was streamed, not loaded; edit refuses it as too large.
func TestToolFSHugeFile(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 100 MB file")
	}
	e := loadTool(t, "tool-fs", workspaceRW(), "", 64*config.MiB)
	const lines = 1_000_000
	line := strings.Repeat("y", 99) + "\n" // 100 bytes
	f, err := os.Create(filepath.Join(e.dir, "huge.log"))
	if err != nil {
		t.Fatal(err)
	}
	block := strings.Repeat(line, 10_000)
	for i := 0; i < lines/10_000; i++ {
		if _, err := f.WriteString(block); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.WriteString("the end\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got := e.ok(t, "read", `{"file_path":"huge.log","limit":2}`)
	if !strings.HasSuffix(got, "2: "+line+"\n(Showing lines 1-2 of 1000001. Use offset=3 to continue.)\n</content>") {
		t.Fatalf("head window of the huge file:\n%.300s", got)
	}
	got = e.ok(t, "read", `{"file_path":"huge.log","offset":1000001}`)
	if !strings.HasSuffix(got, "1000001: the end\n\n(End of file - total 1000001 lines)\n</content>") {
		t.Fatalf("last line of the huge file:\n%.300s", got)
	}
	e.fails(t, "edit", jsonArgs("file_path", "huge.log", "old_string", "the end", "new_string", "fin"), "larger than")
}

func TestToolFSTooLarge(t *testing.T) {
	e := loadTool(t, "tool-fs", workspaceRW(), `{"max_read_file_bytes":10,"max_edit_file_bytes":10}`, 0)
	e.write(t, "big.txt", "0123456789abc\n")
	e.fails(t, "read", `{"file_path":"big.txt"}`, `cannot read "big.txt": 14 bytes is larger than the 10 bytes`)
	e.write(t, "ok.txt", "short\n")
	e.ok(t, "read", `{"file_path":"ok.txt"}`)
	e.write(t, "ok.txt", "now longer than ten\n")
	e.fails(t, "edit", jsonArgs("file_path", "ok.txt", "old_string", "now", "new_string", "then"), "changed since it was read")
	for _, bad := range []string{`{"max_bytes":0}`, `{"read_limit":-1}`, `{"unknown":1}`} {
		if err := loadToolErr(t, "tool-fs", workspaceRW(), bad); err == nil || !strings.Contains(err.Error(), "tool-fs config") {
			t.Errorf("config %s: %v", bad, err)
		}
	}
}

// An edit's result carries its diffs in meta for the front ends, as the
// reference's does: one hunk per group of changes, with up to three
// unchanged lines around them, lines joined without the last newline;
// the model's text is unchanged by it.
func TestToolFSEditDiffMeta(t *testing.T) {
	e := loadTool(t, "tool-fs", workspaceRW(), "", 0)
	var b strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	e.write(t, "f.txt", b.String())
	e.ok(t, "read", `{"file_path":"f.txt"}`)
	type diff struct {
		Path    string  `json:"path"`
		OldText *string `json:"oldText"`
		NewText string  `json:"newText"`
	}
	edit := func(args string) []diff {
		t.Helper()
		r := e.call(t, "edit", args)
		if r.IsError || strings.Contains(r.Text, "diffs") {
			t.Fatalf("edit %s: %q", args, r.Text)
		}
		var m struct{ Diffs []diff }
		if err := json.Unmarshal(r.Meta, &m); err != nil {
			t.Fatalf("edit %s: meta %q: %v", args, r.Meta, err)
		}
		return m.Diffs
	}
	str := func(s string) *string { return &s }
	lines := func(from, to int, sub map[int]string) string {
		var out []string
		for i := from; i <= to; i++ {
			if s, ok := sub[i]; ok {
				out = append(out, s)
				continue
			}
			out = append(out, fmt.Sprintf("line %d", i))
		}
		return strings.Join(out, "\n")
	}
	// One change: three lines of context each side.
	got := edit(jsonArgs("file_path", "f.txt", "old_string", "line 10\n", "new_string", "line ten\n"))
	want := []diff{{"f.txt", str(lines(7, 13, nil)), lines(7, 13, map[int]string{10: "line ten"})}}
	if len(got) != 1 || got[0].Path != want[0].Path || got[0].OldText == nil || *got[0].OldText != *want[0].OldText || got[0].NewText != want[0].NewText {
		t.Errorf("one change: %+v\nwant %+v", got, want)
	}
	// Two changes far apart are two hunks; near the top, the context is
	// cut at the first line.
	e.ok(t, "read", `{"file_path":"f.txt"}`)
	got = edit(jsonArgs("file_path", "f.txt", "old_string", "line 2\n", "new_string", "line two\n"))
	if len(got) != 1 || *got[0].OldText != lines(1, 5, nil) || got[0].NewText != lines(1, 5, map[int]string{2: "line two"}) {
		t.Errorf("change at the top: %+v", got)
	}
	e.ok(t, "read", `{"file_path":"f.txt"}`)
	got = edit(jsonArgs("file_path", "f.txt", "old_string", "line 1", "new_string", "LINE 1", "replace_all", true))
	// "line 1" is in lines 1 and 11 to 19 ("line 1x"): hunks 1-4 and 8-20.
	if len(got) != 2 || *got[0].OldText != lines(1, 4, map[int]string{2: "line two"}) ||
		!strings.HasPrefix(*got[1].OldText, "line 8\nline 9\nline ten\nline 11") || !strings.HasSuffix(got[1].NewText, "LINE 19\nline 20") {
		t.Errorf("replace_all: %d hunks %+v", len(got), got)
	}
}

// An overwrite's result carries the diff against what was there, as the
// reference's does; a new file, or the same content again, carries none
// (the front ends show the content as new).
func TestToolFSWriteDiffMeta(t *testing.T) {
	e := loadTool(t, "tool-fs", workspaceRW(), "", 0)
	var before, after strings.Builder
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&before, "line %d\n", i)
		if i == 5 {
			after.WriteString("line five\n")
			continue
		}
		fmt.Fprintf(&after, "line %d\n", i)
	}
	meta := func(args string) string {
		t.Helper()
		r := e.call(t, "write", args)
		if r.IsError {
			t.Fatalf("write %s: %q", args, r.Text)
		}
		return string(r.Meta)
	}
	if m := meta(jsonArgs("file_path", "new.txt", "content", before.String())); m != "" {
		t.Errorf("a new file's meta = %s, want none", m)
	}
	if m := meta(jsonArgs("file_path", "new.txt", "content", after.String())); m !=
		`{"diffs":[{"path":"new.txt","oldText":"line 2\nline 3\nline 4\nline 5\nline 6\nline 7\nline 8","newText":"line 2\nline 3\nline 4\nline five\nline 6\nline 7\nline 8"}]}` {
		t.Errorf("an overwrite's meta = %s", m)
	}
	if m := meta(jsonArgs("file_path", "new.txt", "content", after.String())); m != "" {
		t.Errorf("the same content again: meta = %s, want none", m)
	}
}

// An edit next to a line longer than a result's meta may hold (a
// minified file, a log line) succeeds, and its result carries no diffs:
// the diff is dropped before any line is copied, never the edit. A diff
// built first and refused after ran the guest out of memory and trapped.
func TestToolFSEditBesideAHugeLine(t *testing.T) {
	e := loadTool(t, "tool-fs", workspaceRW(), `{"max_bytes":1048576}`, 0)
	huge := strings.Repeat("0123456789abcdef ", 10<<20/17)
	e.write(t, "min.js", huge+"\nMARKER_A\n")
	e.ok(t, "read", `{"file_path":"min.js","limit":1}`)
	r := e.call(t, "edit", jsonArgs("file_path", "min.js", "old_string", "MARKER_A", "new_string", "MARKER_B"))
	if r.IsError || !strings.Contains(r.Text, "updated successfully") {
		t.Fatalf("edit beside a 10 MB line: %q", r.Text)
	}
	if len(r.Meta) != 0 {
		t.Errorf("the result carries %d bytes of meta; want none past the meta limit", len(r.Meta))
	}
	b, err := os.ReadFile(filepath.Join(e.dir, "min.js"))
	if err != nil || string(b) != huge+"\nMARKER_B\n" {
		t.Fatalf("the file after the edit: %d bytes, %v", len(b), err)
	}
}
