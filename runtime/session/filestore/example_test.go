package filestore_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/session/filestore"
)

// A store over a directory: sessions land in one file each, grouped by
// working directory, and List reads their headers back.
func ExampleNew() {
	root, err := os.MkdirTemp("", "sessions")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	store := filestore.New(root, filestore.Options{
		Now: func() time.Time { return time.UnixMilli(1_700_000_000_000) },
	})

	s, err := store.Create(session.Header{ID: "first", Cwd: "/home/me/project"})
	if err != nil {
		log.Fatal(err)
	}
	rel, _ := filepath.Rel(root, s.Path())
	fmt.Println(filepath.ToSlash(rel))
	if err := s.Close(); err != nil {
		log.Fatal(err)
	}

	headers, err := store.List()
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range headers {
		fmt.Println(h.ID, h.Cwd, h.CreatedAt)
	}
	// Output:
	// cwd-225df3094012/first.jsonl
	// first /home/me/project 1700000000000
}
