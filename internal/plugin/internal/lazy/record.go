package lazy

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/abi/dsh"
)

// MaxRepeatCheck is the longest dsh_init, or agentless event, that is
// run a second time to see whether it repeats: a slower one is not
// recorded, so that recording never costs much more than the load, or an
// event's emitter much more than the event.
const MaxRepeatCheck = time.Second

// Replayable are the host functions a record may hold: the
// dsh.SetupNeutral ones, and reads that change nothing, whose answers a
// replay asks for again and compares (the subagent providers the host
// offers, a granted environment variable).
var Replayable = func() map[string]bool {
	m := maps.Clone(dsh.SetupNeutral)
	m[hostfns.FnSubagentProviders] = true
	m[hostfns.FnEnvGet] = true
	return m
}()

// ErrDiverged: a recorded host call was answered differently now, or a
// re-run did not ask what the record holds.
var ErrDiverged = errors.New("the recorded history no longer replays")

// Memory is the guest memory a request is read from (api.Memory).
type Memory interface {
	Read(offset, byteCount uint32) ([]byte, bool)
}

// A Recorder collects the host calls of a dsh_init or an agentless
// event. Why, once set, says why they cannot be replayed; it is written
// only from the call's goroutine.
type Recorder struct {
	Calls []Call
	Bytes int
	Why   string
}

// Note records a host call of fn, its request at inPtr+inLen in mem, and
// its answer; or why it cannot be replayed.
func (r *Recorder) Note(mem Memory, fn string, inPtr, inLen uint32, st hostfns.Status, payload []byte) {
	if r.Why != "" {
		return
	}
	if !Replayable[fn] {
		r.Why = "it called " + fn
		return
	}
	if st == hostfns.ErrBadPointer {
		// Refused for where its buffers lie, which a replay (no guest
		// memory) cannot check: it would be served instead.
		r.Why = "it gave " + fn + " a bad pointer"
		return
	}
	req, ok := mem.Read(inPtr, inLen)
	if !ok {
		r.Why = "a request outside guest memory"
		return
	}
	if r.Bytes += CallBytes(fn, len(req), len(payload)); r.Bytes > MaxRecorded {
		r.Why = "its requests are too large to record"
		r.Calls = nil
		return
	}
	r.Calls = append(r.Calls, Call{Fn: fn, Req: bytes.Clone(req), Status: st, Resp: bytes.Clone(payload)})
}

// A Replayer answers a re-run's host calls from a record. The guest must
// ask the same, in the same order: what it registered then is what the
// registry holds. With live set, the calls after the record are served
// as usual (an event carried on after its replay diverged).
type Replayer struct {
	calls    []Call
	next     int
	live     bool
	diverged string
}

// NewReplayer answers from calls; live: serve the calls past them.
func NewReplayer(calls []Call, live bool) *Replayer {
	return &Replayer{calls: calls, live: live}
}

// Answer answers the next call, of fn with its request at inPtr+inLen in
// mem, from the record; ok false means serve it.
func (r *Replayer) Answer(mem Memory, fn string, inPtr, inLen uint32) (_ hostfns.Status, _ []byte, ok bool) {
	if r.diverged == "" && r.live && r.next >= len(r.calls) {
		return 0, nil, false
	}
	if r.diverged == "" {
		req, ok := mem.Read(inPtr, inLen)
		switch {
		case r.next >= len(r.calls):
			r.diverged = fmt.Sprintf("host call %d (%s) is past the %d recorded", r.next+1, fn, len(r.calls))
		case !ok:
			r.diverged = fmt.Sprintf("host call %d (%s) has a request outside guest memory", r.next+1, fn)
		case r.calls[r.next].Fn != fn || !bytes.Equal(r.calls[r.next].Req, req):
			r.diverged = fmt.Sprintf("host call %d is %s, and was %s with another request", r.next+1, fn, r.calls[r.next].Fn)
		}
	}
	if r.diverged != "" {
		return hostfns.ErrCanceled, []byte(fn + ": the re-run did not repeat the first: " + r.diverged), true
	}
	c := r.calls[r.next]
	r.next++
	return c.Status, c.Resp, true
}

// Done reports how the re-run of one export went: err, or ErrDiverged
// when it made other calls than recorded or returned other than wantSt
// and wantOut.
func (r *Replayer) Done(st hostfns.OutStatus, out []byte, err error, wantSt hostfns.OutStatus, wantOut []byte) error {
	if err == nil && r.diverged == "" && r.next < len(r.calls) {
		r.diverged = fmt.Sprintf("it made %d of the %d host calls recorded", r.next, len(r.calls))
	}
	if err == nil && r.diverged == "" && (st != wantSt || !bytes.Equal(out, wantOut)) {
		r.diverged = fmt.Sprintf("it returned %d %q, and %d %q the first time", st, out, wantSt, wantOut)
	}
	if r.diverged != "" {
		return fmt.Errorf("%w: %s", ErrDiverged, r.diverged)
	}
	return err
}

// Extended is m with the events of h, or nil when a manifest of h would
// pass MaxEvents or MaxManifest (the manifest stops growing).
func (m Manifest) Extended(h *History) *Manifest {
	if h == nil || len(h.Events) > MaxEvents {
		return nil
	}
	m.Events = slices.Clone(h.Events)
	if m.Bytes = m.Size(); m.Bytes > MaxManifest {
		return nil
	}
	return &m
}
