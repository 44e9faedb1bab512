package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestSessionEventGrants(t *testing.T) {
	e, err := Load("plugins.yaml", []byte("source: builtin:tool-todo\ngrants:\n  session_events: [todo/write, hook/invoked]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e.Grants.SessionEvents, []string{"todo/write", "hook/invoked"}) {
		t.Fatalf("session_events = %v", e.Grants.SessionEvents)
	}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	refused := map[string]string{
		"user/message":           "cannot be granted",
		"assistant/message":      "cannot be granted",
		"assistant/chunk":        "cannot be granted",
		"tool/result":            "cannot be granted",
		"tool/call":              "cannot be granted",
		"turn/start":             "cannot be granted",
		"step/end":               "cannot be granted",
		"context/message":        "cannot be granted",
		"steering/message":       "cannot be granted",
		"compact/summary":        "cannot be granted",
		"todo":                   "want namespace/name",
		"/todo":                  "want namespace/name",
		"todo//write":            "want namespace/name",
		"Todo/Write":             "unexpected character",
		"todo/write\n":           "unexpected character",
		strings.Repeat("a/", 40): "want 1 to 64 bytes",
	}
	for typ, want := range refused {
		_, err := Load("plugins.yaml", []byte("source: x.wasm\ngrants:\n  session_events: ["+quote(typ)+"]\n"))
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "plugins.yaml:3: grants.session_events[0]") {
			t.Errorf("%q: err = %v; want a refusal at plugins.yaml:3 containing %q", typ, err, want)
		}
		g := Entry{Source: "x.wasm", Grants: Grants{SessionEvents: []string{typ}}}
		if err := g.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: Validate = %v; want %q", typ, err, want)
		}
	}
}

func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

func TestCheckSessionEventCapability(t *testing.T) {
	g := Grants{SessionEvents: []string{"todo/write"}}
	if err := g.Check(Capabilities{Plugin: "p", SessionEvents: []string{"todo/write"}}.declared()); err != nil {
		t.Fatalf("granted: %v", err)
	}
	err := g.Check(Capabilities{Plugin: "p", SessionEvents: []string{"hook/invoked"}}.declared())
	if !errors.Is(err, ErrNotGranted) || !strings.Contains(err.Error(), "add under grants.session_events: - hook/invoked") {
		t.Fatalf("not granted: %v", err)
	}
	err = Grants{SessionEvents: []string{"user/message"}}.Check(Capabilities{Plugin: "p", SessionEvents: []string{"user/message"}}.declared())
	if !errors.Is(err, ErrInvalidCapabilities) || !strings.Contains(err.Error(), "cannot be granted") {
		t.Fatalf("core type declared: %v", err)
	}
}
