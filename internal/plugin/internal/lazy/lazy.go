// Package lazy is the record of a plugin's load: the host calls of its
// dsh_init and of the agentless events it handled after, with their
// answers (a History while the plugin is loaded, a Manifest in the cache
// for a lazy load), their bounds, the manifest file, what a record may
// hold, the recorder of a call's host calls, and the replayer that
// answers a re-run from a record and tells whether it repeated. When a
// record is made, checked and replayed is the host's (internal/plugin,
// manifest.go), which runs the instances.
package lazy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/modcache"
)

// Version names the manifest format, the replay rules, and what a
// guest sees as it starts that the key does not hold (its WASI arguments
// and environment beyond the granted variables, the config's framing):
// change it when any of them changes, and old manifests stop matching.
const Version = "dsh-manifest-v2"

// MaxRecorded caps the bytes of requests and answers a load-time
// instance's history holds (past it, a new load-time instance is set up
// with dsh_setup); MaxManifest those a manifest holds, init and events
// (past it, the plugin loads eagerly, or the manifest records no more
// events). A real plugin's record is a few KiB; the caps bound what a
// hostile one makes the host keep in memory and write to disk.
const (
	MaxRecorded = 4 << 20
	MaxManifest = 1 << 20
)

type Call struct {
	Fn     string         `json:"fn"`
	Req    []byte         `json:"req"`
	Status hostfns.Status `json:"status"`
	Resp   []byte         `json:"resp,omitempty"`
	// RespSHA256 stands for Resp in a manifest when the answer is a
	// secret (Sealed): the hex sha256 of the answer, never the answer.
	RespSHA256 string `json:"resp_sha256,omitempty"`
}

// secret are the host functions whose answers a manifest never holds: a
// granted environment variable is often a key, and the cache directory
// is no place for it. A replay asks the host again and compares digests.
var secret = map[string]bool{hostfns.FnEnvGet: true}

// Sealed is c as a manifest holds it: a secret answer replaced by its
// sha256.
func (c Call) Sealed() Call {
	if !secret[c.Fn] || c.RespSHA256 != "" {
		return c
	}
	sum := sha256.Sum256(c.Resp)
	c.RespSHA256, c.Resp = hex.EncodeToString(sum[:]), nil
	return c
}

// Answers reports whether st and resp are the answer c recorded, by its
// digest for a sealed call.
func (c Call) Answers(st hostfns.Status, resp []byte) bool {
	if st != c.Status {
		return false
	}
	if c.RespSHA256 != "" {
		sum := sha256.Sum256(resp)
		return hex.EncodeToString(sum[:]) == c.RespSHA256
	}
	return bytes.Equal(resp, c.Resp)
}

// sealed returns calls with every secret answer sealed.
func sealed(calls []Call) []Call {
	out := make([]Call, len(calls))
	for i, c := range calls {
		out[i] = c.Sealed()
	}
	return out
}

type Event struct {
	Event   string            `json:"event"`
	Payload []byte            `json:"payload"`
	Calls   []Call            `json:"calls"`
	Status  hostfns.OutStatus `json:"status"`
	Out     []byte            `json:"out,omitempty"`
}

type Manifest struct {
	Version string   `json:"version"`
	Key     string   `json:"key"`
	Exports []string `json:"exports"`
	Calls   []Call   `json:"calls"`
	Events  []Event  `json:"events,omitempty"`
	Bytes   int      `json:"-"` // what the record holds, against MaxManifest
}

// History is a load-time instance's record (see above); it is never
// changed once a plugin holds it, only replaced.
type History struct {
	Init   []Call
	Events []Event
	Bytes  int
}

// With returns h with ev appended, or nil past the record's bounds.
func (h *History) With(ev Event, n int) *History {
	if h == nil || len(h.Events) >= MaxHistoryEvents || h.Bytes+n > MaxRecorded {
		return nil
	}
	return &History{Init: h.Init, Events: append(slices.Clip(h.Events), ev), Bytes: h.Bytes + n}
}

// MaxEvents caps the events a manifest records; MaxHistoryEvents those a
// load-time instance's history keeps (past it, a new load-time instance
// is set up with dsh_setup).
const (
	MaxEvents        = 32
	MaxHistoryEvents = 64
)

// CallBytes is what one recorded call counts against the bounds: its
// request and answer, and what keeping and writing the call costs besides
// (a small request still takes a slice header and a JSON object).
func CallBytes(fn string, req, resp int) int { return 64 + len(fn) + req + resp }

// RecordBytes is what calls count against the bounds.
func RecordBytes(calls []Call) int {
	n := 0
	for _, c := range calls {
		n += CallBytes(c.Fn, len(c.Req), len(c.Resp))
	}
	return n
}

// EventBytes is what an event counts, its calls included.
func EventBytes(ev Event) int {
	return 64 + len(ev.Event) + len(ev.Payload) + len(ev.Out) + RecordBytes(ev.Calls)
}

// ShiftedClock is a wall clock d ahead of the host's (repeats).
func ShiftedClock(d time.Duration) func() (int64, int32) {
	return func() (int64, int32) {
		t := time.Now().Add(d)
		return t.Unix(), int32(t.Nanosecond())
	}
}

// ClockShift is how far a check (repeats) moves the wall clock: a year,
// a day, hours, minutes and seconds on, so that a registration showing
// any of them comes out different.
const ClockShift = 366*24*time.Hour + 25*time.Hour + 17*time.Minute + 29*time.Second + 123456789

// WithinBounds reports whether m has at most MaxEvents events and
// MaxManifest bytes of calls: what Read accepts and Write
// writes.
func (m *Manifest) WithinBounds() bool {
	return len(m.Events) <= MaxEvents && m.Size() <= MaxManifest
}

// Size is what the manifest counts against MaxManifest.
func (m *Manifest) Size() int {
	n := RecordBytes(m.Calls)
	for _, ev := range m.Events {
		n += EventBytes(ev)
	}
	return n
}

// Read returns the manifest store keeps under key, if there is a
// well-formed one whose bytes are what their name says.
func Read(store modcache.Store, key string) (*Manifest, bool) {
	// A manifest records at most MaxManifest bytes, each at most 4/3 as
	// long in base64; anything much longer is not one of ours.
	b, release, ok := store.Get(key, 4*MaxManifest-1)
	if !ok {
		return nil, false
	}
	defer release()
	var m Manifest
	if json.Unmarshal(b, &m) != nil || m.Version != Version || m.Key != key || !m.WithinBounds() {
		return nil, false
	}
	m.Bytes = m.Size()
	return &m, true
}

// Write stores m under its key, best effort: a manifest that is not
// written costs the next load a compilation. One that Read would refuse
// is dropped instead.
func Write(store modcache.Store, m *Manifest) {
	disk := *m
	disk.Calls = sealed(m.Calls)
	disk.Events = make([]Event, len(m.Events))
	for i, ev := range m.Events {
		ev.Calls = sealed(ev.Calls)
		disk.Events[i] = ev
	}
	b, err := json.Marshal(&disk)
	if err != nil || len(b) >= 4*MaxManifest || !m.WithinBounds() {
		store.Drop(m.Key)
		return
	}
	store.Put(m.Key, b)
}
