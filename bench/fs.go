package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/guests"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

// fsRows runs builtin:tool-fs through the host and a native Go version of
// the same operation on the same files: a 2000-line window from the
// middle of a 100k-line file, and one exact replacement in a 10 MB file
// (alternating two edits so the file returns to its start).
func fsRows(c bconfig) ([]*row, error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dsh-bench-fs-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return nil, err
	}
	var sb strings.Builder
	for i := 1; i <= 100_000; i++ {
		fmt.Fprintf(&sb, "line %06d of the benchmark file\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, "100k.txt"), []byte(sb.String()), 0o644); err != nil {
		return nil, err
	}
	big := strings.Repeat("0123456789abcdef ", 10<<20/17) + "\nMARKER_A\n" + strings.Repeat("tail of the file\n", 100)
	if err := os.WriteFile(filepath.Join(dir, "10mb.txt"), []byte(big), 0o644); err != nil {
		return nil, err
	}
	cch, err := cache()
	if err != nil {
		return nil, err
	}
	spec, err := plugin.SpecFromEntry("", config.Entry{Source: "builtin:tool-fs",
		Grants: config.Grants{FS: []config.FSGrant{{Path: config.Workspace, Mode: config.ModeRW}}}})
	if err != nil {
		return nil, err
	}
	spec.Config = json.RawMessage(`{"max_bytes":1048576}`)
	h, err := plugin.New(plugin.Options{Registry: prompt.NewRegistry(nil), Builtins: guests.All(), Cache: cch, Logger: discard()})
	if err != nil {
		return nil, err
	}
	defer h.Close(ctx)
	if _, err := h.Load(ctx, spec); err != nil {
		return nil, fmt.Errorf("load builtin:tool-fs: %w", err)
	}
	facts := &prompt.AgentFacts{ID: "a1", Session: "s1", Model: "m", Cwd: dir}
	actx := prompt.WithAgent(ctx, facts)
	tool := func(name, args string) (string, error) {
		r, err := h.CallTool(actx, facts, name, []byte(args))
		if err != nil {
			return "", err
		}
		if r.IsError {
			return "", fmt.Errorf("%s: %s", name, r.Text)
		}
		return r.Text, nil
	}
	readArgs := `{"file_path":"100k.txt","offset":50000,"limit":2000}`
	got, err := tool("read", readArgs)
	if err != nil {
		return nil, err
	}
	nat, err := nativeRead(filepath.Join(dir, "100k.txt"), 50000, 2000)
	if err != nil {
		return nil, err
	}
	for _, want := range []string{"line 050000 of", "line 051999 of"} {
		if !strings.Contains(got, want) || !strings.Contains(nat, want) {
			return nil, fmt.Errorf("read window lacks %q", want)
		}
	}
	if strings.Contains(got, "line 052000 of") || strings.Contains(nat, "line 052000 of") {
		return nil, fmt.Errorf("read window runs past its limit")
	}
	group := "fs tools: read a 2000-line window of a 100k-line file"
	rb := &row{group: group, name: "native Go", unit: "time"}
	rw := &row{group: group, name: "tool-fs in Wasm", unit: "time", base: rb.name}
	n := min(c.perCall, 200)
	d, cpu, err := sample(n, func() error { _, err := nativeRead(filepath.Join(dir, "100k.txt"), 50000, 2000); return err })
	if err != nil {
		return nil, err
	}
	rb.samples, rb.cpu = durs(d), float64(cpu)
	d, cpu, err = sample(n, func() error { _, err := tool("read", readArgs); return err })
	if err != nil {
		return nil, err
	}
	rw.samples, rw.cpu = durs(d), float64(cpu)

	group2 := "fs tools: one exact edit in a 10 MB file"
	eb := &row{group: group2, name: "native Go", unit: "time"}
	ew := &row{group: group2, name: "tool-fs in Wasm", unit: "time", base: eb.name}
	marks := [2][2]string{{"MARKER_A", "MARKER_B"}, {"MARKER_B", "MARKER_A"}}
	i := 0
	ne := min(n, 50)
	if !c.quick {
		ne = max(ne, 20)
	}
	d, cpu, err = sample(ne, func() error {
		m := marks[i%2]
		i++
		return nativeEdit(filepath.Join(dir, "10mb.txt"), m[0], m[1])
	})
	if err != nil {
		return nil, err
	}
	eb.samples, eb.cpu = durs(d), float64(cpu)
	if i%2 == 1 {
		if err := nativeEdit(filepath.Join(dir, "10mb.txt"), "MARKER_B", "MARKER_A"); err != nil {
			return nil, err
		}
	}
	// The edit tool edits only a file the agent has read since it last
	// changed (the native edits above changed it).
	if _, err := tool("read", `{"file_path":"10mb.txt","limit":1}`); err != nil {
		return nil, err
	}
	i = 0
	d, cpu, err = sample(ne, func() error {
		m := marks[i%2]
		i++
		a, _ := json.Marshal(map[string]string{"file_path": "10mb.txt", "old_string": m[0], "new_string": m[1]})
		_, err := tool("edit", string(a))
		return err
	})
	if err != nil {
		return nil, err
	}
	ew.samples, ew.cpu = durs(d), float64(cpu)
	b, err := os.ReadFile(filepath.Join(dir, "10mb.txt"))
	if err != nil {
		return nil, err
	}
	if want := "MARKER_" + "AB"[i%2:i%2+1]; !bytes.Contains(b, []byte("\n"+want+"\n")) || len(b) != len(big) {
		return nil, fmt.Errorf("after %d edits the file lacks %s", i, want)
	}
	return []*row{rb, rw, eb, ew}, nil
}

// nativeRead returns lines offset..offset+limit-1 (1-based), numbered.
func nativeRead(path string, offset, limit int) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var out strings.Builder
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; s.Scan(); n++ {
		if n >= offset+limit {
			break
		}
		if n >= offset {
			out.WriteString(strconv.Itoa(n))
			out.WriteString(": ")
			out.Write(s.Bytes())
			out.WriteByte('\n')
		}
	}
	return out.String(), s.Err()
}

// nativeEdit replaces the one occurrence of old with new, refusing none or
// several, as the edit tool does, and writes the file through a temporary
// file and a rename.
func nativeEdit(path, old, new string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if c := bytes.Count(b, []byte(old)); c != 1 {
		return fmt.Errorf("%s occurs %d times in %s", old, c, path)
	}
	b = bytes.Replace(b, []byte(old), []byte(new), 1)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
