package plugin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/abi/dsh"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/lazy"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

// A load-time instance's history is what it did through the host: the
// host calls of its dsh_init, with their answers, then those of each event
// it handled that belonged to no agent. While every call in it can be
// answered again, and the guest neither used its files nor printed (what
// a re-run would do again), a new load-time instance (the first was
// discarded, or the plugin loaded lazily) re-runs that history with each
// host call answered from the record and nothing done twice (rerun), so
// that it ends in the state the first one had. The guest must ask for
// exactly what it asked for the first time; if it does not, or the re-run
// fails, the instance is made with dsh_setup instead, like a per-agent
// one, and the history is dropped.
//
// A lazy load (Options.LazyCompile) registers a plugin without compiling
// its module, from a manifest: the history its last load recorded in the
// cache, under a key of everything its dsh_init could see. The module is
// compiled, and its first instance made, when something first needs its
// code: a tool call, a dynamic section or variable, an event the manifest
// did not record. A warm start then costs a small file read per plugin
// instead of turning megabytes of cached machine code back into a module.
//
// What is recorded for a manifest: a dsh_init that called only the host
// functions of lazy.Replayable (logging, registrations, needs, subscriptions,
// and reads that change nothing), each of whose answers a replay asks for
// again; that did not touch its fs jail (not even a listing); and that
// wrote nothing to stdout or stderr. The key holds the module's digest,
// the plugin's name (its argv[0]), config, limits and grants, the values
// of the environment variables it may read, the guest paths of its
// load-time mounts and the ABI version. The wall clock and randomness are
// not in the key: instead a record is written only if a second run, in a
// fresh instance (its module initialiser run again) with the clock a
// year and a day on and random bytes of its own, asks the host for
// exactly the same (repeats). Then, up to lazy.MaxEvents, the agentless events
// the load-time instance handled after it under the same rules, each
// checked the same way with the whole history: a lazy load answers the
// same event with the same payload, in the same order, by replaying its
// host calls (a subagent plugin registers its tool when its provider
// arrives).
//
// A replay runs each recorded request through the same checks and
// implementation as the live call, against today's registry, and compares
// each answer with the recorded one. A dsh_init whose answers differ
// (another plugin now owns a name, the plugin's limits refuse it) is
// undone and the plugin loads as without a manifest; an event whose
// answers differ is carried on by the guest, in a load-time instance
// whose re-run answers the event's calls so far as they were just
// answered. A manifest is written only after a load that committed, so a
// plugin whose init fails never gets one, and fails at every load.

// errReplayDiverged: a recorded host call was answered differently now.
var errReplayDiverged = lazy.ErrDiverged

// repeats re-runs h in a fresh load-time instance (from the module's
// initialiser, not an image) whose wall clock is lazy.ClockShift ahead and
// whose random bytes are its own, every host call answered from h: a
// guest that asks the host for exactly the same things at another time,
// with other randomness, registered nothing that depends on either (a Go
// guest reads the clock when it loads a time zone, say). Only then may h
// be replayed at a later load.
func (p *Plugin) repeats(ctx context.Context, h *lazy.History) bool {
	if !p.holdRuntime() {
		return false
	}
	defer p.letGoRuntime() // after the check's instance is closed
	in, err := p.newInstanceWith(ctx, true, nil, lazy.ClockShift, true)
	if err != nil {
		return false
	}
	defer in.close(errDiscarded)
	return in.rerun(ctx, h) == nil
}

// lazyEligible reports whether the plugin may load from a manifest and
// have its init recorded for one.
func (h *Host) lazyEligible(spec Spec) bool {
	return h.lazy && h.cache.keepsManifests() && !spec.Inspect && !spec.noInterrupt &&
		spec.checkNeeds == nil && (spec.ABI == "" || spec.ABI == ABIDsh)
}

// manifestKey is the key of the plugin's manifest (see above).
func (p *Plugin) manifestKey() (string, error) {
	mounts, err := p.fsRoots(nil)
	if err != nil {
		return "", err
	}
	limits, err := json.Marshal(p.limits)
	if err != nil {
		return "", err
	}
	grants, err := json.Marshal(p.spec.Grants)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	field := func(s string) {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	field(lazy.Version)
	field(strconv.Itoa(hostfns.ABIVersion))
	field(p.digest)
	field(p.name)
	field(string(p.config))
	field(string(limits))
	field(string(grants))
	env := p.envList()
	field(strconv.Itoa(len(env)))
	for _, kv := range env {
		field(kv)
	}
	field(strconv.Itoa(len(mounts)))
	for _, m := range mounts {
		field(m.GuestPath)
		field(strconv.FormatBool(m.ReadOnly))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// keepsManifests reports whether c has a place for manifests.
func (c *Cache) keepsManifests() bool {
	_, ok := c.mod().Manifests()
	return ok
}

// readManifest returns the manifest stored under key, if there is a
// well-formed one whose bytes are what their name says.
func (c *Cache) readManifest(key string) (*lazy.Manifest, bool) {
	store, ok := c.mod().Manifests()
	if !ok {
		return nil, false
	}
	return lazy.Read(store, key)
}

// writeManifest stores m, best effort: a manifest that is not written
// costs the next load a compilation.
func (c *Cache) writeManifest(m *lazy.Manifest) {
	if store, ok := c.mod().Manifests(); ok {
		lazy.Write(store, m)
	}
}

// dropManifest removes the manifest stored under key, if any.
func (c *Cache) dropManifest(key string) {
	if store, ok := c.mod().Manifests(); ok {
		store.Drop(key)
	}
}

// recordedManifest is the manifest of the init rec recorded, or nil with
// the reason it cannot be replayed.
func (p *Plugin) recordedManifest(ctx context.Context, rec *lazy.Recorder, load *instance, took time.Duration) (*lazy.Manifest, string) {
	switch {
	case rec.Why != "":
		return nil, rec.Why
	case rec.Bytes > lazy.MaxManifest:
		return nil, "its host calls are too large to record"
	case wasiEffects(load):
		return nil, "it used its files or printed"
	case took > lazy.MaxRepeatCheck:
		return nil, "it took too long to run again as a check"
	case !p.repeats(ctx, &lazy.History{Init: rec.Calls}):
		return nil, "run again with another clock and other random bytes, it asks the host for other things"
	}
	return &lazy.Manifest{Version: lazy.Version, Key: p.key, Exports: slices.Sorted(maps.Keys(p.exports)), Calls: rec.Calls, Bytes: rec.Bytes}, ""
}

// replayInit registers what the manifest's dsh_init registered, as that
// init would now: each recorded request goes through the live checks and
// implementation, and must be answered as it was.
func (p *Plugin) replayInit(ctx context.Context, tx *prompt.Tx) error {
	p.contrib.reset()
	in := &instance{p: p, loadTime: true}
	cs := &callState{ctx: ctx, tx: tx, init: true, export: hostfns.ExportInit}
	// The history holds the answers as given now: a manifest holds only
	// the digest of a secret one (lazy.Call.Sealed), and a new load-time
	// instance is answered from the history.
	live := make([]lazy.Call, len(p.manifest.Calls))
	for i, c := range p.manifest.Calls {
		st, payload, ok := in.replayCall(cs, c)
		if !ok {
			return fmt.Errorf("%w: call %d (%s) was answered %d and now %d", errReplayDiverged, i+1, c.Fn, c.Status, st)
		}
		live[i] = lazy.Call{Fn: c.Fn, Req: c.Req, Status: st, Resp: payload}
	}
	if err := p.checkNeeds(); err != nil {
		return err
	}
	p.mu.Lock()
	p.history = &lazy.History{Init: live, Bytes: lazy.RecordBytes(live)}
	p.mu.Unlock()
	return nil
}

// replayCall serves a recorded call again and reports whether it was
// answered as recorded.
func (in *instance) replayCall(cs *callState, c lazy.Call) (hostfns.Status, []byte, bool) {
	f, ok := hostFunc(c.Fn)
	if !ok || !lazy.Replayable[c.Fn] {
		return hostfns.ErrNotFound, []byte(c.Fn + ": not a host function a record may hold"), false
	}
	st, payload := in.replay(f, cs, c.Req)
	return st, payload, c.Answers(st, payload)
}

func hostFunc(name string) (hostfns.Func, bool) {
	i := slices.IndexFunc(hostfns.Funcs, func(f hostfns.Func) bool { return f.Name == name })
	if i < 0 || dsh.Impls[name] == nil {
		return hostfns.Func{}, false
	}
	return hostfns.Funcs[i], true
}

// ensureCompiled compiles a lazily loaded plugin's module, once; every
// instance is made after it. A failure is the caller's (the call that
// needed the module), and the next caller tries again.
func (p *Plugin) ensureCompiled(ctx context.Context) error {
	if p.compiled.Load() {
		return nil
	}
	p.compileMu.Lock()
	defer func() {
		p.compileMu.Unlock()
		p.releaseRuntime() // the plugin may have closed meanwhile
	}()
	if p.compiled.Load() {
		return nil
	}
	if p.rtClosed || p.closing.Load() {
		return fmt.Errorf("plugin %q: %w", p.name, ErrNotLoaded)
	}
	if p.broken != nil {
		return p.broken
	}
	start := time.Now()
	if err := p.compile(ctx); err != nil {
		err = &CallError{Plugin: p.name, Export: "compile", Err: err}
		if errors.Is(err, ErrABI) {
			// The module is not what its manifest said (or does not
			// compile): that will not change, so no call tries again,
			// and the next load does not use the manifest.
			p.broken = err
			p.h.cache.dropManifest(p.key)
		}
		return err
	}
	p.src = nil
	p.compiled.Store(true)
	p.log.Debug("module compiled after a lazy load", "took", time.Since(start))
	return nil
}

// saveManifest writes what the committed init recorded, if anything, and
// goes on recording the load-time instance's events into it.
func (p *Plugin) saveManifest() {
	p.mu.Lock()
	m := p.recorded
	p.recorded, p.saved = nil, m
	p.mu.Unlock()
	if m != nil {
		p.h.cache.writeManifest(m)
	}
}

// wasiEffects reports whether the instance's guest used its files (a
// lookup, a listing, a read or a write) or printed: what a re-run would
// do again, or what a replay would not see.
func wasiEffects(in *instance) bool {
	lw, ok := in.logw.(*lineLogger)
	return in.jail != nil && in.jail.Used() || ok && lw.wrote.Load()
}

// historyFor returns the history a new load-time instance re-runs, or
// nil: for a per-agent instance, the first load-time instance, or a
// plugin whose history cannot be answered again.
func (p *Plugin) historyFor(loadTime bool) *lazy.History {
	if !loadTime {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.initing {
		return nil
	}
	return p.history
}

// rerun re-runs h in a new load-time instance: dsh_init, then each event,
// all within the init budget's wall time, so that a plugin slow only the
// second time costs what a slow dsh_setup would.
func (in *instance) rerun(ctx context.Context, h *lazy.History) error {
	p := in.p
	ctx, cancel := context.WithTimeout(ctx, p.limits.InitTimeout)
	defer cancel()
	r := lazy.NewReplayer(h.Init, false)
	st, out, err := in.invoke(ctx, &callState{init: true, replay: r}, hostfns.ExportInit, p.limits.InitTimeout, p.config)
	if err = r.Done(st, out, err, hostfns.OutOK, nil); err != nil {
		return &CallError{Plugin: p.name, Export: hostfns.ExportInit, Err: fmt.Errorf("re-run for a new load-time instance: %w", err)}
	}
	for _, ev := range h.Events {
		r := lazy.NewReplayer(ev.Calls, false)
		st, out, err := in.invoke(ctx, &callState{replay: r}, hostfns.ExportEvent, p.limits.CallTimeout, []byte(ev.Event), emptyContext, ev.Payload)
		if err = r.Done(st, out, err, ev.Status, ev.Out); err != nil {
			return &CallError{Plugin: p.name, Export: hostfns.ExportEvent, Err: fmt.Errorf("re-run of %s for a new load-time instance: %w", ev.Event, err)}
		}
	}
	return nil
}

// loadTimeEvent delivers an event that belongs to no agent: replayed from
// the manifest when the plugin loaded lazily and this is the event it
// recorded next, or else to the load-time instance, recorded into its
// history (and the manifest, while it is being recorded).
func (p *Plugin) loadTimeEvent(ctx context.Context, event string, payload []byte) (hostfns.OutStatus, []byte, error) {
	st, out, handled, cont, spent := p.replayEvent(ctx, event, payload)
	if handled {
		return st, out, nil
	}
	in, err := p.loadInstance(ctx)
	if err != nil {
		if cont != nil {
			// Part of the event is in the registry and none of it in a
			// guest: no history can rebuild that state.
			p.dropHistory()
		}
		return 0, nil, err
	}
	cs := &callState{}
	if p.keepsHistory() {
		cs.rec = &lazy.Recorder{}
	}
	if cont != nil {
		// The calls already answered are replayed to the guest, and
		// recorded with the rest: the event enters the history whole.
		cs.replay = lazy.NewReplayer(cont, true)
		cs.hostBytes = spent // one event, one host byte budget
		if cs.rec != nil {
			cs.rec.Calls, cs.rec.Bytes = slices.Clone(cont), lazy.RecordBytes(cont)
		}
	}
	var held bool
	var next *lazy.Manifest
	var hist *lazy.History
	cs.held = func(st hostfns.OutStatus, out []byte, err error) {
		held = true
		next, hist = p.noteEvent(cs.rec, in, lazy.Event{Event: event, Payload: bytes.Clone(payload), Status: st, Out: bytes.Clone(out)}, err)
	}
	start := time.Now()
	st, out, err = in.invoke(ctx, cs, hostfns.ExportEvent, p.limits.CallTimeout, []byte(event), emptyContext, payload)
	if next != nil && time.Since(start) > lazy.MaxRepeatCheck {
		next = nil // the check would double a slow event's time for its emitter
		p.stopManifest()
	}
	if !held && cs.rec != nil {
		p.dropHistory() // the call failed before it held the instance
	}
	p.extendManifest(ctx, next, hist)
	return st, out, err
}

// stopManifest stops recording events into the manifest; the history
// goes on.
func (p *Plugin) stopManifest() {
	p.mu.Lock()
	p.saved = nil
	p.mu.Unlock()
}

func (p *Plugin) dropHistory() {
	p.mu.Lock()
	p.history, p.saved = nil, nil
	p.mu.Unlock()
}

func (p *Plugin) keepsHistory() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.history != nil
}

// replayEvent answers event from the manifest's record, if the plugin
// loaded lazily, has no load-time instance yet, and recorded this event
// next. When an answer differs, the calls so far are returned as cont,
// for the guest to carry on from, with the host bytes they spent.
func (p *Plugin) replayEvent(ctx context.Context, event string, payload []byte) (_ hostfns.OutStatus, _ []byte, handled bool, cont []lazy.Call, spent int64) {
	if p.manifest == nil {
		return 0, nil, false, nil, 0
	}
	p.loadCreate.Lock() // no load-time instance is made meanwhile
	defer p.loadCreate.Unlock()
	p.mu.Lock()
	i, hist := p.eventsUsed, p.history
	ok := p.load == nil && hist != nil && i < len(p.manifest.Events)
	if ok {
		ev := p.manifest.Events[i]
		ok = ev.Event == event && bytes.Equal(ev.Payload, payload)
	}
	if !ok {
		p.eventsUsed = len(p.manifest.Events) // the guest takes over from here
		p.mu.Unlock()
		return 0, nil, false, nil, 0
	}
	p.eventsUsed++
	p.mu.Unlock()
	ev := p.manifest.Events[i]
	in := &instance{p: p, loadTime: true}
	cs := &callState{ctx: ctx}
	live := make([]lazy.Call, len(ev.Calls))
	for k, c := range ev.Calls {
		st, resp, same := in.replayCall(cs, c)
		live[k] = lazy.Call{Fn: c.Fn, Req: c.Req, Status: st, Resp: resp}
		if !same {
			got := slices.Clone(live[:k+1]) // the calls so far, as answered now
			p.log.Debug("a recorded event no longer replays; the guest carries it on", "event", event, "call", k+1)
			p.mu.Lock()
			p.eventsUsed = len(p.manifest.Events)
			p.mu.Unlock()
			return 0, nil, false, got, cs.hostBytes
		}
	}
	ev.Calls = live // as answered now: the manifest may hold only digests
	p.mu.Lock()
	p.history = hist.With(ev, lazy.EventBytes(ev))
	p.mu.Unlock()
	return ev.Status, ev.Out, true, nil, 0
}

// noteEvent adds a handled event to the load-time instance's history,
// and returns the manifest that would record the history as it now is,
// with that history, for extendManifest to check and write; nil when the
// manifest stops growing. An event that cannot be answered again, or
// that used the instance's files or printed, ends both. It runs while
// the instance is held (callState.held), so that the history takes events
// in the order the guest handled them.
func (p *Plugin) noteEvent(rec *lazy.Recorder, in *instance, ev lazy.Event, err error) (*lazy.Manifest, *lazy.History) {
	if rec == nil {
		return nil, nil
	}
	if err != nil || rec.Why != "" || wasiEffects(in) {
		p.dropHistory()
		return nil, nil
	}
	ev.Calls = rec.Calls
	p.mu.Lock()
	defer p.mu.Unlock()
	p.history = p.history.With(ev, lazy.EventBytes(ev))
	var next *lazy.Manifest
	if p.saved != nil && in == p.load {
		next = p.saved.Extended(p.history)
	}
	if next == nil {
		p.saved = nil
		return nil, nil
	}
	return next, p.history
}

// extendManifest writes next, the manifest of the history hist, if that
// whole history repeats (repeats). The check runs outside the plugin's
// lock, so the events of a history can finish their checks in any order:
// a manifest is only ever replaced by a longer one, and what it records is
// always one whole history that was checked, never a history with an
// event left out.
func (p *Plugin) extendManifest(ctx context.Context, next *lazy.Manifest, hist *lazy.History) {
	if next == nil {
		return
	}
	ok := p.repeats(ctx, hist)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.saved == nil || len(p.saved.Events) >= len(next.Events):
		return // dropped meanwhile, or a later event's check got there first
	case !ok:
		p.saved = nil
		return
	}
	p.saved = next
	p.h.cache.writeManifest(next)
}

// CompileAll compiles the module of every loaded plugin that loaded lazily
// and has not needed it yet, one plugin at a time, until ctx is done: for
// a long-running host that would rather compile in the background now
// than on each plugin's first call. It returns what failed (a plugin's
// first call would fail the same way).
func (h *Host) CompileAll(ctx context.Context) error {
	h.mu.RLock()
	ps := make([]*Plugin, 0, len(h.plugins))
	for _, p := range h.plugins {
		ps = append(ps, p)
	}
	h.mu.RUnlock()
	slices.SortFunc(ps, func(a, b *Plugin) int { return strings.Compare(a.name, b.name) })
	var errs []error
	for _, p := range ps {
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		if err := p.ensureCompiled(ctx); err != nil && !errors.Is(err, ErrNotLoaded) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
