//go:build wasip1

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/hostfns/guest"
)

func init() {
	register("abi-oob", abiOOB)
	register("abi-overlap", abiOverlap)
	register("abi-utf8", abiUTF8)
	register("abi-json-deep", abiJSONDeep)
	register("abi-json-wide", abiJSONWide)
	register("abi-oversize", abiOversize)
	register("abi-take", abiTake)
	register("register-late", registerLate)
	register("capabilities-late", capabilitiesLate)
	register("emit-foreign", emitForeign)
	register("emit-reentrant", emitReentrant)
	register("state-keys", stateKeys)
	register("state-flood", stateFlood)
	register("state-plant", statePlant)
	register("state-steal", stateSteal)
	register("log-flood", logFlood)
	register("stdout-flood", stdoutFlood)
	register("env-get", envGet)
	register("env-wasi", envWASI)
	register("exec", execRun)
	register("exec-start", execStart)
	register("exec-poll", execPoll)
	register("exec-kill", execKill)
	register("exec-all", execAll)
	register("http", httpRequest)
	register("memory-bomb", memoryBomb)
	register("spin", spin)
	register("recurse", recurse)
	register("sleep", sleep)
	register("exit", exit)
	register("initialize-hostcall", initializeHostcall)
}

// raw makes a host call with explicit pointers and records the status and
// the message: read from out, the guest's buffer at outPtr (nil when
// outPtr points at no buffer of the guest's), when it fit there, or taken
// into a fresh buffer.
func raw(r *report, op, fn string, inPtr, inLen, outPtr, outCap uint32, out []byte) {
	st, n := hostfns.Unpack(guest.RawCall(fn, inPtr, inLen, outPtr, outCap))
	s := step{Op: op, Status: st.String(), Code: uint32(st), N: int64(n)}
	if n > 0 {
		if out != nil && n <= uint32(len(out)) && n <= outCap {
			s.Msg = string(out[:n])
		} else {
			buf := make([]byte, n)
			if int32(guest.RawCall(hostfns.FnTake, guest.Addr(buf), n, 0, 0)) == int32(n) {
				s.Msg = string(buf)
			} else {
				s.Msg = "<take failed>"
			}
		}
	}
	r.add(s)
}

// memEnd finds the current size of linear memory, in bytes, by asking the
// host: a one-byte request at p is outside memory exactly when p >= size.
func memEnd() uint32 {
	lo, hi := uint64(0), uint64(1)<<32 // memory[lo] exists; memory[hi] does not
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		st, _ := hostfns.Unpack(guest.RawCall(hostfns.FnLog, uint32(mid), 1, 0, 0))
		if st == hostfns.ErrBadPointer {
			hi = mid
		} else {
			lo = mid
		}
	}
	return uint32(hi)
}

func abiOOB(a args, r *report) error {
	req := []byte(`{"level":"info","message":"oob"}`)
	out := make([]byte, 256)
	in, outPtr := guest.Addr(req), guest.Addr(out)
	end := memEnd()
	raw(r, "request past the end", hostfns.FnLog, end-8, 64, outPtr, 256, out)
	raw(r, "request at 0xffffff00", hostfns.FnLog, 0xffffff00, 0x200, outPtr, 256, out)
	raw(r, "request wraps around", hostfns.FnLog, 0xffffffff, 2, outPtr, 256, out)
	raw(r, "out buffer past the end", hostfns.FnLog, in, uint32(len(req)), end-16, 256, nil)
	raw(r, "out capacity 4 GiB", hostfns.FnLog, in, uint32(len(req)), outPtr, 0xffffffff, out)
	raw(r, "out buffer wraps around", hostfns.FnLog, in, uint32(len(req)), 0xfffffff0, 0x20, nil)
	return nil
}

func abiOverlap(a args, r *report) error {
	// The host writes its error message into the out buffer when it fits,
	// so each probe gets a fresh request.
	fresh := func() []byte { return []byte(`{"key":"k"}` + strings.Repeat(" ", 120)) }
	req := fresh()
	in := guest.Addr(req)
	raw(r, "out = in", hostfns.FnStateGet, in, uint32(len(req)), in, uint32(len(req)), req)
	req = fresh()
	in = guest.Addr(req)
	raw(r, "out inside in", hostfns.FnStateGet, in, uint32(len(req)), in+4, 8, nil)
	req = fresh()
	in = guest.Addr(req)
	raw(r, "out straddles the end of in", hostfns.FnStateGet, in, uint32(len(req)), in+uint32(len(req))-2, 64, nil)
	req = fresh()
	in = guest.Addr(req)
	raw(r, "in inside out", hostfns.FnStateGet, in+2, 8, in, uint32(len(req)), req)
	return nil
}

func abiUTF8(a args, r *report) error {
	out := make([]byte, 256)
	for _, c := range []struct{ op, fn, req string }{
		{"log with 0xff", hostfns.FnLog, "{\"message\":\"\xff\xfe\"}"},
		{"state key overlong encoding", hostfns.FnStateSet, "{\"key\":\"\xc0\xaf\",\"value\":1}"},
		{"env name with a lone surrogate", hostfns.FnEnvGet, "{\"name\":\"\xed\xa0\x80\"}"},
		{"section name truncated rune", hostfns.FnSectionRegister, "{\"name\":\"x\xe2\x82\",\"order\":1}"},
	} {
		b := []byte(c.req)
		raw(r, c.op, c.fn, guest.Addr(b), uint32(len(b)), guest.Addr(out), uint32(len(out)), out)
	}
	return nil
}

func abiJSONDeep(a args, r *report) error {
	out := make([]byte, 512)
	depth := a.N
	b := []byte(`{"key":"deep","value":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`)
	raw(r, fmt.Sprintf("state_set nested %d deep", depth), hostfns.FnStateSet, guest.Addr(b), uint32(len(b)), guest.Addr(out), uint32(len(out)), out)
	b = []byte(`{"event":"plugin:` + cfg.Self + `/deep","payload":` + strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth) + `}`)
	raw(r, fmt.Sprintf("event_emit nested %d deep", depth), hostfns.FnEventEmit, guest.Addr(b), uint32(len(b)), guest.Addr(out), uint32(len(out)), out)
	return nil
}

func abiJSONWide(a args, r *report) error {
	out := make([]byte, 512)
	var sb strings.Builder
	sb.WriteString(`{"key":"wide","value":[`)
	for i := 0; i < a.N; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteByte('0')
	}
	sb.WriteString(`]}`)
	b := []byte(sb.String())
	raw(r, fmt.Sprintf("state_set array of %d", a.N), hostfns.FnStateSet, guest.Addr(b), uint32(len(b)), guest.Addr(out), uint32(len(out)), out)
	return nil
}

func abiOversize(a args, r *report) error {
	out := make([]byte, 512)
	b := make([]byte, hostfns.MaxRequestBytes+1)
	copy(b, `{"level":"info","message":"`)
	for i := 27; i < len(b)-2; i++ {
		b[i] = 'x'
	}
	copy(b[len(b)-2:], `"}`)
	raw(r, "log request of MaxRequestBytes+1", hostfns.FnLog, guest.Addr(b), uint32(len(b)), guest.Addr(out), uint32(len(out)), out)
	raw(r, "request length 0xffffffff", hostfns.FnLog, guest.Addr(b), 0xffffffff, guest.Addr(out), uint32(len(out)), out)
	return nil
}

func abiTake(a args, r *report) error {
	take := func(op string, ptr, n uint32) {
		got := int32(guest.RawCall(hostfns.FnTake, ptr, n, 0, 0))
		r.add(step{Op: op, N: int64(got)})
	}
	buf := make([]byte, 64<<10)
	// Any host call discards a pending result, so find the end of memory
	// first.
	end := memEnd()
	take("take with nothing pending", guest.Addr(buf), 10)
	if err := guest.StateSet("big", strings.Repeat("y", 20000)); err != nil {
		return err
	}
	req := []byte(`{"key":"big"}`)
	small := make([]byte, 16)
	st, n := hostfns.Unpack(guest.RawCall(hostfns.FnStateGet, guest.Addr(req), uint32(len(req)), guest.Addr(small), 16))
	r.add(step{Op: "state_get into 16 bytes", Status: st.String(), N: int64(n)})
	take("take with the wrong length", guest.Addr(buf), n-1)
	take("take past the end of memory", end-8, n)
	take("take wrapping around", 0xffffff00, n)
	take("take with the right length", guest.Addr(buf), n)
	take("take again", guest.Addr(buf), n)
	return nil
}

func registerLate(a args, r *report) error {
	_, err := guest.Call(hostfns.FnSectionRegister, hostfns.SectionRequest{Name: "late:section", Order: 1, Text: "late"})
	r.host("section_register", nil, err)
	_, err = guest.Call(hostfns.FnToolRegister, hostfns.ToolRequest{Name: "late_tool", Description: "late"})
	r.host("tool_register", nil, err)
	_, err = guest.Call(hostfns.FnEventSubscribe, hostfns.SubscribeRequest{Event: "agent/start"})
	r.host("event_subscribe", nil, err)
	_, err = guest.Call(hostfns.FnToolUnregister, hostfns.NameRequest{Name: cfg.Prefix + "ok"})
	r.host("tool_unregister", nil, err)
	return nil
}

func capabilitiesLate(a args, r *report) error {
	_, err := guest.Call(hostfns.FnCapabilities, hostfns.Capabilities{Exec: true, Net: []string{"*"}})
	r.host("capabilities_declare", nil, err)
	return nil
}

func emitForeign(a args, r *report) error {
	for _, ev := range a.Names {
		_, err := guest.Call(hostfns.FnEventEmit, hostfns.EmitRequest{Event: ev, Payload: json.RawMessage(`{"forged":true}`)})
		r.host("emit "+ev, nil, err)
	}
	return nil
}

func emitReentrant(a args, r *report) error {
	before := pingsServed
	_, err := guest.Call(hostfns.FnEventEmit, hostfns.EmitRequest{Event: "plugin:" + cfg.Self + "/ping"})
	r.host("emit own event to own handler", nil, err)
	r.add(step{Op: "handler ran", N: int64(pingsServed - before)})
	return nil
}

func stateKeys(a args, r *report) error {
	for _, c := range []struct {
		op  string
		key string
	}{{"empty key", ""}, {"key of 257 bytes", strings.Repeat("k", 257)}} {
		_, err := guest.Call(hostfns.FnStateSet, hostfns.StateSetRequest{Key: c.key, Value: json.RawMessage(`1`)})
		r.host("state_set "+c.op, nil, err)
	}
	return nil
}

func stateFlood(a args, r *report) error {
	value := json.RawMessage(`"` + strings.Repeat("v", 1<<20-16) + `"`)
	n := 0
	var err error
	for n = 0; n < a.N; n++ {
		if _, err = guest.Call(hostfns.FnStateSet, hostfns.StateSetRequest{Key: fmt.Sprintf("flood-%d", n), Value: value}); err != nil {
			break
		}
	}
	r.host(fmt.Sprintf("state_set after %d MiB", n), nil, err)
	return nil
}

func statePlant(a args, r *report) error {
	for _, k := range a.Names {
		err := guest.StateSet(k, cfg.Secret)
		r.host("state_set "+k, nil, err)
	}
	return nil
}

func stateSteal(a args, r *report) error {
	for _, k := range a.Names {
		b, err := guest.Call(hostfns.FnStateGet, hostfns.StateGetRequest{Key: k})
		r.host("state_get "+k, b, err)
	}
	r.add(step{Op: "my config", Data: string(configSeen)})
	return nil
}

func logFlood(a args, r *report) error {
	guest.Log("warn", strings.Repeat("L", a.N))
	for i := 0; i < 1000; i++ {
		guest.Log("debug", "flood line")
	}
	r.add(step{Op: "logged", N: int64(a.N)})
	return nil
}

func stdoutFlood(a args, r *report) error {
	start := time.Now()
	for i := 0; i < 100; i++ {
		fmt.Println("stdout line", i)
	}
	chunk := []byte(strings.Repeat("S", 64<<10))
	written := 0
	for written < a.N {
		n, err := os.Stdout.Write(chunk)
		written += n
		if err != nil {
			r.fs("stdout write", "", err)
			break
		}
	}
	fmt.Println()
	for i := 0; i < 100; i++ {
		fmt.Fprintln(os.Stderr, "stderr line", i)
	}
	r.add(step{Op: "wrote to stdout", N: int64(written), Msg: time.Since(start).String()})
	return nil
}

func envGet(a args, r *report) error {
	for _, n := range a.Names {
		b, err := guest.Call(hostfns.FnEnvGet, hostfns.NameRequest{Name: n})
		r.host("env_get "+n, b, err)
	}
	return nil
}

func envWASI(a args, r *report) error {
	r.add(step{Op: "os.Environ", Data: strings.Join(os.Environ(), "\n")})
	for _, n := range a.Names {
		v, ok := os.LookupEnv(n)
		s := step{Op: "os.LookupEnv " + n, Data: v}
		if ok {
			s.N = 1
		}
		r.add(s)
	}
	return nil
}

func execRun(a args, r *report) error {
	b, err := guest.Call(hostfns.FnExecRun, a.Exec)
	r.host("exec_run", b, err)
	return nil
}

func execStart(a args, r *report) error {
	b, err := guest.Call(hostfns.FnExecStart, a.Exec)
	r.host("exec_start", b, err)
	return nil
}

func execPoll(a args, r *report) error {
	b, err := guest.Call(hostfns.FnExecPoll, hostfns.TaskRequest{ID: a.ID})
	r.host("exec_poll", b, err)
	return nil
}

func execKill(a args, r *report) error {
	b, err := guest.Call(hostfns.FnExecKill, hostfns.TaskRequest{ID: a.ID})
	r.host("exec_kill", b, err)
	return nil
}

// execAll tries every exec host function once.
func execAll(a args, r *report) error {
	if err := execRun(a, r); err != nil {
		return err
	}
	if err := execStart(a, r); err != nil {
		return err
	}
	if err := execPoll(a, r); err != nil {
		return err
	}
	return execKill(a, r)
}

func httpRequest(a args, r *report) error {
	b, err := guest.Call(hostfns.FnHTTPRequest, a.HTTP)
	r.host("http_request", b, err)
	return nil
}

var hoard [][]byte

func memoryBomb(a args, r *report) error {
	for i := 0; i < a.N; i++ {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		hoard = append(hoard, b)
	}
	r.add(step{Op: "allocated MiB", N: int64(len(hoard))})
	return nil
}

func spin(a args, r *report) error {
	for {
	}
}

// deeper recurses without end, with a 4 KiB frame. A Go guest keeps its
// goroutine stacks in linear memory, so the stack grows until it meets the
// memory limit (with a tiny frame, wazero's own call-stack limit would
// trap first, after many more calls).
//
//go:noinline
func deeper(n int) int {
	var pad [512]int
	pad[n%512] = n
	return deeper(n+1) + pad[(n+7)%512]
}

func recurse(a args, r *report) error {
	r.add(step{Op: "recursed", N: int64(deeper(0))})
	return nil
}

func sleep(a args, r *report) error {
	start := time.Now()
	time.Sleep(time.Duration(a.MS) * time.Millisecond)
	r.add(step{Op: "slept", Msg: time.Since(start).String()})
	return nil
}

func exit(a args, r *report) error {
	os.Exit(a.Code)
	return nil
}

func initializeHostcall(a args, r *report) error {
	r.Steps = append(r.Steps, initializeSteps...)
	return nil
}
