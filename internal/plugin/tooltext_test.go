package plugin

import (
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"
)

// A tool's text reaches the model as valid UTF-8 whatever bytes the guest
// returns: each invalid sequence becomes U+FFFD, valid text is kept as is.
func TestToolTextIsRepairedToUTF8(t *testing.T) {
	h := newHost(t)
	ws := t.TempDir()
	files := map[string]struct{ in, want string }{
		"bad.txt":   {"ok \xff\xfe then \xc3 end \xed\xa0\x80", "ok \uFFFD then \uFFFD end \uFFFD"},
		"good.txt":  {"héllo, 世界 \U0001F600", "héllo, 世界 \U0001F600"},
		"trunc.txt": {"cut \xe4\xb8", "cut \uFFFD"},
	}
	for name, f := range files {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(f.in), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	loadEntry(t, h, "source: "+testkit(t)+`
config: {tools: [readfile]}
grants:
  fs: [{path: workspace, mode: ro}]
`)
	a := agent("a", "m")
	a.Cwd = ws
	for name, f := range files {
		r, err := h.CallTool(bg, a, "readfile", []byte(filepath.Join(ws, name)))
		if err != nil || r.IsError {
			t.Fatalf("%s: %+v, %v", name, r, err)
		}
		if !utf8.ValidString(r.Text) || r.Text != f.want {
			t.Errorf("%s: text %q, want %q", name, r.Text, f.want)
		}
	}
	// validText on its own, including a result that is all invalid.
	for in, want := range map[string]string{"": "", "\xff": "\uFFFD", "\xff\xff": "\uFFFD", "a\x80b": "a\uFFFDb"} {
		if got := validText([]byte(in)); got != want {
			t.Errorf("validText(%q) = %q, want %q", in, got, want)
		}
	}
}
