package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/lazy"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/modcache"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

// lazyHost is a host with LazyCompile whose manifests live in dir: the
// compiled code is the shared test cache's, so only the manifests are
// the test's own.
func lazyHost(t *testing.T, dir string) *Host {
	t.Helper()
	shared := sharedCache(t)
	c := &Cache{m: shared.m.WithManifests(dir)}
	h, err := New(Options{Registry: prompt.NewRegistry(nil), Cache: c, Logger: slog.New(slog.DiscardHandler), LazyCompile: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(bg) })
	return h
}

// record loads spec eagerly in a lazy host whose manifests live in dir,
// so that its manifest is written, closes the host, and returns what the
// plugin registered.
func record(t *testing.T, dir string, spec Spec) Contribution {
	t.Helper()
	h := lazyHost(t, dir)
	p, err := h.Load(bg, spec)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Contribution()
	h.Close(bg)
	return c
}

// loadAgain loads spec in a new lazy host whose manifests live in dir.
func loadAgain(t *testing.T, dir string, spec Spec) (*Host, *Plugin) {
	t.Helper()
	h := lazyHost(t, dir)
	p, err := h.Load(bg, spec)
	if err != nil {
		t.Fatal(err)
	}
	return h, p
}

// loadTaken loads spec in a new lazy host whose manifests live in dir,
// after another owner registered the section called taken.
func loadTaken(t *testing.T, dir string, spec Spec, taken string) (*Host, *Plugin) {
	t.Helper()
	h := lazyHost(t, dir)
	if err := h.Registry().Update(func(tx *prompt.Tx) error {
		_, err := tx.AddSection(prompt.Section{Name: taken, Order: 10, Text: "Someone else's."})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	p, err := h.Load(bg, spec)
	if err != nil {
		t.Fatal(err)
	}
	return h, p
}

func manifestsIn(t *testing.T, dir string) []lazy.Manifest {
	t.Helper()
	store := modcache.Store{Dir: dir}
	refs, _ := filepath.Glob(store.RefPath("*"))
	var ms []lazy.Manifest
	for _, ref := range refs {
		b, release, ok := store.Get(filepath.Base(ref), 4*lazy.MaxManifest)
		if !ok {
			t.Fatalf("%s: no valid entry", ref)
		}
		var m lazy.Manifest
		err := json.Unmarshal(b, &m)
		release()
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		ms = append(ms, m)
	}
	return ms
}

// loadState is the load-time instance's own view of itself (testkit's
// dynamic section for no agent).
type loadState struct {
	Probes   []probeOutcome `json:"probes"`
	InitRuns int            `json:"init_runs"`
	Events   []string       `json:"events"`
}

type probeOutcome struct {
	Status  uint32 `json:"status"`
	Message string `json:"message"`
}

func loadTimeState(t *testing.T, p *Plugin) loadState {
	t.Helper()
	text, err := p.sectionText(bg, prompt.AssembleContext{}, "kit:dyn")
	if err != nil {
		t.Fatal(err)
	}
	var s loadState
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		t.Fatalf("load-time state %q: %v", text, err)
	}
	return s
}

var lazyKit = map[string]any{
	"sections":  []map[string]any{{"name": "kit:static", "order": 120, "text": "Static for {{kit_model}}."}, {"name": "kit:dyn", "order": 130, "dynamic": true}},
	"variables": []string{"kit_model"},
	"tools":     []string{"counter", "echo"},
	"subscribe": []map[string]any{{"event": "custom/ping"}},
	"init_probes": []map[string]any{
		{"fn": hostfns.FnLog, "req": `{"level":"debug","message":"hello"}`},
		{"fn": hostfns.FnSectionRegister, "req": `{"name":"kit:probe","order":140,"text":"From a probe."}`},
	},
}

// A second load with the same key registers what the first did without
// compiling; the module is compiled when a tool is first called, and the
// load-time instance, made when first needed, has run dsh_init (once, in
// itself) with the first run's answers, and registered nothing twice.
func TestLazyLoadRegistersFromManifest(t *testing.T) {
	dir := t.TempDir()
	spec := Spec{Name: "kit", Source: testkit(t), Config: cfg(t, lazyKit)}

	h1 := lazyHost(t, dir)
	p1, err := h1.Load(bg, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !p1.compiled.Load() || p1.Instances() != 1 {
		t.Fatalf("first load: compiled %v, %d instances; want an eager load", p1.compiled.Load(), p1.Instances())
	}
	want, err := render(t, h1, agent("a", "m"))
	if err != nil {
		t.Fatal(err)
	}
	wantContrib := p1.Contribution()
	h1.Close(bg)
	if ms := manifestsIn(t, dir); len(ms) != 1 || len(ms[0].Calls) < 8 {
		t.Fatalf("manifests after the first load: %+v", ms)
	}

	h2, p2 := loadAgain(t, dir, spec)
	if p2.compiled.Load() || p2.Instances() != 0 {
		t.Fatalf("second load: compiled %v, %d instances; want a lazy load", p2.compiled.Load(), p2.Instances())
	}
	if got := p2.Contribution(); !reflect.DeepEqual(got, wantContrib) {
		t.Errorf("contribution\n got %+v\nwant %+v", got, wantContrib)
	}
	if !p2.Capabilities().Exec && len(p2.Capabilities().FS) != 0 {
		t.Errorf("capabilities = %+v", p2.Capabilities())
	}
	if r, err := p2.h.CallTool(bg, agent("a", "m"), "counter", nil); err != nil || r.Text != "1" {
		t.Fatalf("counter = %+v, %v", r, err)
	}
	if !p2.compiled.Load() || p2.Instances() != 1 {
		t.Fatalf("after a call: compiled %v, %d instances; want the agent's", p2.compiled.Load(), p2.Instances())
	}
	got, err := render(t, h2, agent("a", "m"))
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("prompt\n got %q\nwant %q", got, want)
	}
	st := loadTimeState(t, p2)
	if st.InitRuns != 1 || len(st.Probes) != 2 || st.Probes[0].Status != 0 || st.Probes[1].Status != 0 {
		t.Errorf("load-time instance after a lazy load = %+v; want dsh_init run once, both probes answered OK as the first time", st)
	}
	if p2.Instances() != 2 {
		t.Errorf("instances = %d, want the load-time one and the agent's", p2.Instances())
	}
}

// A manifest whose answers differ today (another plugin registered the
// section a probe registers) is not used: the plugin loads eagerly, and
// its guest sees the answers as they are now.
func TestLazyLoadFallsBackWhenTheRegistryChanged(t *testing.T) {
	dir := t.TempDir()
	spec := Spec{Name: "kit", Source: testkit(t), Config: cfg(t, lazyKit)}
	record(t, dir, spec)

	_, p := loadTaken(t, dir, spec, "kit:probe")
	if !p.compiled.Load() || p.Instances() != 1 {
		t.Fatalf("compiled %v, %d instances; want an eager load", p.compiled.Load(), p.Instances())
	}
	st := loadTimeState(t, p)
	if len(st.Probes) != 2 || st.Probes[1].Status != uint32(hostfns.ErrRule) {
		t.Errorf("probes = %+v; want the section probe refused, as a live load sees it", st.Probes)
	}
	// The refused probe changed what init saw: the manifest is the new
	// record, which holds the refusal.
	if ms := manifestsIn(t, dir); len(ms) != 1 || len(ms[0].Calls) < 2 || ms[0].Calls[1].Status != hostfns.ErrRule {
		t.Errorf("manifest after the fallback = %+v", ms)
	}
}

// What a dsh_init learns from outside its key keeps it from being
// recorded: host calls with effects or inputs, and a registration that
// shows the time. Reading the clock for something that does not change
// what it registers is fine.
func TestManifestOnlyForReplayableInits(t *testing.T) {
	files := t.TempDir()
	if err := os.WriteFile(filepath.Join(files, "notes.txt"), []byte("notes"), 0o644); err != nil {
		t.Fatal(err)
	}
	needs := map[string]any{"fs": []map[string]any{{"path": files, "mode": "ro"}}}
	grants := &config.Grants{FS: []config.FSGrant{{Path: files, Mode: config.ModeRO}}}
	for _, tc := range []struct {
		name   string
		config map[string]any
		want   bool
	}{
		{"registrations", map[string]any{"tools": []string{"counter"}}, true},
		{"files granted", map[string]any{"needs": needs, "tools": []string{"counter"}}, true},
		{"file read", map[string]any{"needs": needs, "init_read": filepath.Join(files, "notes.txt")}, false},
		{"missing file looked up", map[string]any{"needs": needs, "init_read": filepath.Join(files, "none.txt")}, false},
		{"stdout", map[string]any{"init_print": "hello"}, false},
		{"state", map[string]any{"init_probes": []map[string]any{{"fn": hostfns.FnStateGet, "req": `{"key":"k"}`}}}, false},
		{"emit", map[string]any{"init_probes": []map[string]any{{"fn": hostfns.FnEventEmit, "req": `{"event":"custom/x","payload":{}}`}}}, false},
		{"clock read", map[string]any{"clock_read": true, "tools": []string{"counter"}}, true},
		{"clock shown", map[string]any{"clock_section": true}, false},
		{"clock read as the module starts, shown", map[string]any{"clock_init_section": true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			h := lazyHost(t, dir)
			spec := Spec{Name: "kit", Source: testkit(t), Config: cfg(t, tc.config)}
			if tc.config["needs"] != nil {
				spec.Grants = grants
			}
			if _, err := h.Load(bg, spec); err != nil {
				t.Fatal(err)
			}
			if got := len(manifestsIn(t, dir)) == 1; got != tc.want {
				t.Errorf("manifest written = %v, want %v", got, tc.want)
			}
		})
	}
}

// An event that belongs to no agent, recorded after init, is answered
// from the manifest at the next lazy load when it comes again with the
// same payload; another event needs the guest, whose new load-time
// instance re-runs init and the replayed event before handling it.
func TestLazyLoadReplaysRecordedEvents(t *testing.T) {
	dir := t.TempDir()
	spec := Spec{Name: "kit", Source: testkit(t), Config: cfg(t, lazyKit)}
	h1 := lazyHost(t, dir)
	if _, err := h1.Load(bg, spec); err != nil {
		t.Fatal(err)
	}
	if err := h1.Bus().Emit(bg, "custom/ping", json.RawMessage(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	h1.Close(bg)
	if ms := manifestsIn(t, dir); len(ms) != 1 || len(ms[0].Events) != 1 {
		t.Fatalf("manifests = %+v; want one with the event", ms)
	}

	h2, p := loadAgain(t, dir, spec)
	if err := h2.Bus().Emit(bg, "custom/ping", json.RawMessage(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	if p.compiled.Load() || p.Instances() != 0 {
		t.Fatalf("after the recorded event: compiled %v, %d instances; want it answered from the manifest", p.compiled.Load(), p.Instances())
	}
	if err := h2.Bus().Emit(bg, "custom/ping", json.RawMessage(`{"n":2}`)); err != nil {
		t.Fatal(err)
	}
	if !p.compiled.Load() {
		t.Fatal("a new event did not reach the guest")
	}
	st := loadTimeState(t, p)
	want := []string{`custom/ping {"n":1}`, `custom/ping {"n":2}`}
	if st.InitRuns != 1 || !reflect.DeepEqual(st.Events, want) {
		t.Errorf("load-time instance = %+v; want init once and events %q", st, want)
	}
	// A listener's refusal still reaches the emitter.
	if err := h2.Bus().Emit(bg, "custom/ping", json.RawMessage(`"fail-please"`)); err == nil || !strings.Contains(err.Error(), "listener refused") {
		t.Errorf("refusing listener: %v", err)
	}
}

// A discarded load-time instance (here: closed under it) is made again
// with the first one's state: dsh_init re-run against its record, the
// events it handled since replayed, nothing registered twice.
func TestNewLoadTimeInstanceRepeatsHistory(t *testing.T) {
	h := newHost(t)
	p, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, lazyKit)})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Bus().Emit(bg, "custom/ping", json.RawMessage(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	load := p.load
	p.mu.Unlock()
	load.close(errDiscarded)
	st := loadTimeState(t, p)
	if st.InitRuns != 1 || len(st.Probes) != 2 || !reflect.DeepEqual(st.Events, []string{`custom/ping {"n":1}`}) {
		t.Errorf("re-created load-time instance = %+v", st)
	}
	if c := p.Contribution(); len(c.Sections) != 3 || len(c.Tools) != 2 {
		t.Errorf("contribution after the re-run = %+v", c)
	}
}

// A manifest is a cache entry, not a grant: one edited to claim more
// than the plugin may do is replayed through the live checks, and what
// they refuse makes the plugin load as without it.
func TestTamperedManifestIsReplayedUnderTheLiveRules(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(m *lazy.Manifest)
	}{
		{"exec call", func(m *lazy.Manifest) {
			m.Calls = append(m.Calls, lazy.Call{Fn: hostfns.FnExecRun, Req: []byte(`{"argv":["id"]}`)})
		}},
		{"oversized section", func(m *lazy.Manifest) {
			big, _ := json.Marshal(hostfns.SectionRequest{Name: "kit:big", Order: 150, Text: strings.Repeat("x", int(config.DefaultPromptBytes)+1)})
			m.Calls = append(m.Calls, lazy.Call{Fn: hostfns.FnSectionRegister, Req: big})
		}},
		{"identity order", func(m *lazy.Manifest) {
			m.Calls = append(m.Calls, lazy.Call{Fn: hostfns.FnSectionRegister, Req: []byte(`{"name":"kit:first","order":-100,"text":"I am the harness."}`)})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, spec, m, want := recordOne(t)
			tc.tamper(&m)
			overwriteManifest(t, dir, m)
			_, p2 := loadAgain(t, dir, spec)
			if !p2.compiled.Load() {
				t.Error("the tampered manifest was used")
			}
			if got := p2.Contribution(); !reflect.DeepEqual(got, want) {
				t.Errorf("contribution = %+v, want %+v", got, want)
			}
		})
	}
}

// Many agents' first calls into a lazy plugin compile its module once.
func TestLazyCompileOnceUnderConcurrentFirstCalls(t *testing.T) {
	dir := t.TempDir()
	spec := Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{"tools": []string{"counter"}})}
	record(t, dir, spec)
	h2, p := loadAgain(t, dir, spec)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := h2.CallTool(bg, agent(string(rune('a'+i)), "m"), "counter", nil)
			if err == nil && r.Text != "1" {
				err = &CallError{Plugin: "kit", Export: "counter", Err: os.ErrInvalid}
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if p.Instances() != 8 {
		t.Errorf("instances = %d, want 8", p.Instances())
	}
	rt := p.rt
	if _, err := h2.CallTool(bg, agent("z", "m"), "counter", nil); err != nil || p.rt != rt {
		t.Errorf("a later call: %v; runtime replaced %v", err, p.rt != rt)
	}
	h2.Close(bg)
	if p.Instances() != 0 {
		t.Errorf("instances after Close = %d", p.Instances())
	}
}

// A lazy plugin that never needed its module closes without compiling it.
func TestLazyPluginClosesUncompiled(t *testing.T) {
	dir := t.TempDir()
	spec := Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{"tools": []string{"counter"}})}
	record(t, dir, spec)
	h2, p := loadAgain(t, dir, spec)
	if err := h2.Unload(bg, "kit"); err != nil {
		t.Fatal(err)
	}
	if p.compiled.Load() || p.rt != nil {
		t.Error("unloading compiled the module")
	}
	if _, err := h2.CallTool(bg, agent("a", "m"), "counter", nil); err == nil {
		t.Error("a call after unload succeeded")
	}
	if err := p.ensureCompiled(bg); err == nil {
		t.Error("compiled after its runtime was closed")
	}
}

// CompileAll compiles lazily loaded modules without making instances, and
// stops when its context is done.
func TestCompileAll(t *testing.T) {
	dir := t.TempDir()
	spec := Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{"tools": []string{"counter"}})}
	record(t, dir, spec)
	h, p := loadAgain(t, dir, spec)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := h.CompileAll(ctx); !errors.Is(err, context.Canceled) || p.compiled.Load() {
		t.Errorf("cancelled CompileAll = %v, compiled %v", err, p.compiled.Load())
	}
	if err := h.CompileAll(bg); err != nil || !p.compiled.Load() || p.Instances() != 0 {
		t.Errorf("CompileAll = %v; compiled %v, %d instances", err, p.compiled.Load(), p.Instances())
	}
}

// Closing never waits for a compilation (wazero cannot stop one): the
// runtime is closed by whoever ends it.
func TestCloseDoesNotWaitForACompilation(t *testing.T) {
	dir := t.TempDir()
	spec := Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{"tools": []string{"counter"}})}
	record(t, dir, spec)
	h, p := loadAgain(t, dir, spec)
	if err := h.CompileAll(bg); err != nil {
		t.Fatal(err)
	}
	p.compileMu.Lock() // a compilation under way
	done := make(chan struct{})
	go func() { h.Close(bg); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close waited for the compilation")
	}
	if p.rtClosed {
		t.Error("the runtime was closed under the compilation")
	}
	rt := p.rt
	p.compileMu.Unlock()
	p.releaseRuntime() // what ensureCompiled does as it ends
	if !p.rtClosed {
		t.Error("the runtime was not closed once the compilation ended")
	}
	if _, err := rt.CompileModule(bg, []byte("\x00asm\x01\x00\x00\x00")); err == nil {
		t.Error("the runtime still compiles after it was closed")
	}
}

// A recorded event whose answers differ part way is carried on by the
// guest: its new load-time instance re-runs init, then gets the event with
// the calls already made answered as they just were, and the rest live.
func TestDivergedEventIsCarriedOnByTheGuest(t *testing.T) {
	dir := t.TempDir()
	spec := Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{
		"sections":  []map[string]any{{"name": "kit:dyn", "order": 130, "dynamic": true}},
		"subscribe": []map[string]any{{"event": "custom/ping"}},
		"event_probes": []map[string]any{
			{"fn": hostfns.FnSectionRegister, "req": `{"name":"kit:ev1","order":140,"text":"One."}`},
			{"fn": hostfns.FnSectionRegister, "req": `{"name":"kit:ev2","order":141,"text":"Two."}`},
		},
	})}
	h1 := lazyHost(t, dir)
	if _, err := h1.Load(bg, spec); err != nil {
		t.Fatal(err)
	}
	if err := h1.Bus().Emit(bg, "custom/ping", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	h1.Close(bg)
	if ms := manifestsIn(t, dir); len(ms) != 1 || len(ms[0].Events) != 1 || len(ms[0].Events[0].Calls) != 2 {
		t.Fatalf("manifests = %+v", ms)
	}

	h2, p := loadTaken(t, dir, spec, "kit:ev2")
	if p.compiled.Load() {
		t.Fatal("the load was eager; the test needs a lazy one")
	}
	if err := h2.Bus().Emit(bg, "custom/ping", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if !p.compiled.Load() {
		t.Fatal("the diverged event did not reach the guest")
	}
	st := loadTimeState(t, p)
	if st.InitRuns != 1 || len(st.Events) != 1 || len(st.Probes) != 2 ||
		st.Probes[0].Status != 0 || st.Probes[1].Status != uint32(hostfns.ErrRule) {
		t.Errorf("load-time instance = %+v; want init once, the event once, its first probe OK and its second refused", st)
	}
	var sections []string
	for _, s := range p.Contribution().Sections {
		sections = append(sections, s.Name)
	}
	if !reflect.DeepEqual(sections, []string{"kit:dyn", "kit:ev1"}) {
		t.Errorf("sections = %q", sections)
	}
	// The carried-on event is in the history: a load-time instance made
	// again has handled it, with the answers it got.
	p.mu.Lock()
	load := p.load
	p.mu.Unlock()
	load.close(errDiscarded)
	if again := loadTimeState(t, p); !reflect.DeepEqual(again, st) {
		t.Errorf("re-created load-time instance = %+v, want %+v", again, st)
	}
}

// An agentless event enters the manifest only if the whole history,
// run again with another clock, asks the host for the same things: a
// listener that shows the time it ran is handled, and not recorded.
func TestEventThatReadsTheClockIsNotRecorded(t *testing.T) {
	for _, clock := range []bool{false, true} {
		t.Run(fmt.Sprintf("clock=%v", clock), func(t *testing.T) {
			dir := t.TempDir()
			spec := Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{
				"subscribe":           []map[string]any{{"event": "custom/ping"}},
				"event_probes":        []map[string]any{{"fn": hostfns.FnSectionRegister, "req": `{"name":"kit:ev1","order":140,"text":"One."}`}},
				"event_clock_section": clock,
			})}
			h := lazyHost(t, dir)
			p, err := h.Load(bg, spec)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Bus().Emit(bg, "custom/ping", json.RawMessage(`{}`)); err != nil {
				t.Fatal(err)
			}
			want := []string{"kit:ev1"}
			if clock {
				want = append(want, "kit:event-clock")
			}
			var got []string
			for _, s := range p.Contribution().Sections {
				got = append(got, s.Name)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("sections after the event = %q, want %q", got, want)
			}
			h.Close(bg)
			ms := manifestsIn(t, dir)
			if len(ms) != 1 {
				t.Fatalf("%d manifests, want 1 (the init repeats either way)", len(ms))
			}
			wantEvents := 1
			if clock {
				wantEvents = 0
			}
			if len(ms[0].Events) != wantEvents {
				t.Errorf("the manifest records %d events, want %d", len(ms[0].Events), wantEvents)
			}
		})
	}
}

// Agentless events that arrive together are handled one at a time by the
// load-time instance, and their checks (repeats) may end in any order.
// The history takes them in the order the guest handled them, and the
// manifest records one whole checked history: a prefix of the events as
// they happened, none left out, which a new load replays in full.
func TestConcurrentEventsRecordOneWholeHistory(t *testing.T) {
	const n = 8
	dir := t.TempDir()
	spec := Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{
		"sections":  []map[string]any{{"name": "kit:dyn", "order": 130, "dynamic": true}},
		"subscribe": []map[string]any{{"event": "custom/ping"}},
	})}
	h := lazyHost(t, dir)
	p, err := h.Load(bg, spec)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if err := h.Bus().Emit(bg, "custom/ping", json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	p.mu.Lock()
	hist := p.history
	p.mu.Unlock()
	if hist == nil || len(hist.Events) != n {
		t.Fatalf("history = %+v, want %d events", hist, n)
	}
	var handled []string
	for _, ev := range hist.Events {
		handled = append(handled, ev.Event+" "+string(ev.Payload))
	}
	if got := loadTimeState(t, p).Events; !reflect.DeepEqual(got, handled) {
		t.Errorf("the guest handled %q; the history says %q", got, handled)
	}
	h.Close(bg)

	ms := manifestsIn(t, dir)
	if len(ms) != 1 || len(ms[0].Events) == 0 {
		t.Fatalf("manifests = %+v, want one with events", ms)
	}
	m := ms[0]
	for i, ev := range m.Events {
		if ev.Event != hist.Events[i].Event || !bytes.Equal(ev.Payload, hist.Events[i].Payload) {
			t.Fatalf("manifest event %d is %s %s; the history's is %s %s: not a prefix of what happened",
				i+1, ev.Event, ev.Payload, hist.Events[i].Event, hist.Events[i].Payload)
		}
	}
	// A new load replays every recorded event without a guest, and a
	// guest made afterwards has handled them all, in that order.
	h2, p2 := loadAgain(t, dir, spec)
	for _, ev := range m.Events {
		if err := h2.Bus().Emit(bg, ev.Event, json.RawMessage(ev.Payload)); err != nil {
			t.Fatal(err)
		}
	}
	if p2.compiled.Load() {
		t.Fatal("replaying the recorded events compiled the module")
	}
	if got := loadTimeState(t, p2).Events; !reflect.DeepEqual(got, handled[:len(m.Events)]) {
		t.Errorf("the new load's guest handled %q, want %q", got, handled[:len(m.Events)])
	}
}

// A host call refused for where its buffers lie (ErrBadPointer) cannot be
// replayed: a replay has no guest memory to check them against, and would
// serve the request. It ends the record, in dsh_init and in an event, and
// the next load does what a live run does.
func TestBadPointerEndsTheRecord(t *testing.T) {
	badOut := map[string]any{"fn": hostfns.FnSectionRegister, "req": `{"name":"kit:bad","order":140,"text":"One."}`,
		"out_ptr": uint32(0xFFFFFF00), "out_cap": 64}
	for _, where := range []string{"init", "event"} {
		t.Run(where, func(t *testing.T) {
			c := map[string]any{
				"sections":  []map[string]any{{"name": "kit:dyn", "order": 130, "dynamic": true}},
				"subscribe": []map[string]any{{"event": "custom/ping"}},
			}
			if where == "init" {
				c["init_probes"] = []any{badOut}
			} else {
				c["event_probes"] = []any{badOut}
			}
			dir := t.TempDir()
			spec := Spec{Name: "kit", Source: testkit(t), Config: cfg(t, c)}
			run := func(h *Host, p *Plugin) ([]string, loadState) {
				t.Helper()
				if err := h.Bus().Emit(bg, "custom/ping", json.RawMessage(`{}`)); err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, s := range p.Contribution().Sections {
					names = append(names, s.Name)
				}
				return names, loadTimeState(t, p)
			}
			h1, p1 := loadAgain(t, dir, spec)
			liveNames, liveState := run(h1, p1)
			if len(liveState.Probes) != 1 || liveState.Probes[0].Status != uint32(hostfns.ErrBadPointer) {
				t.Fatalf("live probes = %+v, want one refused for its out buffer", liveState.Probes)
			}
			h1.Close(bg)
			ms := manifestsIn(t, dir)
			switch {
			case where == "init" && len(ms) != 0:
				t.Fatalf("an init with a bad pointer was recorded: %+v", ms)
			case where == "event" && (len(ms) != 1 || len(ms[0].Events) != 0):
				t.Fatalf("manifests = %+v, want one without the event", ms)
			}
			h2, p2 := loadAgain(t, dir, spec)
			names, state := run(h2, p2)
			if !reflect.DeepEqual(names, liveNames) {
				t.Errorf("the next load registered %q; the live run %q", names, liveNames)
			}
			if !reflect.DeepEqual(state.Probes, liveState.Probes) {
				t.Errorf("the next load's guest was answered %+v; the live one %+v", state.Probes, liveState.Probes)
			}
		})
	}
}

// cancelAtFirstCall is a context cancelled as the first guest call made
// under it starts (invoke asks it for the active chain): a caller that
// gives up while a new load-time instance re-runs the history.
type cancelAtFirstCall struct {
	context.Context
	cancel context.CancelFunc
}

func (c cancelAtFirstCall) Value(key any) any {
	if _, ok := key.(activeKey); ok {
		c.cancel()
	}
	return c.Context.Value(key)
}

// A caller that gives up while a new load-time instance re-runs the
// history gets an error, and the history stays: the next load-time
// instance re-runs dsh_init, as if the caller had not been there.
func TestCallerCancellationKeepsTheHistory(t *testing.T) {
	h := newHost(t)
	p, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, lazyKit)})
	if err != nil {
		t.Fatal(err)
	}
	discardLoad(p)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	if _, err := p.loadInstance(cancelAtFirstCall{ctx, cancel}); !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled caller got %v, want context.Canceled", err)
	}
	if !p.keepsHistory() {
		t.Error("a caller's cancellation dropped the history")
	}
	if st := loadTimeState(t, p); st.InitRuns != 1 {
		t.Errorf("next load-time instance = %+v, want dsh_init re-run (init_runs 1)", st)
	}
}

// An event that takes longer than lazy.MaxRepeatCheck is not checked, so not
// recorded: the check would double its time for whoever emitted it. The
// history keeps it, and a new load-time instance is rebuilt from it.
func TestSlowEventIsNotRecorded(t *testing.T) {
	dir := t.TempDir()
	h := lazyHost(t, dir)
	p, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{
		"sections":      []map[string]any{{"name": "kit:dyn", "order": 130, "dynamic": true}},
		"subscribe":     []map[string]any{{"event": "custom/ping"}},
		"event_busy_ms": int(lazy.MaxRepeatCheck/time.Millisecond) + 100,
	})})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Bus().Emit(bg, "custom/ping", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if !p.keepsHistory() {
		t.Fatal("the slow event dropped the history")
	}
	discardLoad(p)
	if st := loadTimeState(t, p); st.InitRuns != 1 || len(st.Events) != 1 {
		t.Errorf("rebuilt load-time instance = %+v, want init and the event re-run", st)
	}
	h.Close(bg)
	if ms := manifestsIn(t, dir); len(ms) != 1 || len(ms[0].Events) != 0 {
		t.Errorf("manifests = %+v, want one without the slow event", ms)
	}
}

// checkUnderWay reports whether p has an open load-time instance that is
// not p.load: a repeats check's, or one being made.
func checkUnderWay(p *Plugin) bool {
	p.mu.Lock()
	load := p.load
	p.mu.Unlock()
	found := false
	p.byModule.Range(func(_, v any) bool {
		if in := v.(*instance); in != load && in.loadTime {
			found = true
		}
		return !found
	})
	return found
}

// Unload stops the check of an event's history (repeats), which runs in an
// instance no agent and not p.load owns, and returns only once it is
// closed; the plugin's runtime is never closed under it (the race
// detector saw wazero's teardown race the check's guest code before).
func TestUnloadStopsAManifestCheck(t *testing.T) {
	h := lazyHost(t, t.TempDir())
	p, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{
		"subscribe":     []map[string]any{{"event": "custom/ping"}},
		"event_busy_ms": 300,
	})})
	if err != nil {
		t.Fatal(err)
	}
	emitted := make(chan error, 1)
	go func() { emitted <- h.Bus().Emit(bg, "custom/ping", json.RawMessage(`{}`)) }()
	deadline := time.Now().Add(30 * time.Second)
	for !checkUnderWay(p) {
		if time.Now().After(deadline) {
			t.Fatal("no check started")
		}
		time.Sleep(100 * time.Microsecond)
	}
	if err := h.Unload(bg, "kit"); err != nil {
		t.Fatal(err)
	}
	if checkUnderWay(p) {
		t.Error("Unload returned while the check's instance was open")
	}
	if err := <-emitted; err != nil {
		t.Fatal(err)
	}
	if p.users.busy() {
		t.Error("a runtime user is left after the emit returned")
	}
	p.compileMu.Lock()
	closed := p.rtClosed
	p.compileMu.Unlock()
	if !closed {
		t.Error("the runtime was not closed")
	}
}

// An event whose replay diverges is carried on by the guest under the
// host byte budget the replay had already spent: one event, one budget.
func TestCarriedOnEventKeepsItsHostByteBudget(t *testing.T) {
	text := strings.Repeat("x", 1400)
	var probes []map[string]any
	for i := 1; i <= 3; i++ {
		req, _ := json.Marshal(hostfns.SectionRequest{Name: fmt.Sprintf("kit:ev%d", i), Order: 140 + i, Text: text})
		probes = append(probes, map[string]any{"fn": hostfns.FnSectionRegister, "req": string(req)})
	}
	dir := t.TempDir()
	// A budget of 4000 host bytes per call, below what grants may set
	// (grants.limits.host_bytes is at least 1 MiB), is set on each loaded
	// plugin before the event.
	const budget = 4000
	spec := Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{
		"sections":     []map[string]any{{"name": "kit:dyn", "order": 130, "dynamic": true}},
		"subscribe":    []map[string]any{{"event": "custom/ping"}},
		"event_probes": probes,
	})}
	h1, p1 := loadAgain(t, dir, spec)
	p1.limits.HostBytes = budget
	if err := h1.Bus().Emit(bg, "custom/ping", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	// Two registrations fit the budget; the third is refused.
	if st := loadTimeState(t, p1); len(st.Probes) != 3 || st.Probes[1].Status != 0 || st.Probes[2].Status != uint32(hostfns.ErrLimit) {
		t.Fatalf("live probes = %+v, want OK, OK, over the budget", st.Probes)
	}
	h1.Close(bg)
	if ms := manifestsIn(t, dir); len(ms) != 1 || len(ms[0].Events) != 1 {
		t.Fatalf("manifests = %+v", ms)
	}

	// The replay spends the first two requests, the second refused now:
	// the guest carries on, and its third request is still one too many.
	h2, p2 := loadTaken(t, dir, spec, "kit:ev2")
	p2.limits.HostBytes = budget
	if err := h2.Bus().Emit(bg, "custom/ping", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	st := loadTimeState(t, p2)
	if len(st.Probes) != 3 || st.Probes[1].Status != uint32(hostfns.ErrRule) || st.Probes[2].Status != uint32(hostfns.ErrLimit) {
		t.Errorf("carried-on probes = %+v, want OK, taken, over the budget", st.Probes)
	}
	var names []string
	for _, s := range p2.Contribution().Sections {
		names = append(names, s.Name)
	}
	if !reflect.DeepEqual(names, []string{"kit:dyn", "kit:ev1"}) {
		t.Errorf("sections = %q, want kit:dyn and kit:ev1", names)
	}
}

// discardLoad closes the plugin's load-time instance, as a trap would.
func discardLoad(p *Plugin) {
	p.mu.Lock()
	load := p.load
	p.mu.Unlock()
	load.close(errDiscarded)
}

// A load-time instance made again does not print, nor touch files, a
// second time: a history whose init printed is not kept, and the
// instance is set up with dsh_setup instead.
func TestNewLoadTimeInstanceRepeatsNoWASIEffects(t *testing.T) {
	var logs strings.Builder
	var mu sync.Mutex
	h, err := New(Options{Registry: prompt.NewRegistry(nil), Cache: sharedCache(t),
		Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(bg) })
	p, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{
		"sections": []map[string]any{{"name": "kit:dyn", "order": 130, "dynamic": true}}, "init_print": "printed-once"})})
	if err != nil {
		t.Fatal(err)
	}
	discardLoad(p)
	st := loadTimeState(t, p)
	h.Close(bg)
	mu.Lock()
	n := strings.Count(logs.String(), "printed-once")
	mu.Unlock()
	if n != 1 || st.InitRuns != 0 {
		t.Errorf("printed %d times, re-created instance %+v; want once, and an instance set up with dsh_setup", n, st)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// A re-run that fails (here the guest asks for something else) leaves no
// history behind: the load-time instance is set up with dsh_setup, and so
// is every later one, instead of failing the same way at every call.
func TestFailedRerunDropsTheHistory(t *testing.T) {
	h := newHost(t)
	p, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Config: cfg(t, lazyKit)})
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	hist := p.history
	if hist == nil {
		p.mu.Unlock()
		t.Fatal("no history to start with")
	}
	calls := slices.Clone(hist.Init)
	calls[0].Req = []byte(`{"level":"debug","message":"not what it asked"}`)
	p.history = &lazy.History{Init: calls}
	p.mu.Unlock()
	discardLoad(p)
	if st := loadTimeState(t, p); st.InitRuns != 0 {
		t.Errorf("load-time instance = %+v, want one set up with dsh_setup", st)
	}
	if p.keepsHistory() {
		t.Error("the history survived a failed re-run")
	}
}

// recordOne records the testkit with a counter tool into a cache in a
// new directory, and returns that directory, the spec, its manifest and
// what the recorded load contributed.
func recordOne(t *testing.T) (string, Spec, lazy.Manifest, Contribution) {
	t.Helper()
	dir := t.TempDir()
	spec := Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{"tools": []string{"counter"}})}
	want := record(t, dir, spec)
	ms := manifestsIn(t, dir)
	if len(ms) != 1 {
		t.Fatalf("%d manifests, want 1", len(ms))
	}
	return dir, spec, ms[0], want
}

// overwriteManifest replaces m's file in dir with m as it is now.
func overwriteManifest(t *testing.T, dir string, m lazy.Manifest) {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	modcache.Store{Dir: dir}.Put(m.Key, b)
}

// A manifest file past the bounds is neither used nor written.
func TestManifestFileBounds(t *testing.T) {
	dir, _, m, _ := recordOne(t)
	c := &Cache{m: (*modcache.Cache)(nil).WithManifests(dir)}
	if _, ok := c.readManifest(m.Key); !ok {
		t.Fatal("the recorded manifest does not read back")
	}
	path := modcache.Store{Dir: dir}.RefPath(m.Key)
	many := m
	for range lazy.MaxEvents + 1 {
		many.Events = append(many.Events, lazy.Event{Event: "custom/ping", Payload: []byte("{}")})
	}
	big := m
	for range lazy.MaxManifest / 64 {
		big.Calls = append(big.Calls, lazy.Call{Fn: hostfns.FnLog, Req: []byte(`{}`)})
	}
	for _, tc := range []struct {
		what string
		m    lazy.Manifest
	}{{fmt.Sprintf("%d events", len(many.Events)), many}, {fmt.Sprintf("%d calls", len(big.Calls)), big}} {
		overwriteManifest(t, dir, tc.m)
		if _, ok := c.readManifest(tc.m.Key); ok {
			t.Errorf("a manifest of %s was used", tc.what)
		}
		c.writeManifest(&tc.m)
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after writeManifest of %s, its file: %v, want none", tc.what, err)
		}
		overwriteManifest(t, dir, m)
		if _, ok := c.readManifest(m.Key); !ok {
			t.Fatal("the recorded manifest no longer reads back")
		}
	}
}

// A module that turns out not to be the one its manifest describes fails
// its calls without compiling again, and the manifest is dropped.
func TestModuleThatIsNotItsManifestsIsNotRetried(t *testing.T) {
	dir, spec, m, _ := recordOne(t)
	m.Exports = append(m.Exports, "dsh_extra")
	overwriteManifest(t, dir, m)
	path := modcache.Store{Dir: dir}.RefPath(m.Key)
	h, p := loadAgain(t, dir, spec)
	_, err1 := h.CallTool(bg, agent("a", "m"), "counter", nil)
	if !errors.Is(err1, ErrABI) {
		t.Fatalf("first call = %v, want ErrABI", err1)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("the manifest was kept")
	}
	if err := p.ensureCompiled(bg); err != p.broken || p.broken == nil {
		t.Errorf("second compile = %v, want the first failure again (%v)", err, p.broken)
	}
}

// A history stops being kept past its bounds: a new load-time instance is
// then set up with dsh_setup, and the host keeps no more of it.
func TestHistoryBounds(t *testing.T) {
	h := &lazy.History{}
	for i := range lazy.MaxHistoryEvents {
		if h = h.With(lazy.Event{Event: "e"}, 1); h == nil {
			t.Fatalf("dropped at event %d", i+1)
		}
	}
	if h.With(lazy.Event{Event: "e"}, 1) != nil {
		t.Errorf("kept past %d events", lazy.MaxHistoryEvents)
	}
	if (&lazy.History{}).With(lazy.Event{Event: "e"}, lazy.MaxRecorded+1) != nil {
		t.Errorf("kept past %d bytes", lazy.MaxRecorded)
	}
	var none *lazy.History
	if none.With(lazy.Event{Event: "e"}, 1) != nil {
		t.Error("a history that was dropped came back")
	}
}

// A reload replaces a lazily loaded plugin like any other: from the
// manifest when the new spec has one, and the old plugin's registrations
// are gone either way.
func TestReloadOfALazyPlugin(t *testing.T) {
	dir := t.TempDir()
	one := Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{"tools": []string{"counter"}})}
	two := Spec{Name: "kit", Source: testkit(t), Config: cfg(t, map[string]any{"tools": []string{"echo"}})}
	record(t, dir, one)
	record(t, dir, two)
	h, p1 := loadAgain(t, dir, one)
	p2, err := h.Reload(bg, two)
	if err != nil {
		t.Fatal(err)
	}
	if p2.compiled.Load() {
		t.Error("the reload compiled; want it from the manifest")
	}
	if _, err := h.CallTool(bg, agent("a", "m"), "counter", nil); !errors.Is(err, ErrNoTool) {
		t.Errorf("the old plugin's tool after the reload: %v", err)
	}
	if r, err := h.CallTool(bg, agent("a", "m"), "echo", []byte(`{"text":"hi"}`)); err != nil || r.IsError {
		t.Errorf("the new plugin's tool: %+v, %v", r, err)
	}
	if p1.Instances() != 0 || p1.compiled.Load() {
		t.Errorf("the replaced plugin: %d instances, compiled %v", p1.Instances(), p1.compiled.Load())
	}
}

// A lazily loaded plugin from a file holds its digest, not its bytes.
// When it compiles, it compiles the module it loaded: from the cache by
// digest, or from the file read again only if it still has that digest.
func TestLazyPluginFileChangedBeforeItCompiles(t *testing.T) {
	b, err := os.ReadFile(testkit(t))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kit.wasm")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	spec := Spec{Name: "kit", Source: path, Config: cfg(t, map[string]any{"tools": []string{"counter"}})}
	record(t, dir, spec)
	h, p := loadAgain(t, dir, spec)
	if p.src.b != nil {
		t.Error("the lazy plugin keeps its module's bytes")
	}
	src := p.src
	if err := os.WriteFile(path, append(b, 0, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := src.bytes(); err == nil || !strings.Contains(err.Error(), "as it was when it loaded") {
		t.Errorf("reading the changed file = %v", err)
	}
	if r, err := h.CallTool(bg, agent("a", "m"), "counter", nil); err != nil || r.Text != "1" {
		t.Errorf("call after the file changed = %+v, %v; want the loaded module, from the cache", r, err)
	}
}

// A manifest is keyed by the plugin's grants: the same plugin loaded
// with other grants does not replay the manifest of the first (its init
// may have learnt what it was granted, or a hook may act on it later),
// but loads eagerly and records one of its own; loaded again with the
// first grants, it replays the first manifest.
func TestManifestKeyHoldsTheGrants(t *testing.T) {
	dir := t.TempDir()
	spec := Spec{Name: "kit", Source: testkit(t), Config: cfg(t, lazyKit),
		Grants: &config.Grants{SessionEvents: []string{"kit/one"}}}
	record(t, dir, spec)
	if ms := manifestsIn(t, dir); len(ms) != 1 {
		t.Fatalf("%d manifests after the first load, want 1", len(ms))
	}

	other := spec
	other.Grants = &config.Grants{SessionEvents: []string{"kit/one", "kit/two"}}
	h, p := loadAgain(t, dir, other)
	if !p.compiled.Load() || p.Instances() != 1 {
		t.Fatalf("other grants: compiled %v, %d instances; want an eager load, not a replay of the first grants' manifest",
			p.compiled.Load(), p.Instances())
	}
	h.Close(bg)
	if ms := manifestsIn(t, dir); len(ms) != 2 || ms[0].Key == ms[1].Key {
		t.Fatalf("manifests after a load with other grants: %d; want one per grants", len(ms))
	}

	_, p = loadAgain(t, dir, spec)
	if p.compiled.Load() || p.Instances() != 0 {
		t.Fatalf("the first grants again: compiled %v, %d instances; want a lazy load", p.compiled.Load(), p.Instances())
	}
}

// listedSubagents offers providers and runs none.
type listedSubagents []hostfns.SubagentProvider

func (l listedSubagents) Providers() []hostfns.SubagentProvider { return l }

func (l listedSubagents) Run(context.Context, prompt.AgentFacts, hostfns.SubagentRunRequest) (hostfns.SubagentRunResponse, error) {
	return hostfns.SubagentRunResponse{}, errors.New("listedSubagents runs no child")
}

// lazySubagentHost is lazyHost serving subagent_providers from subs.
func lazySubagentHost(t *testing.T, dir string, subs Subagents) *Host {
	t.Helper()
	shared := sharedCache(t)
	c := &Cache{m: shared.m.WithManifests(dir)}
	h, err := New(Options{Registry: prompt.NewRegistry(nil), Cache: c, Logger: slog.New(slog.DiscardHandler),
		LazyCompile: true, Subagents: subs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(bg) })
	return h
}

// A replayed host call whose answer has the recorded status but another
// content diverges: a dsh_init that read the subagent providers (and
// registers a tool per provider, say) loads eagerly when the host offers
// other providers, and its guest sees today's list.
func TestReplayComparesTheAnswersContent(t *testing.T) {
	dir := t.TempDir()
	kit := map[string]any{
		"sections":    []map[string]any{{"name": "kit:dyn", "order": 130, "dynamic": true}},
		"init_probes": []map[string]any{{"fn": hostfns.FnSubagentProviders, "req": `{}`}},
	}
	spec := Spec{Name: "kit", Source: testkit(t), Config: cfg(t, kit)}
	one := listedSubagents{{Name: "spawn"}}
	two := listedSubagents{{Name: "spawn"}, {Name: "fork", InheritsParentContext: true}}
	load := func(subs Subagents) (*Host, *Plugin) {
		t.Helper()
		h := lazySubagentHost(t, dir, subs)
		p, err := h.Load(bg, spec)
		if err != nil {
			t.Fatal(err)
		}
		return h, p
	}

	h, p := load(one)
	if !p.compiled.Load() {
		t.Fatal("the first load was not eager")
	}
	h.Close(bg)
	if ms := manifestsIn(t, dir); len(ms) != 1 || !slices.ContainsFunc(ms[0].Calls, func(c lazy.Call) bool { return c.Fn == hostfns.FnSubagentProviders }) {
		t.Fatalf("manifests after the first load: %+v", ms)
	}
	// The same providers: the record replays (the test is not vacuous).
	h, p = load(one)
	if p.compiled.Load() {
		t.Fatal("the same providers: an eager load, want a replay")
	}
	h.Close(bg)

	// Other providers, the same status: not a replay.
	_, p = load(two)
	if !p.compiled.Load() || p.Instances() != 1 {
		t.Fatalf("other providers: compiled %v, %d instances; want an eager load", p.compiled.Load(), p.Instances())
	}
	st := loadTimeState(t, p)
	if len(st.Probes) != 1 || st.Probes[0].Status != 0 || !strings.Contains(st.Probes[0].Message, `"fork"`) {
		t.Fatalf("the guest's subagent_providers = %+v; want today's list, with fork", st.Probes)
	}
}
