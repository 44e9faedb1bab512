package guests

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// BenchmarkToolFS runs each fs tool in its Wasm guest, through the real
// host (CallTool), and a native Go implementation of the same operation,
// in one run, so that their ratio is measured on the same machine at the
// same time:
//
//   - read: a 2000-line window from the middle of a 100k-line file;
//   - edit: one exact replacement in a 10 MB file;
//   - write: replacing a 1 MB file.
//
// go test ./guests -run '^$' -bench ToolFS -count 3
func BenchmarkToolFS(b *testing.B) {
	// Bytes are not capped below a 2000-line window of this file.
	e := loadTool(b, "tool-fs", workspaceRW(), `{"max_bytes":1048576}`, 0)
	var sb strings.Builder
	for i := 1; i <= 100_000; i++ {
		fmt.Fprintf(&sb, "line %06d of the benchmark file\n", i)
	}
	e.write(b, "100k.txt", sb.String())
	big := strings.Repeat("0123456789abcdef ", 10<<20/17) + "\nMARKER_A\n" + strings.Repeat("tail of the file\n", 100)
	e.write(b, "10mb.txt", big)
	e.write(b, "1mb.txt", strings.Repeat("x", 1<<20))
	oneMB := jsonArgs("file_path", "1mb.txt", "content", strings.Repeat("y", 1<<20))
	for _, f := range []string{"100k.txt", "10mb.txt", "1mb.txt"} {
		e.ok(b, "read", `{"file_path":"`+f+`","limit":1}`)
	}
	readArgs := `{"file_path":"100k.txt","offset":50000,"limit":2000}`
	want := e.ok(b, "read", readArgs)
	n := newNativeFS(e.dir)
	if got, err := n.read("100k.txt", 50000, 2000); err != nil || got != want {
		b.Fatalf("native read differs from the guest's (%v):\n%.200s\n%.200s", err, got, want)
	}

	b.Run("read/wasm", func(b *testing.B) {
		defer cpuPerOp(b)()
		for b.Loop() {
			if r := e.call(b, "read", readArgs); r.IsError {
				b.Fatal(r.Text)
			}
		}
	})
	b.Run("read/native", func(b *testing.B) {
		defer cpuPerOp(b)()
		for b.Loop() {
			if _, err := n.read("100k.txt", 50000, 2000); err != nil {
				b.Fatal(err)
			}
		}
	})
	edits := [2]string{
		jsonArgs("file_path", "10mb.txt", "old_string", "MARKER_A", "new_string", "MARKER_B"),
		jsonArgs("file_path", "10mb.txt", "old_string", "MARKER_B", "new_string", "MARKER_A"),
	}
	b.Run("edit/wasm", func(b *testing.B) {
		defer cpuPerOp(b)()
		i := 0
		for b.Loop() {
			if r := e.call(b, "edit", edits[i%2]); r.IsError {
				b.Fatal(r.Text)
			}
			i++
		}
		if i%2 == 1 {
			e.ok(b, "edit", edits[1])
		}
	})
	n.seen["10mb.txt"] = true
	b.Run("edit/native", func(b *testing.B) {
		defer cpuPerOp(b)()
		i := 0
		pairs := [2][2]string{{"MARKER_A", "MARKER_B"}, {"MARKER_B", "MARKER_A"}}
		for b.Loop() {
			p := pairs[i%2]
			if err := n.edit("10mb.txt", p[0], p[1]); err != nil {
				b.Fatal(err)
			}
			i++
		}
		if i%2 == 1 {
			n.edit("10mb.txt", "MARKER_B", "MARKER_A")
		}
	})
	writeArgs := []byte(oneMB) // converted once: the copy is not the tool's
	b.Run("write/wasm", func(b *testing.B) {
		defer cpuPerOp(b)()
		for b.Loop() {
			if r, err := e.h.CallTool(e.ctx, e.facts, "write", writeArgs); err != nil || r.IsError {
				b.Fatal(r.Text, err)
			}
		}
	})
	content := strings.Repeat("y", 1<<20)
	n.seen["1mb.txt"] = true
	b.Run("write/native", func(b *testing.B) {
		defer cpuPerOp(b)()
		for b.Loop() {
			if err := n.write("1mb.txt", content); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// cpuPerOp reports the process's CPU time (user and system, every
// thread: host, guest and GC) per operation as cpu-ns/op. On a machine
// shared with other work, wall time per operation swings with the load;
// CPU time swings much less, so the ratios are also given in it.
func cpuPerOp(b *testing.B) func() {
	start := cpuTime()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
	}
}

// nativeFS does what tool-fs does, natively: the baseline of the
// benchmark. seen stands for the session's record of files read.
type nativeFS struct {
	dir  string
	buf  []byte
	seen map[string]bool
}

func newNativeFS(dir string) *nativeFS {
	return &nativeFS{dir: dir, buf: make([]byte, 256<<10), seen: map[string]bool{}}
}

func (n *nativeFS) read(rel string, offset, limit int) (string, error) {
	f, err := os.Open(filepath.Join(n.dir, rel))
	if err != nil {
		return "", err
	}
	defer f.Close()
	var out bytes.Buffer
	// The result names the file by its absolute path, as tool-fs does.
	out.WriteString("<path>" + filepath.Join(n.dir, rel) + "</path>\n<type>file</type>\n<content>\n")
	lines, kept, size, last := 0, 0, 0, 0
	var partial []byte
	for {
		k, rerr := f.Read(n.buf)
		b := n.buf[:k]
		// As the guest does, a chunk wholly before or after the window is
		// only counted, here with bytes.Count's SIMD.
		if c := bytes.Count(b, []byte{'\n'}); k > 0 && (kept >= limit || lines+c < offset-1) {
			lines += c
			if b[len(b)-1] != '\n' {
				partial = append(partial[:0], 'x')
			} else {
				partial = partial[:0]
			}
			b = nil
		}
		for len(b) > 0 {
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				partial = append(partial, b...)
				break
			}
			lines++
			if lines >= offset && kept < limit {
				line := append(partial, b[:i]...)
				line = bytes.TrimSuffix(line, []byte("\r"))
				if len(line) > 2000 && utf8.RuneCount(line) > 2000 {
					line = line[:2000]
				}
				if size+len(line)+1 > 1<<20 {
					kept = limit
				} else {
					size += len(line) + 1
					out.WriteString(strconv.Itoa(lines) + ": ")
					out.Write(line)
					out.WriteByte('\n')
					kept++
					last = lines
				}
			}
			partial = partial[:0]
			b = b[i+1:]
		}
		if rerr == io.EOF || k == 0 {
			break
		}
		if rerr != nil {
			return "", rerr
		}
	}
	if len(partial) > 0 {
		lines++
	}
	fmt.Fprintf(&out, "\n(Showing lines %d-%d of %d. Use offset=%d to continue.)\n</content>", offset, last, lines, last+1)
	n.seen[rel] = true
	return out.String(), nil
}

func (n *nativeFS) edit(rel, old, repl string) error {
	if !n.seen[rel] {
		return errors.New("not read")
	}
	p := filepath.Join(n.dir, rel)
	content, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if bytes.IndexByte(content, 0) >= 0 {
		return errors.New("binary")
	}
	if c := bytes.Count(content, []byte(old)); c != 1 {
		return fmt.Errorf("%d matches", c)
	}
	edited := bytes.Replace(content, []byte(old), []byte(repl), 1)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	if _, err := f.Write(edited); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (n *nativeFS) write(rel, content string) error {
	if !n.seen[rel] {
		return errors.New("not read")
	}
	f, err := os.OpenFile(filepath.Join(n.dir, rel), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
