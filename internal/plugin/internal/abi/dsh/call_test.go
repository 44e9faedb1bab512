package dsh

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
)

// fakeHost is the little of a Host the calling convention uses; any other
// method panics (the embedded interface is nil).
type fakeHost struct {
	Host
	call    Call
	budget  int64
	scratch Scratch
}

func (h *fakeHost) Call() Call           { return h.call }
func (h *fakeHost) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func (h *fakeHost) Limits() Limits       { return Limits{HostBytes: 100, PromptBytes: 1 << 10} }
func (h *fakeHost) Scratch() *Scratch    { return &h.scratch }
func (h *fakeHost) ChargeHost(n int64) bool {
	if n > h.budget {
		return false
	}
	h.budget -= n
	return true
}

func fn(name string) hostfns.Func {
	for _, f := range hostfns.Funcs {
		if f.Name == name {
			return f
		}
	}
	panic(name)
}

// TestHandleNeverPanics: a host function that panics (here, through a
// method its Host does not have) is answered ErrInternal, named once; a
// request that is not UTF-8 and a load-time function outside the
// load-time instance never reach the implementation; a response past
// the host byte budget is refused.
func TestHandleNeverPanics(t *testing.T) {
	h := &fakeHost{budget: 100}
	st, msg := Handle(h, fn(hostfns.FnStateGet), Impls[hostfns.FnStateGet], []byte(`{"key":"k"}`))
	if st != hostfns.ErrInternal || string(msg) != "state_get: internal error" {
		t.Errorf("a panicking function: %v %q; want ErrInternal, state_get: internal error", st, msg)
	}
	reached := false
	impl := func(Host, []byte) ([]byte, hostfns.Status, string) {
		reached = true
		return []byte(strings.Repeat("x", 200)), 0, ""
	}
	if st, msg := Handle(h, fn(hostfns.FnLog), impl, []byte{0xff}); st != hostfns.ErrBadUTF8 || reached {
		t.Errorf("not UTF-8: %v %q, reached %v", st, msg, reached)
	}
	if st, msg := Handle(h, fn(hostfns.FnSectionRegister), impl, []byte(`{}`)); st != hostfns.ErrDenied || reached {
		t.Errorf("a load-time function in a per-agent instance: %v %q, reached %v", st, msg, reached)
	}
	h.call.LoadTime = true
	if st, msg := Handle(h, fn(hostfns.FnSectionRegister), impl, []byte(`{}`)); st != hostfns.ErrLimit || !reached || !strings.Contains(string(msg), "host byte budget") {
		t.Errorf("a response past the budget: %v %q, reached %v", st, msg, reached)
	}
}

// TestAdmitChargesBeforeReading: a request past its function's limit or
// the call's host byte budget is refused by its length alone.
func TestAdmitChargesBeforeReading(t *testing.T) {
	h := &fakeHost{budget: 100}
	if st, msg := Admit(h, fn(hostfns.FnStateGet), SmallRequest+1); st != hostfns.ErrTooLarge {
		t.Errorf("past the limit: %v %q", st, msg)
	}
	if st, _ := Admit(h, fn(hostfns.FnLog), 60); st != hostfns.StatusOK || h.budget != 40 {
		t.Errorf("within the budget: %v, %d left", st, h.budget)
	}
	if st, msg := Admit(h, fn(hostfns.FnLog), 41); st != hostfns.ErrLimit || h.budget != 40 {
		t.Errorf("past the budget: %v %q, %d left (want nothing charged)", st, msg, h.budget)
	}
}
