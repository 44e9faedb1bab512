//go:build linux

package execjail

import (
	"context"
	"os/exec"
	"testing"
)

// BenchmarkRun measures what starting a command costs: a bare os/exec of
// true (the baseline) against Manager.Run in the best mode, which adds the
// launch helper (a re-exec of this binary), the namespaces and cgroups.
// Compare the two in one run: go test -bench Run -benchtime 200x.
func BenchmarkRun(b *testing.B) {
	path, err := exec.LookPath("true")
	if err != nil {
		b.Skip(err)
	}
	b.Run("os-exec", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command(path).Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("manager", func(b *testing.B) {
		m, err := NewManager(Options{Roots: []Root{{Path: b.TempDir()}}, Env: []string{testPath}})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		for b.Loop() {
			if res, err := m.Run(context.Background(), Command{Argv: []string{path}}); err != nil || res.ExitCode != 0 {
				b.Fatal(res, err)
			}
		}
	})
}
