// Package turntest runs one turn of the real agent loop over a plugin
// host, the harness the tests that drive a plugin through the loop
// share. It is apart from internal/plugintest, which the loop's own tests
// import, because it imports the loop.
package turntest

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/agent"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/session/filestore"
)

// Turn runs one turn of the real agent loop over the plugins of h, the
// shape every test that drives a plugin through the loop shares: a new
// session log (under the test's temp dir, working directory cwd), which
// is the agent's Session, an agent made from opts with its Registry, Bus
// and Tools taken from h where opts leaves them unset, and prompt. A scripted model
// (runtime/model/scripted) is the usual opts.Provider.
//
// It returns the turn's result, the error of an agent that could not
// open (a plugin's agent/open listener failing, say) or of a turn that
// could not run, and the events the session recorded; it fails the test
// only when the session log cannot be made.
func Turn(ctx context.Context, t testing.TB, h *plugin.Host, opts agent.Options, cwd, prompt string) (agent.TurnResult, []session.Event, error) {
	t.Helper()
	store := filestore.New(filepath.Join(t.TempDir(), "sessions"), filestore.Options{})
	sess, err := store.Create(session.Header{Cwd: cwd})
	if err != nil {
		t.Fatalf("turn: session: %v", err)
	}
	defer sess.Close()
	opts.Session = sess
	if opts.Registry == nil {
		opts.Registry = h.Registry()
	}
	if opts.Bus == nil {
		opts.Bus = h.Bus()
	}
	if opts.Tools == nil {
		opts.Tools = h
	}
	a, err := agent.New(ctx, opts)
	if err != nil {
		return agent.TurnResult{}, sess.Events(), fmt.Errorf("turn: %w", err)
	}
	defer a.Close(ctx)
	res, err := a.Prompt(ctx, prompt)
	if err != nil {
		err = fmt.Errorf("turn: %w", err)
	}
	return res, sess.Events(), err
}
