package filestore

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// Every corpus file written back through a Store (header and events as
// the initial events of Create) is the same file, byte for byte.
func TestCorpusRoundTripThroughStore(t *testing.T) {
	for _, path := range corpusFiles(t) {
		t.Run(relName(path), func(t *testing.T) {
			log, err := session.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// A clock at the epoch keeps a recorded createdAt of 0.
			store := New(t.TempDir(), Options{Now: func() time.Time { return time.UnixMilli(0) }})
			s, err := store.Create(log.Header, log.Events...)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			want, _ := os.ReadFile(path)
			got, err := os.ReadFile(s.Path())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("written file differs from %s", path)
			}
			// And reopening it for appending changes nothing.
			s, err = store.Open(log.Header.ID)
			if err != nil {
				t.Fatal(err)
			}
			if s.Recovery().Repaired() {
				t.Errorf("repairs on reopen: %s", s.Recovery())
			}
			reopened := s.Events()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if len(reopened) != len(log.Events) {
				t.Fatalf("reopened %d events, want %d", len(reopened), len(log.Events))
			}
			for i := range reopened {
				a, _ := reopened[i].MarshalJSON()
				b, _ := log.Events[i].MarshalJSON()
				if !bytes.Equal(a, b) {
					t.Fatalf("event %d after reopen:\n%s\nwant\n%s", i, a, b)
				}
			}
		})
	}
}
