package deploy

import (
	"fmt"

	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// TurnError is the error Session.Prompt returns when a turn ran but did
// not complete: every end other than "completed" counts, that is
//
//   - "error": the prompt, the model or a listener failed (a model 400,
//     for one);
//   - "max-tokens": an answer was cut at the output-token ceiling (its
//     tool calls dropped), or the step cap was reached;
//   - "aborted": the turn was cancelled (Session.Cancel, the context);
//   - "disposed": the session was closed while the turn ran;
//   - "rejected": every prompt of the turn was blocked;
//   - "interrupted": written only by crash recovery, never by a turn
//     that Prompt runs, but a TurnError all the same.
//
// The turn is recorded either way, and Prompt's result carries it as
// well (End, Text, Steps): the session's events stay readable with
// Session.Follow and Session.History. Test for it with errors.As:
//
//	res, err := s.Prompt(ctx, text)
//	var te *deploy.TurnError
//	if errors.As(err, &te) { ... te.End.Kind ... }
type TurnError struct {
	// Turn is the turn's number in the session.
	Turn int
	// End is the reason recorded in turn/end.
	End session.EndReason
	// Err is the cause behind the end, when there is one (see
	// TurnResult.Err); errors.Is and errors.As see through to it.
	Err error
}

// Error says which turn ended how, and why.
func (e *TurnError) Error() string {
	msg := fmt.Sprintf("turn %d ended %s", e.Turn, e.End.Kind)
	if e.End.Reason != "" {
		msg += " (" + e.End.Reason + ")"
	}
	// The cause's whole chain when there is one (the recorded message
	// is its last link only: the provider's own words for a model API
	// error, see agent.FailureMessage), for logs and the command line.
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	} else if e.End.Message != "" {
		msg += ": " + e.End.Message
	}
	return msg
}

// Unwrap returns the cause behind the end, if any.
func (e *TurnError) Unwrap() error { return e.Err }

// completed reports whether a turn's end counts as completed; every
// other end is a TurnError.
func completed(end session.EndReason) bool { return end.Kind == session.EndCompleted }
