package session

import (
	"testing"
)

// Turn ends are written in the reference harness's shapes
// (core/session/src/types.ts TurnEndReasonMap): each kind with its own
// fields, in the reference's key order, and none it does not write.
func TestEndReasonShapes(t *testing.T) {
	for _, tc := range []struct {
		r    EndReason
		want string
	}{
		{EndReason{Kind: EndCompleted, Reason: "x", Message: "y", Step: 3}, `{"kind":"completed"}`},
		{EndReason{Kind: EndAborted, Reason: "session/cancel", Message: "y"}, `{"kind":"aborted","reason":"session/cancel"}`},
		{EndReason{Kind: EndAborted}, `{"kind":"aborted"}`},
		{EndReason{Kind: EndError, Step: 2, Message: "boom", Code: "AUTH", Reason: "x"}, `{"kind":"error","step":2,"message":"boom","code":"AUTH"}`},
		{EndReason{Kind: EndError, Step: 0, Message: "render <failed>"}, `{"kind":"error","step":0,"message":"render <failed>"}`},
		{EndReason{Kind: EndDisposed, Message: "y"}, `{"kind":"disposed"}`},
		{EndReason{Kind: EndMaxTokens, Message: "y"}, `{"kind":"max-tokens"}`},
		{EndReason{Kind: EndRejected, Reason: "blocked by policy hook"}, `{"kind":"rejected","reason":"blocked by policy hook"}`},
		{EndReason{Kind: EndInterrupted}, `{"kind":"interrupted"}`},
		{EndReason{Kind: "refusal", Reason: "r", Code: "C"}, `{"kind":"refusal","reason":"r","code":"C"}`},
	} {
		b, err := tc.r.MarshalJSON()
		if err != nil || string(b) != tc.want {
			t.Errorf("%+v encodes as %s (%v), want %s", tc.r, b, err, tc.want)
		}
	}
}
