package pgtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
)

// Server is a PostgreSQL server of one test's own, started with
// .ci/postgres in its own temp directory: a test may stop and resume it
// without disturbing any other test.
type Server struct {
	// DSN names the server's default database.
	DSN    string
	script string
	dir    string
}

// Own starts a server for t alone and stops it when t ends. It skips t
// when PostgreSQL is not installed, or fails it under CI=true.
func Own(t testing.TB) *Server {
	t.Helper()
	root, err := guestbuild.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "dsh-pgown-")
	if err != nil {
		t.Fatal(err)
	}
	// As root the script runs the server as the postgres user, which must
	// reach the data directory inside dir.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	s := &Server{script: filepath.Join(root, ".ci", "postgres"), dir: filepath.Join(dir, "pg")}
	t.Cleanup(func() {
		_ = exec.Command(s.script, "stop", s.dir).Run()
		_ = os.RemoveAll(dir)
	})
	out, err := s.run("start")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL is required under CI=true: %v", err)
		}
		t.Skipf("no PostgreSQL server: %v", err)
	}
	s.DSN = strings.TrimSpace(out)
	return s
}

func (s *Server) run(verb string) (string, error) {
	cmd := exec.Command(s.script, verb, s.dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("pgtest: .ci/postgres %s: %w: %s", verb, err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// Stop stops the server at once (as a crash would: no checkpoint),
// keeping its data.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if _, err := s.run("stop"); err != nil {
		t.Fatal(err)
	}
}

// Resume starts the stopped server again, on the same port.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	if _, err := s.run("resume"); err != nil {
		t.Fatal(err)
	}
}
