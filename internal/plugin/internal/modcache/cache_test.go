package modcache

import (
	"bytes"
	"os"
	"testing"
)

// TestStoreChecksEntries: an entry reads back as stored, and one whose
// object no longer hashes to its name is dropped, not returned.
func TestStoreChecksEntries(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	s.Put("k", []byte("hello"))
	b, release, ok := s.Get("k", 1<<10)
	if !ok || !bytes.Equal(b, []byte("hello")) {
		t.Fatalf("Get = %q, %v; want the stored bytes", b, ok)
	}
	release()
	if _, _, ok := s.Get("k", 4); ok {
		t.Fatal("an entry longer than max was returned")
	}
	s.Put("k", []byte("hello"))
	obj := s.ObjPath(s.Ref("k"))
	if err := os.WriteFile(obj, []byte("jello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _, ok := s.Get("k", 1<<10); ok {
		t.Fatalf("a changed entry was returned: %q", b)
	}
	if s.Ref("k") != "" {
		t.Fatal("a changed entry was not dropped")
	}
}

// TestNoManifestsWithoutADir: a cache without a directory keeps no
// manifests, so nothing resolves a manifest store against the working
// directory.
func TestNoManifestsWithoutADir(t *testing.T) {
	mem, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*Cache{"nil": nil, "none": None(), "in-memory": mem} {
		if _, ok := c.Manifests(); ok {
			t.Errorf("%s cache has a manifest store", name)
		}
	}
	if s, ok := mem.WithManifests("m").Manifests(); !ok || s.Dir != "m" {
		t.Errorf("WithManifests: %+v, %v", s, ok)
	}
}
