//go:build unix

package fsjail

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"golang.org/x/sys/unix"
)

// promptly runs fn and fails the test if it has not returned within a
// generous bound. Past it, the FIFO at fifo is opened for reading and
// writing and closed a second later, again and again until fn returns, so
// that whatever a broken jail blocks on (an open, a read, a write) ends
// and the test fails instead of hanging.
func promptly(t *testing.T, what, fifo string, fn func()) {
	t.Helper()
	var hung atomic.Bool
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
			return
		case <-time.After(10 * time.Second):
		}
		hung.Store(true)
		for {
			f, err := os.OpenFile(fifo, os.O_RDWR|unix.O_NONBLOCK, 0)
			select {
			case <-done:
			case <-time.After(time.Second):
			}
			if err == nil {
				f.Close()
			}
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	fn()
	close(done)
	if hung.Load() {
		t.Fatalf("%s blocked until the other end opened", what)
	}
}

// TestSpecialFilesRefused: a FIFO in a granted directory (made by a command
// the plugin ran, say) would block an open until its other end opens, and
// with it the host thread and every lock held. The jail opens without
// blocking and serves only regular files, directories and symlinks: a FIFO
// or a socket fails at once, for reads and writes, through the sys.FS and
// through a WASI guest. Regular files keep working, and are blocking.
func TestSpecialFilesRefused(t *testing.T) {
	fx := newFixture(t)
	fifo := filepath.Join(fx.rootDir, "fifo")
	if err := unix.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(fx.rootDir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	for _, tc := range []struct {
		name string
		flag experimentalsys.Oflag
	}{
		{"fifo", oRDONLY},
		{"fifo", oWRONLY},
		{"fifo", oRDWR},
		{"fifo", oRDONLY | oNOFOLLOW},
		{"sock", oRDONLY},
		{"sock", oWRONLY},
	} {
		var errno experimentalsys.Errno
		promptly(t, "opening "+tc.name, fifo, func() { errno = openErrno(fx.work, tc.name, tc.flag) })
		if errno == 0 {
			t.Errorf("open %s (flags %#x) succeeded; want it refused", tc.name, tc.flag)
		}
	}
	// Read-only opens, which the kernel would otherwise let through, are
	// refused by the file-type check itself.
	if errno := openErrno(fx.work, "fifo", oRDWR); errno != experimentalsys.ENOTSUP {
		t.Errorf("open fifo O_RDWR: %v, want ENOTSUP", errno)
	}

	// The control: a regular file opens, and is left blocking.
	f, errno := fx.work.OpenFile("hello.txt", oRDONLY, 0)
	if errno != 0 {
		t.Fatalf("open hello.txt: %v", errno)
	}
	fl, err := unix.FcntlInt(f.(*file).f.Fd(), unix.F_GETFL, 0)
	f.Close()
	if err != nil || fl&unix.O_NONBLOCK != 0 {
		t.Errorf("hello.txt's descriptor flags %#x (%v): O_NONBLOCK left set", fl, err)
	}

	// Through WASI: Go's os.ReadFile and os.WriteFile call path_open.
	var results []string
	promptly(t, "a WASI guest opening the FIFO", fifo, func() {
		results, _ = runGuest(t, fx.jail.FSConfig(), []string{"read|/work/fifo", "write|/work/fifo|x", "read|/work/sock", "read|/work/hello.txt"})
	})
	for i, want := range []string{"ERR ", "ERR ", "ERR ", "OK "} {
		if !strings.HasPrefix(results[i], want) {
			t.Errorf("guest command %d: %q, want %q…", i, results[i], want)
		}
	}
}
