package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestGuestsListsGoDirectories(t *testing.T) {
	dir := t.TempDir()
	write := func(rel string) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("package main\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"facts/main.go", "my-tool/main.go", "internal/gen/main.go", "testdata/x/main.go",
		".hidden/main.go", "_off/main.go", "assets/readme.txt", "guests.go"} {
		write(f)
	}
	got, err := guests(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"facts", "my-tool"}; !slices.Equal(got, want) {
		t.Fatalf("guests = %v, want %v", got, want)
	}
	write("Bad/main.go")
	if _, err := guests(dir); !errors.Is(err, errBadName) {
		t.Fatalf("guest dir Bad: err = %v, want errBadName", err)
	}
}

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"facts": true, "a": true, "web-fetch": true, "v1.2_x": true, "9lives": true,
		"": false, "Facts": false, "-x": false, "_x": false, "a b": false, string(make([]byte, 65)): false,
	} {
		if got := validName(name); got != want {
			t.Errorf("validName(%q) = %v, want %v", name, got, want)
		}
	}
}
