//go:build linux

package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/image"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// fromImage reports whether agent id's instance of p started from an image.
func fromImage(t *testing.T, p *Plugin, id string) bool {
	t.Helper()
	p.mu.Lock()
	s := p.agents[id]
	p.mu.Unlock()
	if s == nil {
		t.Fatalf("agent %s has no instance", id)
	}
	<-s.ready
	if s.inst == nil {
		t.Fatalf("agent %s: %v", id, s.err)
	}
	return s.inst.fromImage
}

// TestInstancesFromImages: the first instance in an environment runs the
// module's initialiser and is recorded; later ones in the same
// environment start from that image and behave exactly like a fresh one
// (guest globals, data, files), each with its own state; another
// environment (another workspace, so other preopens) gets its own image.
func TestInstancesFromImages(t *testing.T) {
	h := newHost(t)
	ws1, ws2 := t.TempDir(), t.TempDir()
	for _, ws := range []string{ws1, ws2} {
		if err := os.WriteFile(filepath.Join(ws, "in.txt"), []byte("in "+filepath.Base(ws)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := loadEntry(t, h, "source: "+testkit(t)+`
config: {tools: [counter, echo, echo_args, readfile]}
grants:
  fs: [{path: workspace, mode: rw}]
`)
	if !p.snapshots {
		t.Fatal("the testkit module was not prepared for images")
	}
	call := func(a *prompt.AgentFacts, tool string, args []byte) string {
		t.Helper()
		r, err := h.CallTool(bg, a, tool, args)
		if err != nil || r.IsError {
			t.Fatalf("%s %s: %+v %v", a.ID, tool, r, err)
		}
		return r.Text
	}
	at := func(id, ws string) *prompt.AgentFacts {
		a := agent(id, "m")
		a.Cwd = ws
		return a
	}
	echoArgs, _ := json.Marshal(map[string]string{"text": benchEscaped})
	check := func(a *prompt.AgentFacts, ws string, image bool) {
		t.Helper()
		// The first call creates the instance; a guest global counts.
		for want := 1; want <= 3; want++ {
			if got := call(a, "counter", nil); got != string(rune('0'+want)) {
				t.Fatalf("%s: counter = %s, want %d (state leaked from another instance?)", a.ID, got, want)
			}
		}
		if got := fromImage(t, p, a.ID); got != image {
			t.Fatalf("%s started from an image: %v, want %v", a.ID, got, image)
		}
		// Data segments and the Go runtime work: encoding/json and the
		// SDK's reader, strings, allocation.
		if got := call(a, "echo", echoArgs); got != benchEscaped {
			t.Fatalf("%s: echo returned %q", a.ID, got)
		}
		if got := call(a, "echo_args", echoArgs); got != benchEscaped {
			t.Fatalf("%s: echo_args returned %q", a.ID, got)
		}
		// The preopened workspace is this agent's.
		if got := call(a, "readfile", []byte(filepath.Join(ws, "in.txt"))); got != "in "+filepath.Base(ws) {
			t.Fatalf("%s: read %q", a.ID, got)
		}
	}
	check(at("a1", ws1), ws1, false) // first in ws1: initialises, recorded
	check(at("a2", ws1), ws1, true)  // same environment: from the image
	check(at("b1", ws2), ws2, false) // other preopens: its own image
	check(at("b2", ws2), ws2, true)
	// An agent from ws2's image cannot reach ws1.
	if r, err := h.CallTool(bg, at("b2", ws2), "readfile", []byte(filepath.Join(ws1, "in.txt"))); err != nil || !r.IsError {
		t.Fatalf("an agent of ws2 read ws1: %+v %v", r, err)
	}
	// The image is unchanged by what instances made from it wrote.
	h.EndAgent(bg, "a2")
	check(at("a3", ws1), ws1, true)

	// Every instance made from an image is released with its agent.
	for _, id := range []string{"a1", "a3", "b1", "b2"} {
		h.EndAgent(bg, id)
	}
	if n := p.Instances(); n != 1 {
		t.Fatalf("%d instances after every agent ended, want the load-time one", n)
	}
}

// TestImagesOptOut: limits.snapshot: false makes every instance initialise
// itself.
func TestImagesOptOut(t *testing.T) {
	h := newHost(t)
	p := loadEntry(t, h, "source: "+testkit(t)+`
config: {tools: [counter]}
grants:
  limits: {snapshot: false}
`)
	if p.snapshots {
		t.Fatal("images on despite snapshot: false")
	}
	for _, id := range []string{"x", "y"} {
		if r, err := h.CallTool(bg, agent(id, "m"), "counter", nil); err != nil || r.Text != "1" {
			t.Fatalf("%s: %+v %v", id, r, err)
		}
		if fromImage(t, p, id) {
			t.Fatalf("%s started from an image", id)
		}
	}
}

// TestSmallModulesStartFresh: a guest whose initialised memory is small
// (bench-c, in C: 128 KiB) gets no image; initialising it is cheaper than
// mapping one. Its agents still each get their own working instance.
func TestSmallModulesStartFresh(t *testing.T) {
	h := newHost(t)
	p, err := h.Load(bg, Spec{Name: "c", Source: cGuest(t)})
	if err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]string{"text": benchEscaped})
	for _, id := range []string{"c1", "c2"} {
		r, err := h.CallTool(bg, agent(id, "m"), "echo_c", args)
		if err != nil || r.Text != benchEscaped {
			t.Fatalf("%s: %+v %v", id, r, err)
		}
		if fromImage(t, p, id) {
			t.Fatalf("%s started from an image of a %d-byte memory", id, p.load.mem.Size())
		}
	}
	if n := p.images.Len(); n != 0 {
		t.Fatalf("%d images recorded for a small module", n)
	}
}

// imageOf returns the image recorded for the environment of an agent
// without fs grants (the load-time instance's).
func imageOf(t *testing.T, p *Plugin) *image.Image {
	t.Helper()
	img := p.images.For(p.environment(nil, p.envList()))
	if img == nil {
		t.Fatal("no image recorded")
	}
	img.Release()
	return img
}

// TestImagesIncludeANeutralSetup: a dsh_setup that asks the host nothing
// about the agent is part of the image, and later instances skip it; one
// that reads the agent's session state (or anything scoped) runs in every
// instance.
func TestImagesIncludeANeutralSetup(t *testing.T) {
	for _, c := range []struct {
		name      string
		config    map[string]any
		setupDone bool
	}{
		{"neutral", map[string]any{"tools": []string{"counter"}}, true},
		{"scoped", map[string]any{"tools": []string{"counter"},
			"setup_probes": []map[string]any{{"fn": "state_get", "req": `{"key":"k"}`}}}, false},
		{"env", map[string]any{"tools": []string{"counter"},
			"setup_probes": []map[string]any{{"fn": "env_get", "req": `{"name":"HOME"}`}}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHost(t)
			p, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, c.config)})
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"x1", "x2", "x3"} {
				if r, err := h.CallTool(bg, agent(id, "m"), "counter", nil); err != nil || r.Text != "1" {
					t.Fatalf("%s: %+v %v", id, r, err)
				}
				if !fromImage(t, p, id) {
					t.Fatalf("%s did not start from an image", id)
				}
			}
			if got := imageOf(t, p).SetupDone(); got != c.setupDone {
				t.Fatalf("the image includes dsh_setup: %v, want %v", got, c.setupDone)
			}
		})
	}
}

// TestImagesKeyedByTheEnvironment: an image carries the WASI environment
// the guest read as it initialised, so a granted variable whose value
// changed between two agents gives the second an image of its own; it
// never sees the first one's value.
func TestImagesKeyedByTheEnvironment(t *testing.T) {
	const name = "DSH_TEST_IMAGE_ENV"
	t.Setenv(name, "first")
	h := newHost(t)
	p := loadEntry(t, h, "source: "+testkit(t)+`
config: {tools: [wasi_getenv]}
grants:
  env: [`+name+`]
`)
	if !p.snapshots {
		t.Fatal("the testkit module was not prepared for images")
	}
	read := func(id string) string {
		t.Helper()
		r, err := h.CallTool(bg, agent(id, "m"), "wasi_getenv", []byte(name))
		if err != nil || r.IsError {
			t.Fatalf("%s: %+v %v", id, r, err)
		}
		return r.Text
	}
	if got := read("a1"); got != "first" {
		t.Fatalf("a1 read %q, want first", got)
	}
	if got := read("a2"); got != "first" || !fromImage(t, p, "a2") {
		t.Fatalf("a2 read %q (from an image: %v); want first, from a1's image", got, fromImage(t, p, "a2"))
	}
	t.Setenv(name, "second")
	if got := read("b1"); got != "second" {
		t.Fatalf("b1 read %q after the value changed, want second: an image of another environment was shared", got)
	}
	if fromImage(t, p, "b1") {
		t.Fatal("b1 started from an image of the old environment")
	}
	if got := read("b2"); got != "second" || !fromImage(t, p, "b2") {
		t.Fatalf("b2 read %q (from an image: %v); want second, from b1's image", got, fromImage(t, p, "b2"))
	}
}
