package toolpath

import (
	"errors"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	roots := []string{"/work/proj", "/data"}
	tests := []struct {
		p, cwd, want, err string
	}{
		{"a.txt", "/work/proj", "/work/proj/a.txt", ""},
		{"./sub/../b.txt", "/work/proj", "/work/proj/b.txt", ""},
		{"/data/x", "/work/proj", "/data/x", ""},
		{"/work/proj", "/work/proj", "/work/proj", ""},
		{"../other/a", "/work/proj", "", "outside the granted roots"},
		{"/work/project2/a", "/work/proj", "", "outside the granted roots"},
		{"/etc/passwd", "/work/proj", "", "/etc/passwd, outside"},
		{"a.txt", "", "", "needs a working directory"},
		{"  ", "/work/proj", "", "empty"},
		{"a\x00b", "/work/proj", "", "NUL"},
	}
	for _, tc := range tests {
		got, err := Resolve(tc.p, tc.cwd, roots)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Resolve(%q, %q) = %q, %v; want error containing %q", tc.p, tc.cwd, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Resolve(%q, %q) = %q, %v; want %q", tc.p, tc.cwd, got, err, tc.want)
		}
	}
	if _, err := Resolve("/x", "/", nil); !errors.Is(err, ErrOutsideRoots) {
		t.Errorf("no roots: %v", err)
	}
}
