package plugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// LoadAll prepares modules concurrently but must leave the host exactly as
// the same Loads one after another would, errors included.

// kitTools are testkit's tools, one per plugin of loadAllSpecs.
var kitTools = []string{"counter", "echo", "trap", "spin", "fail", "probe"}

// loadAllSpecs are testkit plugins whose sections share one order, so the
// assembled order is their registration order.
func loadAllSpecs(t *testing.T, src string, n int) []Spec {
	specs := make([]Spec, n)
	for i := range specs {
		specs[i] = Spec{Name: fmt.Sprintf("kit%d", i), Source: src, Config: cfg(t, map[string]any{
			"sections":  []map[string]any{{"name": fmt.Sprintf("kit%d:s", i), "order": 5, "text": fmt.Sprintf("section %d", i)}},
			"variables": []string{fmt.Sprintf("v%d", i)},
			"tools":     []string{kitTools[i]},
		})}
	}
	return specs
}

// hostState is what a batch of loads leaves behind, for comparing.
type hostState struct {
	Plugins  []string
	Sections []string
	Tools    []string
	Vars     []string
}

func stateOf(t *testing.T, h *Host) hostState {
	t.Helper()
	asm, err := h.Registry().Assemble(bg, prompt.AssembleContext{Agent: agent("a", "m")})
	if err != nil {
		t.Fatal(err)
	}
	st := hostState{Plugins: h.Plugins()}
	for _, s := range asm.Sections {
		st.Sections = append(st.Sections, s.Name+"="+s.Text)
	}
	for _, tl := range asm.Tools {
		st.Tools = append(st.Tools, tl.Name)
	}
	for name, v := range asm.Variables {
		st.Vars = append(st.Vars, name+"="+v.Owner)
	}
	slices.Sort(st.Vars)
	return st
}

func sequentialLoads(t *testing.T, specs []Spec) (hostState, []string, error) {
	h := newHost(t)
	names := []string{}
	for _, s := range specs {
		p, err := h.Load(bg, s)
		if err != nil {
			return stateOf(t, h), names, err
		}
		names = append(names, p.Name())
	}
	return stateOf(t, h), names, nil
}

func batchLoad(t *testing.T, specs []Spec) (hostState, []string, error) {
	h := newHost(t)
	ps, err := h.LoadAll(bg, specs)
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name()
	}
	return stateOf(t, h), names, err
}

func TestLoadAllMatchesSequentialLoads(t *testing.T) {
	src := testkit(t)
	specs := loadAllSpecs(t, src, 6)
	want, wantNames, err := sequentialLoads(t, specs)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		got, names, err := batchLoad(t, specs)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(names, wantNames) {
			t.Fatalf("round %d: loaded %v, want %v", round, names, wantNames)
		}
		if !reflect.DeepEqual(got.Sections, want.Sections) || !reflect.DeepEqual(got.Tools, want.Tools) ||
			!reflect.DeepEqual(got.Plugins, want.Plugins) || !reflect.DeepEqual(got.Vars, want.Vars) {
			t.Fatalf("round %d:\n got %+v\nwant %+v", round, got, want)
		}
	}
}

// Each failure stops the batch where the same Loads would stop, with the
// same error, even when a later spec fails sooner (a missing file fails
// before its turn; an earlier plugin's init fails only at its turn).
func TestLoadAllStopsAtTheFirstFailureInOrder(t *testing.T) {
	src := testkit(t)
	missing := filepath.Join(t.TempDir(), "missing.wasm")
	failing := Spec{Name: "bad", Source: src, Config: cfg(t, map[string]any{"init_fail": "config rejected"})}
	clash := Spec{Name: "clash", Source: src, Config: cfg(t, map[string]any{"tools": []string{kitTools[0]}})}
	cases := map[string]func([]Spec) []Spec{
		"init fails":      func(s []Spec) []Spec { return []Spec{s[0], failing, {Source: missing}, s[1]} },
		"source missing":  func(s []Spec) []Spec { return []Spec{s[0], s[1], {Source: missing}, s[2]} },
		"name taken":      func(s []Spec) []Spec { return []Spec{s[0], s[1], s[0], s[2]} },
		"name invalid":    func(s []Spec) []Spec { return []Spec{s[0], {Name: "Bad Name", Source: src}, s[1]} },
		"tool name taken": func(s []Spec) []Spec { return []Spec{s[0], s[1], clash, s[2]} },
		"first fails":     func(s []Spec) []Spec { return []Spec{failing, s[0], s[1]} },
		"last fails":      func(s []Spec) []Spec { return []Spec{s[0], s[1], s[2], failing} },
		"duplicate sources": func(s []Spec) []Spec {
			return []Spec{s[0], s[1], s[2], {Source: missing}, {Name: "m2", Source: missing}}
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			specs := mk(loadAllSpecs(t, src, 3))
			want, wantNames, wantErr := sequentialLoads(t, specs)
			if wantErr == nil {
				t.Fatal("the sequential loads did not fail")
			}
			got, names, err := batchLoad(t, specs)
			if err == nil || err.Error() != wantErr.Error() {
				t.Fatalf("LoadAll: %v\nwant %v", err, wantErr)
			}
			if !reflect.DeepEqual(names, wantNames) || !reflect.DeepEqual(got, want) {
				t.Fatalf("after the failure:\n got %v %+v\nwant %v %+v", names, got, wantNames, want)
			}
		})
	}
}

// A failed batch leaves no goroutine, runtime or instance behind: the
// plugins prepared past the failure are closed, and the ones loaded before
// it are unloaded by Close as usual.
func TestLoadAllReleasesWhatItPrepared(t *testing.T) {
	src := testkit(t)
	specs := loadAllSpecs(t, src, 4)
	specs = append(specs[:2:2], Spec{Name: "bad", Source: src, Config: cfg(t, map[string]any{"init_fail": "no"})}, specs[2], specs[3])
	cache := sharedCache(t)
	runtime.GC()
	before := runtime.NumGoroutine()
	for range 3 {
		h, err := New(Options{Registry: prompt.NewRegistry(nil), Cache: cache, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ps, err := h.LoadAll(bg, specs)
		if !errors.Is(err, ErrGuest) || len(ps) != 2 {
			t.Fatalf("LoadAll: %d loaded, %v", len(ps), err)
		}
		if got := h.Plugins(); !reflect.DeepEqual(got, []string{"kit0", "kit1"}) {
			t.Fatalf("loaded %v", got)
		}
		if err := h.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if n := p.Instances(); n != 0 {
				t.Fatalf("%s: %d instances after Close", p.Name(), n)
			}
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("goroutines: %d before, %d after\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}

func TestLoadAllOnAClosedHost(t *testing.T) {
	h := newHost(t)
	h.Close(bg)
	ps, err := h.LoadAll(bg, loadAllSpecs(t, testkit(t), 2))
	if !errors.Is(err, ErrClosed) || len(ps) != 0 {
		t.Fatalf("LoadAll on a closed host: %d, %v", len(ps), err)
	}
	if ps, err := h.LoadAll(bg, nil); err != nil || len(ps) != 0 {
		t.Fatalf("LoadAll of nothing: %v, %v", ps, err)
	}
}
