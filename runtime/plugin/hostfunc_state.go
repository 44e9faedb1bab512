package plugin

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/pluginstate"
	"github.com/dsh-wasm/dsh-wasm/runtime/plugin/internal/abi/dsh"
)

// hostStateGet implements state_get, in the call's state scope.
func hostStateGet(in *instance, cs *callState, req []byte) ([]byte, hostfns.Status, string) {
	var r hostfns.StateGetRequest
	if st, msg := dsh.Decode(req, &r); st != 0 {
		return nil, st, msg
	}
	v, ok, err := in.p.h.state.Get(in.p.name, stateScope(cs), r.Key)
	if err != nil {
		return nil, hostfns.ErrInternal, err.Error()
	}
	b, _ := json.Marshal(hostfns.StateGetResponse{Found: ok, Value: v})
	return b, 0, ""
}

// Limits on host-side plugin state.
const (
	maxStateKey   = 256
	maxStateValue = 1 << 20
)

// hostStateSet implements state_set, in the call's state scope; a null
// value deletes the key.
func hostStateSet(in *instance, cs *callState, req []byte) ([]byte, hostfns.Status, string) {
	var r hostfns.StateSetRequest
	if st, msg := dsh.Decode(req, &r); st != 0 {
		return nil, st, msg
	}
	if r.Key == "" || len(r.Key) > maxStateKey {
		return nil, hostfns.ErrBadJSON, fmt.Sprintf("key must be 1 to %d bytes", maxStateKey)
	}
	if len(r.Value) > maxStateValue {
		return nil, hostfns.ErrTooLarge, fmt.Sprintf("value of %d bytes exceeds %d", len(r.Value), maxStateValue)
	}
	if string(r.Value) == "null" {
		r.Value = nil
	}
	var err error
	if ls, ok := in.p.h.state.(pluginstate.LimitedStore); ok {
		err = ls.SetWithin(in.p.name, stateScope(cs), r.Key, r.Value, in.p.limits.StateBytes)
	} else {
		err = in.p.h.state.Set(in.p.name, stateScope(cs), r.Key, r.Value)
	}
	if err != nil {
		if errors.Is(err, pluginstate.ErrFull) {
			return nil, hostfns.ErrLimit, err.Error()
		}
		return nil, hostfns.ErrInternal, err.Error()
	}
	return nil, 0, ""
}

// stateScope is the session a call's state belongs to; calls that belong
// to no agent share the plugin-wide scope "".
func stateScope(cs *callState) string {
	if cs.facts == nil {
		return ""
	}
	if cs.facts.Session != "" {
		return cs.facts.Session
	}
	return "agent:" + cs.facts.ID
}
