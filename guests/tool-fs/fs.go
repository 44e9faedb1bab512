//go:build wasip1

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"strconv"
	"syscall"
	"unicode/utf8"

	"github.com/dsh-wasm/dsh-wasm/guests/internal/bulk"
	"github.com/dsh-wasm/dsh-wasm/guests/internal/toolpath"
	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/hostfns/guest"
	"github.com/dsh-wasm/dsh-wasm/hostfns/jsonobj"
)

// target is a file a tool works on: the path as the model gave it (shown
// in results) and the absolute path it resolves to.
type target struct {
	shown, abs string
}

// The last call context and its working directory: an instance serves
// one agent, whose context rarely changes, so it is decoded once.
var (
	lastContext []byte
	lastCwd     string
)

func cwdOf(ctx guest.Context) (string, error) {
	if raw := ctx.Raw(); lastContext == nil || !bytes.Equal(raw, lastContext) {
		facts, err := ctx.Facts()
		if err != nil {
			return "", fmt.Errorf("bad call context: %w", err)
		}
		lastContext, lastCwd = append(lastContext[:0], raw...), facts.Cwd
	}
	return lastCwd, nil
}

func resolve(ctx guest.Context, p string) (target, error) {
	cwd, err := cwdOf(ctx)
	if err != nil {
		return target{}, err
	}
	abs, err := toolpath.Resolve(p, cwd, toolpath.Roots())
	if err != nil {
		return target{}, err
	}
	return target{shown: p, abs: abs}, nil
}

// version identifies one state of a file's content: a write through
// another path changes its size or modification time, a replacement its
// inode.
type version struct {
	Path  string `json:"p"`
	Ino   uint64 `json:"i"`
	Size  int64  `json:"s"`
	Mtime int64  `json:"m"`
}

func versionOf(abs string, fi fs.FileInfo) version {
	v := version{Path: abs, Size: fi.Size(), Mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		v.Ino = st.Ino
	}
	return v
}

// stateKey names a file's recorded version in the session's state: a
// digest, because a path may be longer than a state key.
func stateKey(abs string) string {
	h := sha256.Sum256([]byte(abs))
	return "seen:" + hex.EncodeToString(h[:20])
}

// stateBuf holds state requests, reused: the policy's bookkeeping costs
// no reflection (encoding/json is slow in a Go guest).
var (
	stateBuf []byte
	stateObj jsonobj.Obj
	valueObj jsonobj.Obj
)

// seen returns the version this session last read or wrote of abs.
func seen(abs string) (version, bool, error) {
	b := append(stateBuf[:0], `{"key":`...)
	b = jsonobj.AppendQuote(b, stateKey(abs))
	stateBuf = append(b, '}')
	resp, err := guest.Call(hostfns.FnStateGet, stateBuf)
	if err != nil {
		return version{}, false, err
	}
	if err := stateObj.Parse(resp); err != nil {
		return version{}, false, fmt.Errorf("state_get: %w", err)
	}
	found, ok := stateObj.Lookup("found")
	if !ok {
		return version{}, false, nil
	}
	if f, err := found.Bool(); err != nil || !f {
		return version{}, false, err
	}
	val, ok := stateObj.Lookup("value")
	if !ok || val.Kind() != jsonobj.Object {
		return version{}, false, nil
	}
	if err := valueObj.Parse(val.Raw()); err != nil {
		return version{}, false, fmt.Errorf("state_get: %w", err)
	}
	var v version
	for _, m := range []struct {
		key string
		set func(jsonobj.Value) error
	}{
		{"p", func(x jsonobj.Value) (err error) { v.Path, err = x.Text(); return }},
		{"i", func(x jsonobj.Value) error { n, err := x.Int(); v.Ino = uint64(n); return err }},
		{"s", func(x jsonobj.Value) (err error) { v.Size, err = x.Int(); return }},
		{"m", func(x jsonobj.Value) (err error) { v.Mtime, err = x.Int(); return }},
	} {
		x, ok := valueObj.Lookup(m.key)
		if !ok {
			return version{}, false, nil // an unknown record: as if unread
		}
		if err := m.set(x); err != nil {
			return version{}, false, fmt.Errorf("state_get: %w", err)
		}
	}
	if v.Path != abs {
		return version{}, false, nil
	}
	return v, true, nil
}

func remember(abs string, fi fs.FileInfo) error {
	v := versionOf(abs, fi)
	b := append(stateBuf[:0], `{"key":`...)
	b = jsonobj.AppendQuote(b, stateKey(abs))
	b = append(b, `,"value":{"p":`...)
	b = jsonobj.AppendQuote(b, v.Path)
	b = append(b, `,"i":`...)
	b = strconv.AppendInt(b, int64(v.Ino), 10)
	b = append(b, `,"s":`...)
	b = strconv.AppendInt(b, v.Size, 10)
	b = append(b, `,"m":`...)
	b = strconv.AppendInt(b, v.Mtime, 10)
	stateBuf = append(b, "}}"...)
	_, err := guest.Call(hostfns.FnStateSet, stateBuf)
	return err
}

// ioError turns a WASI failure into a message for the model.
func ioError(verb string, t target, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("cannot %s %q: not found", verb, t.shown)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS), errors.Is(err, syscall.ENOTCAPABLE):
		return fmt.Errorf("cannot %s %q: permission denied (the path may be read-only or lead outside the granted roots)", verb, t.shown)
	case errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("cannot %s %q: it is a directory", verb, t.shown)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("cannot %s %q: %v", verb, t.shown, err)
}

// regular refuses anything but a regular file. WASI has no file type for
// a FIFO ("unknown"), which Go's wasip1 port reports as a mode without
// type bits, that is as a regular file: so the WASI type itself is
// checked, or opening a FIFO would wait for a writer forever.
func regular(verb string, t target, fi fs.FileInfo) error {
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.IsDir():
		return fmt.Errorf("cannot %s %q: it is a directory, not a file", verb, t.shown)
	case !fi.Mode().IsRegular() || st == nil || st.Filetype != syscall.FILETYPE_REGULAR_FILE:
		return fmt.Errorf("cannot %s %q: not a regular file", verb, t.shown)
	}
	return nil
}

// positiveInt reads an optional numeric argument that must be a whole
// number from 1 up.
func positiveInt(args *guest.Args, name string, def int) (int, error) {
	if !args.Has(name) {
		return def, nil
	}
	f, err := args.Float(name)
	if err != nil {
		return 0, err
	}
	if f < 1 || f != math.Trunc(f) || f > math.MaxInt32 {
		return 0, fmt.Errorf("argument %q: must be a positive whole number, not %v", name, f)
	}
	return int(f), nil
}

// chunk is read's buffer, reused between calls: read streams a file
// through it and never holds the file whole.
var chunk = make([]byte, 256<<10)

// windowBuf holds the numbered lines of a read, reused between calls.
var windowBuf []byte

// binarySample is how much of a file's start read inspects for binary
// content.
const binarySample = 8 << 10

// window accumulates the lines read returns.
type window struct {
	offset, limit int
	lines         int // lines seen so far
	kept          int // lines written to out
	lastKept      int // number of the last line written
	bytes         int // output bytes of the kept lines
	capped        bool
	buf           []byte // the numbered lines, written to the result at the end
	line          []byte // the current line's start, when it is in the window
}

func (w *window) wants() bool {
	n := w.lines + 1
	return !w.capped && n >= w.offset && w.kept < w.limit
}

// done reports that no later line can be kept: the rest only counts.
func (w *window) done() bool { return w.capped || w.kept >= w.limit }

// emit adds line number w.lines (just completed) with its text.
func (w *window) emit(text []byte) {
	if n := len(text); n > 0 && text[n-1] == '\r' {
		text = text[:n-1]
	}
	suffix := ""
	if len(text) > cfg.MaxLineLength && utf8.RuneCount(text) > cfg.MaxLineLength {
		cut, runes := 0, 0
		for cut < len(text) && runes < cfg.MaxLineLength {
			_, size := utf8.DecodeRune(text[cut:])
			cut += size
			runes++
		}
		text = text[:cut]
		suffix = "... (line truncated to " + strconv.Itoa(cfg.MaxLineLength) + " chars)"
	}
	size := len(text) + len(suffix)
	if w.kept > 0 {
		size++
	}
	if w.bytes+size > cfg.MaxBytes {
		w.capped = true
		return
	}
	w.bytes += size
	// Appended straight to the window's buffer, the number's digits
	// written by hand: in a Go Wasm guest each call costs more than the
	// bytes it moves, and this runs once per line.
	var digits [20]byte
	d := len(digits)
	for n := w.lines; ; n /= 10 {
		d--
		digits[d] = byte('0' + n%10)
		if n < 10 {
			break
		}
	}
	b := append(w.buf, digits[d:]...)
	b = append(b, ':', ' ')
	b = append(b, text...) // checked for UTF-8 once, when the window is done
	b = append(b, suffix...)
	w.buf = append(b, '\n')
	w.kept++
	w.lastKept = w.lines
}

// lineBufCap bounds the bytes kept of one window line: enough for the
// longest line read returns, in runes of up to 4 bytes, plus one to know
// it was longer.
func lineBufCap() int { return cfg.MaxLineLength*4 + 4 }

func readTool(ctx guest.Context, args *guest.Args, out *guest.Result) error {
	p, err := args.String("file_path")
	if err != nil {
		return err
	}
	offset, err := positiveInt(args, "offset", 1)
	if err != nil {
		return err
	}
	limit, err := positiveInt(args, "limit", cfg.ReadLimit)
	if err != nil {
		return err
	}
	if limit > cfg.ReadLimit {
		return fmt.Errorf("argument \"limit\": at most %d lines per call, not %d; read on with offset", cfg.ReadLimit, limit)
	}
	t, err := resolve(ctx, p)
	if err != nil {
		return err
	}
	// Stat before opening: opening a FIFO would wait for a writer.
	if fi, err := os.Stat(t.abs); err != nil {
		return ioError("read", t, err)
	} else if err := regular("read", t, fi); err != nil {
		return err
	}
	f, err := os.Open(t.abs)
	if err != nil {
		return ioError("read", t, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ioError("read", t, err)
	}
	if err := regular("read", t, fi); err != nil {
		return err
	}
	if fi.Size() > cfg.MaxReadFileBytes {
		return fmt.Errorf("cannot read %q: %d bytes is larger than the %d bytes this tool reads; use a command such as grep or sed to look into it", t.shown, fi.Size(), cfg.MaxReadFileBytes)
	}

	// The result names the file by its absolute path, as the reference's
	// does: the model gets one name for it whatever path it gave.
	out.WriteString("<path>")
	out.WriteString(t.abs)
	out.WriteString("</path>\n<type>file</type>\n<content>\n")
	w := &window{offset: offset, limit: limit, buf: windowBuf[:0], line: chunk[:0:0]}
	defer func() { windowBuf = w.buf[:0] }()
	partial := false // bytes seen since the last newline
	first := true
	for {
		n, rerr := f.Read(chunk)
		b := chunk[:n]
		if first && n > 0 {
			first = false
			sample := b[:min(len(b), binarySample)]
			if bytes.IndexByte(sample, 0) >= 0 || !validPrefix(sample, fi.Size() > int64(len(sample))) {
				return fmt.Errorf("cannot read %q: binary file (this tool reads UTF-8 text only)", t.shown)
			}
		}
		for len(b) > 0 {
			if w.done() {
				w.lines += bulk.Count(b, '\n')
				partial = b[len(b)-1] != '\n'
				break
			}
			// Lines before the window are only counted, a word at a time.
			if need := w.offset - 1 - w.lines; need > 0 {
				i, n := bulk.Nth(b, '\n', need)
				if i < 0 {
					w.lines += n
					partial = b[len(b)-1] != '\n'
					break
				}
				w.lines += need
				partial = false
				b = b[i+1:]
				continue
			}
			i := bulk.Index(b, '\n')
			if i < 0 {
				if w.wants() {
					w.line = appendCapped(w.line, b)
				}
				partial = true
				break
			}
			if w.wants() {
				w.lines++
				if len(w.line) > 0 {
					w.line = appendCapped(w.line, b[:i])
					w.emit(w.line)
					w.line = w.line[:0]
				} else {
					w.emit(b[:i])
				}
			} else {
				w.lines++
				w.line = w.line[:0]
			}
			partial = false
			b = b[i+1:]
		}
		if rerr == io.EOF || n == 0 && rerr == nil {
			break
		}
		if rerr != nil {
			return ioError("read", t, rerr)
		}
	}
	if partial {
		if w.wants() {
			w.lines++
			w.emit(w.line)
		} else {
			w.lines++
		}
	}
	total := w.lines
	if !w.capped && offset > total && !(total == 0 && offset == 1) {
		return fmt.Errorf("offset %d is out of range for %q (%d lines)", offset, t.shown, total)
	}
	out.Write(w.buf)
	end := w.lastKept
	if w.kept == 0 {
		end = offset - 1
	}
	if w.kept > 0 {
		out.WriteString("\n")
	}
	switch {
	case w.capped:
		fmt.Fprintf(out, "(Output capped. Showing lines %d-%d. Use offset=%d to continue.)", offset, end, end+1)
	case end < total:
		fmt.Fprintf(out, "(Showing lines %d-%d of %d. Use offset=%d to continue.)", offset, end, total, end+1)
	default:
		fmt.Fprintf(out, "(End of file - total %d lines)", total)
	}
	out.WriteString("\n</content>")
	// The sample was UTF-8; a later line may not be. The host would mend
	// it too, but the model should see the same as the tool's own check.
	if b := out.Bytes(); !utf8.Valid(b) {
		fixed := bytes.ToValidUTF8(b, []byte("\uFFFD"))
		out.Reset()
		out.Write(fixed)
	}
	if err := remember(t.abs, fi); err != nil {
		return fmt.Errorf("read %q: recording the read: %w", t.shown, err)
	}
	return nil
}

// validPrefix reports whether b is UTF-8, allowing a rune cut at its end
// when more of the file follows.
func validPrefix(b []byte, more bool) bool {
	if utf8.Valid(b) {
		return true
	}
	if !more {
		return false
	}
	for cut := 1; cut <= 3 && cut < len(b); cut++ {
		if utf8.Valid(b[:len(b)-cut]) {
			return true
		}
	}
	return false
}

func appendCapped(line, b []byte) []byte {
	room := lineBufCap() - len(line)
	if room <= 0 {
		return line
	}
	if len(b) > room {
		b = b[:room]
	}
	if len(line) == 0 {
		line = make([]byte, 0, min(lineBufCap(), 4096))
	}
	return append(line, b...)
}

// countNL counts newlines a word at a time.
func countNL(b []byte) int { return bulk.Count(b, '\n') }

// guardWrite checks that the file at t, now at version cur, is the one
// this session last saw: seen at all (else refused, naming verb), and
// unchanged since.
func guardWrite(verb string, t target, cur version) error {
	prev, ok, err := seen(t.abs)
	if err != nil {
		return fmt.Errorf("cannot %s %q: reading the session's record: %w", verb, t.shown, err)
	}
	return checkSeen(verb, t, prev, ok, cur)
}

// checkSeen refuses a change to a file this session has not read
// (FS_NOT_OBSERVED, worded as the reference's, naming the absolute path)
// or that changed since (FS_STALE_VERSION).
func checkSeen(verb string, t target, prev version, ok bool, cur version) error {
	if !ok {
		err := fmt.Errorf("cannot overwrite existing %q without reading it first", t.abs)
		if verb == "edit" {
			err = fmt.Errorf("edit requires reading %q first", t.abs)
		}
		return &guest.ToolError{Name: "FsError", Code: "FS_NOT_OBSERVED", Err: err}
	}
	if prev != cur {
		return &guest.ToolError{Name: "FsError", Code: "FS_STALE_VERSION",
			Err: fmt.Errorf("cannot %s %q: file changed since it was read — re-read the file, then retry", verb, t.shown)}
	}
	return nil
}

// replaceContent writes content over the file at t after checking, once
// more, that it is still at version want: the version-guarded write. It
// writes in place, so the file keeps its inode and permissions (wasip1
// cannot set a new file's mode).
func replaceContent(verb string, t target, want version, content []byte) (fs.FileInfo, error) {
	f, err := os.OpenFile(t.abs, os.O_WRONLY, 0)
	if err != nil {
		return nil, ioError(verb, t, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, ioError(verb, t, err)
	}
	if versionOf(t.abs, fi) != want {
		return nil, fmt.Errorf("cannot %s %q: file changed since it was read — re-read the file, then retry", verb, t.shown)
	}
	if err := f.Truncate(0); err != nil {
		return nil, ioError(verb, t, err)
	}
	if _, err := f.WriteAt(content, 0); err != nil {
		return nil, ioError(verb, t, err)
	}
	if fi, err = f.Stat(); err != nil {
		return nil, ioError(verb, t, err)
	}
	return fi, nil
}

func writeTool(ctx guest.Context, args *guest.Args, out *guest.Result) error {
	p, err := args.String("file_path")
	if err != nil {
		return err
	}
	content, err := args.Bytes("content")
	if err != nil {
		return err
	}
	t, err := resolve(ctx, p)
	if err != nil {
		return err
	}
	verb := "Updated"
	var meta json.RawMessage
	fi, err := os.Stat(t.abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		verb = "Created"
		if err := os.MkdirAll(path.Dir(t.abs), 0o755); err != nil {
			return ioError("write", t, err)
		}
		f, err := os.OpenFile(t.abs, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return ioError("write", t, err)
		}
		_, werr := f.Write(content)
		if werr == nil {
			fi, werr = f.Stat()
		}
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return ioError("write", t, werr)
		}
	case err != nil:
		return ioError("write", t, err)
	default:
		if err := regular("write", t, fi); err != nil {
			return err
		}
		cur := versionOf(t.abs, fi)
		if err := guardWrite("write", t, cur); err != nil {
			return err
		}
		// The front ends show an overwrite as its diff against what
		// was there, when that is small enough to diff.
		var before []byte
		if fi.Size() <= maxWriteDiffBytes {
			before, _ = os.ReadFile(t.abs)
		}
		if fi, err = replaceContent("write", t, cur, content); err != nil {
			return err
		}
		if before != nil {
			if c, ok := lineChange(before, content); ok {
				meta = diffMeta(hunks(p, before, content, []change{c}))
			}
		}
	}
	if err := remember(t.abs, fi); err != nil {
		return fmt.Errorf("write %q: recording the write: %w", t.shown, err)
	}
	fmt.Fprintf(out, "<path>%s</path>\n<type>file</type>\n<content>\n%s file\n</content>", t.abs, verb)
	if meta != nil {
		out.SetMeta(meta)
	}
	return nil
}

// editBuf holds the file edit works on, and editOut the edited content,
// reused between calls.
var editBuf, editOut []byte

func editTool(ctx guest.Context, args *guest.Args, out *guest.Result) error {
	p, err := args.String("file_path")
	if err != nil {
		return err
	}
	oldS, err := args.Bytes("old_string")
	if err != nil {
		return err
	}
	newS, err := args.Bytes("new_string")
	if err != nil {
		return err
	}
	replaceAll := false
	if args.Has("replace_all") {
		if replaceAll, err = args.Bool("replace_all"); err != nil {
			return err
		}
	}
	if len(oldS) == 0 {
		return errors.New("argument \"old_string\": must not be empty")
	}
	if bytes.Equal(oldS, newS) {
		return errors.New("old_string and new_string are the same: nothing to change")
	}
	t, err := resolve(ctx, p)
	if err != nil {
		return err
	}
	// The session must have seen the file before anything about it is
	// told: an unread file is refused whether it exists or not.
	prev, ok, err := seen(t.abs)
	if err != nil {
		return fmt.Errorf("cannot edit %q: reading the session's record: %w", t.shown, err)
	}
	if !ok {
		return checkSeen("edit", t, prev, ok, version{})
	}
	// Stat before opening: opening a FIFO would wait for a writer.
	if fi, err := os.Stat(t.abs); err != nil {
		return ioError("edit", t, err)
	} else if err := regular("edit", t, fi); err != nil {
		return err
	}
	f, err := os.Open(t.abs)
	if err != nil {
		return ioError("edit", t, err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = regular("edit", t, fi)
	}
	if err != nil {
		f.Close()
		if _, ok := err.(*fs.PathError); ok {
			return ioError("edit", t, err)
		}
		return err
	}
	cur := versionOf(t.abs, fi)
	if err := checkSeen("edit", t, prev, ok, cur); err != nil {
		f.Close()
		return err
	}
	if fi.Size() > cfg.MaxEditFileBytes {
		f.Close()
		return fmt.Errorf("cannot edit %q: %d bytes is larger than the %d bytes this tool edits", t.shown, fi.Size(), cfg.MaxEditFileBytes)
	}
	content, err := readAll(f, fi.Size())
	f.Close()
	if err != nil {
		return ioError("edit", t, err)
	}
	crlf, binary := scanEndings(content)
	if binary {
		return fmt.Errorf("cannot edit %q: binary file", t.shown)
	}
	if crlf {
		content = bytes.ReplaceAll(content, []byte("\r\n"), []byte("\n"))
		oldS = bytes.ReplaceAll(oldS, []byte("\r\n"), []byte("\n"))
		newS = bytes.ReplaceAll(newS, []byte("\r\n"), []byte("\n"))
	}
	matches := matchOffsets(content, oldS)
	if len(matches) == 0 {
		return fmt.Errorf("old_string was not found in %q", t.shown)
	}
	if len(matches) > 1 && !replaceAll {
		return fmt.Errorf("old_string matched %d times in %q; provide a more specific old_string or set replace_all to true", len(matches), t.shown)
	}
	edited := replaceAt(content, matches, oldS, newS)
	// The front ends show the edit as diffs (lines with LF endings).
	meta := diffMeta(hunks(p, content, edited, editChanges(content, edited, matches, oldS, newS)))
	if crlf {
		edited = bytes.ReplaceAll(edited, []byte("\n"), []byte("\r\n"))
	}
	fi, err = replaceContent("edit", t, cur, edited)
	if err != nil {
		return err
	}
	if err := remember(t.abs, fi); err != nil {
		return fmt.Errorf("edit %q: recording the edit: %w", t.shown, err)
	}
	if replaceAll {
		fmt.Fprintf(out, "The file %s has been updated. All occurrences were successfully replaced (%d).", t.abs, len(matches))
	} else {
		fmt.Fprintf(out, "The file %s has been updated successfully.", t.abs)
	}
	if meta != nil {
		out.SetMeta(meta)
	}
	writeDiff(out, content, matches, oldS, newS)
	return nil
}

// readAll reads the open file f of size bytes into editBuf.
func readAll(f *os.File, size int64) ([]byte, error) {
	if int64(cap(editBuf)) < size+1 {
		editBuf = make([]byte, size+1)
	}
	b := editBuf[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF || n == 0 && err == nil {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// scanEndings reports whether b has a CR LF line ending and whether it
// has a NUL byte (binary), in one pass while no CR LF is found.
func scanEndings(b []byte) (crlf, binary bool) {
	for i := 0; ; {
		j := bulk.Index2(b[i:], 0, '\r')
		if j < 0 {
			return false, false
		}
		i += j
		if b[i] == 0 {
			return false, true
		}
		i++
		if i < len(b) && b[i] == '\n' {
			return true, bulk.Index(b[i:], 0) >= 0
		}
	}
}

// matchOffsets returns where old occurs in content, without overlaps.
func matchOffsets(content, old []byte) []int {
	var at []int
	for i := 0; ; {
		j := bulk.IndexString(content[i:], old)
		if j < 0 {
			return at
		}
		at = append(at, i+j)
		i += j + len(old)
	}
}

// replaceAt builds content with each match of old replaced by repl, in
// one allocation.
func replaceAt(content []byte, at []int, old, repl []byte) []byte {
	size := len(content) + len(at)*(len(repl)-len(old))
	if cap(editOut) < size {
		editOut = make([]byte, 0, size)
	}
	out := editOut[:0]
	prev := 0
	for _, i := range at {
		out = append(out, content[prev:i]...)
		out = append(out, repl...)
		prev = i + len(old)
	}
	return append(out, content[prev:]...)
}

// Diff limits: the edit's answer shows a few hunks of a few lines.
const (
	diffHunks     = 3
	diffLines     = 12
	diffLineBytes = 200
)

// writeDiff appends a short diff of the replacements: for each of the
// first few, the whole lines the match touched, before and after, with
// their line numbers.
func writeDiff(out *guest.Result, content []byte, at []int, old, repl []byte) {
	out.WriteString("\n")
	shift := countNL(repl) - countNL(old) // line shift per replacement
	line, pos := 1, 0
	for k, i := range at {
		if k == diffHunks {
			fmt.Fprintf(out, "\n(%d more replacements not shown)", len(at)-k)
			break
		}
		line += countNL(content[pos:i])
		pos = i
		start := bytes.LastIndexByte(content[:i], '\n') + 1
		end := i + len(old)
		if e := bytes.IndexByte(content[end:], '\n'); e >= 0 {
			end += e
		} else {
			end = len(content)
		}
		before := content[start:end]
		after := make([]byte, 0, len(before)+len(repl))
		after = append(after, content[start:i]...)
		after = append(after, repl...)
		after = append(after, content[i+len(old):end]...)
		oldN, newN := countNL(before)+1, countNL(after)+1
		newLine := line + k*shift
		fmt.Fprintf(out, "\n@@ -%d,%d +%d,%d @@\n", line, oldN, newLine, newN)
		diffSide(out, '-', before)
		diffSide(out, '+', after)
	}
}

func diffSide(out *guest.Result, mark byte, text []byte) {
	for n := 0; ; n++ {
		if n == diffLines {
			fmt.Fprintf(out, "%c…\n", mark)
			return
		}
		i := bytes.IndexByte(text, '\n')
		l := text
		if i >= 0 {
			l = text[:i]
		}
		if len(l) > diffLineBytes {
			cut := diffLineBytes
			for cut > 0 && !utf8.RuneStart(l[cut]) {
				cut--
			}
			l = append(l[:cut:cut], "…"...)
		}
		out.Write([]byte{mark})
		out.Write(l)
		out.WriteString("\n")
		if i < 0 {
			return
		}
		text = text[i+1:]
	}
}
