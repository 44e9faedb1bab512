// Package deploy is dsh-wasm's root API: one Deployment owns the prompt
// registry, the event bus, the plugins' state store and the plugin host,
// and makes the agents that run on them.
//
// A Deployment is built from a plain Go Options struct (New), or from a
// deployment file (Open, OpenConfig), which the CLI and any embedding Go
// program use alike:
//
//	d, err := deploy.Open(ctx, "dsh.yml", deploy.Options{})
//	...
//	defer d.Close(ctx)
//	s, err := d.NewSession(ctx, deploy.SessionOptions{Cwd: dir})
//	...
//	defer s.Close(ctx)
//	res, err := s.Prompt(ctx, "List the files here.")
//	var te *deploy.TurnError
//	if errors.As(err, &te) {
//		// the turn ran but did not complete: te.End.Kind says how it
//		// ended; res still holds its text and steps
//	} else if err != nil {
//		// no turn ran
//	}
//
// A turn that did not complete (it failed, was cancelled, hit the token
// ceiling or the step cap) is recorded like any other and returned with
// a *TurnError: check Prompt's error, not only its result.
//
// Opening registers, in this order and so before any plugin can claim
// their names: the harness sections (harness:identity, deployment:persona),
// the built-in variables (model, cwd), the embedder's native sections and
// tools, and then the Wasm plugins in the order given. A plugin that
// registers a name already taken fails to load, and so does the
// Deployment.
//
// Native tools (Options.Tools) are Go functions beside the Wasm plugins:
// the model sees them in the same list, and the loop runs them through
// the same ToolRunner, with the same failure rules (an error is an error
// result for the model, never a crashed turn).
//
// Each Session is one agent on one session log. Its events, the same
// records the session file holds, can be followed as they happen
// (Session.Follow), which is how the front ends render a turn.
package deploy
