package lazy

import (
	"encoding/json"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/modcache"
)

// TestReadAcceptsOnlyWhatWriteWrites: a manifest reads back with its size;
// one of another format version, filed under another key, or past the
// bounds is not read, and Write drops rather than writes one past them.
func TestReadAcceptsOnlyWhatWriteWrites(t *testing.T) {
	store := modcache.Store{Dir: t.TempDir()}
	m := &Manifest{Version: Version, Key: "k", Exports: []string{"dsh_init"},
		Calls: []Call{{Fn: "log", Req: []byte("hi")}}}
	Write(store, m)
	got, ok := Read(store, "k")
	if !ok || got.Bytes != RecordBytes(m.Calls) || len(got.Calls) != 1 {
		t.Fatalf("Read = %+v, %v", got, ok)
	}
	for name, change := range map[string]func(*Manifest){
		"version": func(m *Manifest) { m.Version = "dsh-manifest-v0" },
		"key":     func(m *Manifest) { m.Key = "other" },
	} {
		bad := *m
		change(&bad)
		store.Put("k", mustJSON(t, &bad))
		if _, ok := Read(store, "k"); ok {
			t.Errorf("a manifest with another %s was read", name)
		}
	}
	Write(store, m)
	big := *m
	big.Events = make([]Event, MaxEvents+1)
	Write(store, &big)
	if _, ok := Read(store, "k"); ok || store.Ref("k") != "" {
		t.Error("a manifest past the bounds replaced the entry instead of dropping it")
	}
}

func mustJSON(t *testing.T, m *Manifest) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
