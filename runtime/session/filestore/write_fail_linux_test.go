package filestore

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// A write the disk refuses (here: past the file size limit) is cut off
// again, and the events stay pending: the session is not broken, and the
// next Flush writes them.
func TestWriteFailureKeepsEventsPending(t *testing.T) {
	store, _ := newTestStore(t)
	s, err := store.Create(session.Header{ID: "w"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fi, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 64<<10)
	mustAppend(t, s, session.NewEvent(session.UserMessage{Content: session.TextContent(big), Source: session.Source{Kind: session.SourceUser}}))

	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Skip(err)
	}
	lim := old
	lim.Cur = uint64(fi.Size()) + 1024
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Skip(err)
	}
	ferr := s.Flush()
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(ferr, session.ErrNotStored) || errors.Is(ferr, session.ErrBroken) {
		t.Fatalf("Flush past the size limit: %v", ferr)
	}
	if got, err := os.Stat(s.Path()); err != nil || got.Size() != fi.Size() {
		t.Fatalf("file after the failed write: %v, %v (want %d bytes)", got.Size(), err, fi.Size())
	}
	if err := s.Flush(); err != nil {
		t.Fatalf("Flush after the limit was lifted: %v", err)
	}
	log, err := session.ReadFile(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if len(log.Events) != 1 || log.Recovery.Repaired() {
		t.Fatalf("%d events, recovery %s", len(log.Events), log.Recovery)
	}
}
