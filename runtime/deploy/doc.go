// Package deploy is dsh-wasm's root API: one Deployment owns the prompt
// registry, the event bus, the plugins' state store and the plugin host,
// and makes the agents that run on them.
//
// A Deployment is built from a plain Go Options struct (New), or from a
// deployment file (Open, OpenConfig), which the CLI and any embedding Go
// program use alike:
//
//	// Builtins: only when dsh.yml loads builtin: plugins (see below).
//	d, err := deploy.Open(ctx, "dsh.yml", deploy.Options{Builtins: guests.All()})
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
// The built-in plugins (builtin:NAME sources: facts, tool-fs, tool-bash,
// ...) are opt-in, so that a program that loads only its own plugins
// does not link their 32 MB: set Options.Builtins to guests.All(), or to
// the few it loads (guests.ToolFS, guests.Join(guests.Facts,
// guests.ToolFS)).
//
// # The exec jail runs inside your binary
//
// On Linux, a plugin granted exec runs each command through a helper
// that is the embedding program itself: the host re-executes its own
// binary (/proc/self/exe) with argv[0] "dsh-execjail-helper", and an
// init function of the jail's package (internal/sandbox/execjail),
// linked in through this package, recognizes that invocation, confines
// the process (namespaces, Landlock, rlimits) and execs the command,
// before main runs. Nothing needs calling, but the helper process is
// the embedding program up to that init: the init functions of packages
// initialized before the jail's (Go initializes them in dependency
// order, then by import path) run in the helper too, so keep side
// effects (listening, writing files, flags parsing that exits) out of
// init functions, as is good practice anyway.
//
// A program that grants no plugin exec never starts the helper.
//
// Each Session is one agent on one session log. Its events, the same
// records the session file holds, can be followed as they happen
// (Session.Follow), which is how the front ends render a turn.
package deploy
