package dsh

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/pluginstate"
)

// hostStateGet implements state_get, in the call's state scope.
func hostStateGet(h Host, req []byte) ([]byte, hostfns.Status, string) {
	var r hostfns.StateGetRequest
	if st, msg := Decode(req, &r); st != 0 {
		return nil, st, msg
	}
	v, ok, err := h.State().Get(h.Name(), h.Scope(), r.Key)
	if err != nil {
		return nil, hostfns.ErrInternal, err.Error()
	}
	b, _ := json.Marshal(hostfns.StateGetResponse{Found: ok, Value: v})
	return b, 0, ""
}

// Limits on host-side plugin state: a key, a value.
const (
	MaxStateKey   = 256
	MaxStateValue = 1 << 20
)

// hostStateSet implements state_set, in the call's state scope; a null
// value deletes the key.
func hostStateSet(h Host, req []byte) ([]byte, hostfns.Status, string) {
	var r hostfns.StateSetRequest
	if st, msg := Decode(req, &r); st != 0 {
		return nil, st, msg
	}
	if r.Key == "" || len(r.Key) > MaxStateKey {
		return nil, hostfns.ErrBadJSON, fmt.Sprintf("key must be 1 to %d bytes", MaxStateKey)
	}
	if len(r.Value) > MaxStateValue {
		return nil, hostfns.ErrTooLarge, fmt.Sprintf("value of %d bytes exceeds %d", len(r.Value), MaxStateValue)
	}
	if string(r.Value) == "null" {
		r.Value = nil
	}
	var err error
	if ls, ok := h.State().(pluginstate.LimitedStore); ok {
		err = ls.SetWithin(h.Name(), h.Scope(), r.Key, r.Value, h.Limits().StateBytes)
	} else {
		err = h.State().Set(h.Name(), h.Scope(), r.Key, r.Value)
	}
	if err != nil {
		if errors.Is(err, pluginstate.ErrFull) {
			return nil, hostfns.ErrLimit, err.Error()
		}
		return nil, hostfns.ErrInternal, err.Error()
	}
	return nil, 0, ""
}
