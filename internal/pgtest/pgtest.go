// Package pgtest gives tests a real PostgreSQL server: the one named by
// DSH_TEST_POSTGRES_DSN, or one this package starts with .ci/postgres
// (Debian's postgresql package, run as an unprivileged user in a temp
// dir, loopback only) and stops when the tests end. Each DB call makes a
// fresh database, so tests do not see each other's sessions.
//
// Without a server the tests skip, except under CI=true, where they fail.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/jackc/pgx/v5"
)

// EnvDSN names a server to use instead of starting one.
const EnvDSN = "DSH_TEST_POSTGRES_DSN"

var (
	once     sync.Once
	adminDSN string
	startErr error
	dataDir  string
	script   string
)

// Main runs the tests and stops the server pgtest started, if any. Call
// it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop stops the server pgtest started, if any; for a TestMain that does
// more than Main.
func Stop() {
	if dataDir != "" {
		_ = exec.Command(script, "stop", filepath.Join(dataDir, "pg")).Run()
		_ = os.RemoveAll(dataDir)
		dataDir = ""
	}
}

func start() {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		adminDSN = dsn
		return
	}
	root, err := guestbuild.ModuleRoot()
	if err != nil {
		startErr = err
		return
	}
	script = filepath.Join(root, ".ci", "postgres")
	dir, err := os.MkdirTemp("", "dsh-pgtest-")
	if err != nil {
		startErr = err
		return
	}
	// As root the script runs the server as the postgres user, which must
	// reach the data directory inside dir.
	if err := os.Chmod(dir, 0o711); err != nil {
		startErr = err
		return
	}
	dataDir = dir
	cmd := exec.Command(script, "start", filepath.Join(dir, "pg"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		startErr = fmt.Errorf("pgtest: .ci/postgres start: %w: %s", err, strings.TrimSpace(stderr.String()))
		return
	}
	adminDSN = strings.TrimSpace(string(out))
}

// DB returns the DSN of a new, empty database on the test server. It
// skips the test when no server can be had, or fails it under CI=true.
func DB(t testing.TB) string {
	t.Helper()
	once.Do(start)
	if startErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL is required under CI=true: %v", startErr)
		}
		t.Skipf("no PostgreSQL server: %v", startErr)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	cfg, err := pgx.ParseConfig(adminDSN)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
}
