package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/dsh-wasm/dsh-wasm/runtime/agent"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/replay"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// SessionOptions say what session to open.
type SessionOptions struct {
	// Cwd is the working directory: the workspace plugins' fs grants
	// resolve to and the {{cwd}} variable. It must be an existing
	// directory; a relative one is made absolute. Empty makes a cwd-less
	// session (or keeps a resumed session's).
	Cwd string
	// Model overrides the deployment's model.
	Model string
	// Resume continues the session with this id instead of creating one.
	// A Cwd given with it must be the session's.
	Resume string
	// Replay answers the model from this recorded session file (and the
	// child sessions and replay.override.json beside it) instead of the
	// live provider.
	Replay string
	// OnEvent, when set, is called with each event the loop records, in
	// order, once the session's store holds it (agent.Options.OnEvent):
	// on the goroutine that flushed, the turn's or the chunk flusher's.
	// It must not block.
	OnEvent func(session.Event)
	// Permission asks the user whether a tool call a hook wants confirmed
	// may run (agent.Options.Permission). Nil refuses every such call.
	Permission agent.PermissionFunc
}

// Session is one agent on one session log. Its methods are safe for
// concurrent use.
type Session struct {
	d      *Deployment
	agent  *agent.Agent
	sess   *session.Session
	model  string
	replay bool
	// provider answers the agent's model requests, and its children's.
	provider model.Provider
	// parent is the session whose tool call started this one, if any.
	parent *Session

	mu     sync.Mutex
	log    []session.Event // every event recorded since the session opened
	wake   chan struct{}   // closed and replaced when log grows or the session ends
	closed bool            // Close was called
	ended  bool            // Close finished: nothing more is recorded
}

// NewSession opens a session: a new one, or with Resume an existing one,
// and an agent on it.
func (d *Deployment) NewSession(ctx context.Context, opts SessionOptions) (*Session, error) {
	return d.newSession(ctx, opts, nil)
}

// childSpec says how a subagent's session derives from its parent's.
type childSpec struct {
	parent *Session
	fork   bool
	depth  int    // the child agent's depth
	agent  string // the parent agent's id
}

func (d *Deployment) newSession(ctx context.Context, opts SessionOptions, child *childSpec) (_ *Session, err error) {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	cwd := opts.Cwd
	if cwd != "" {
		if cwd, err = checkCwd(cwd); err != nil {
			return nil, err
		}
	}
	var provider model.Provider
	if child != nil {
		// A child answers from its parent's provider: a replay binds the
		// child to its recorded child script.
		provider = child.parent.provider
	} else if opts.Replay != "" {
		if provider, err = replay.Open(opts.Replay, replay.Options{}); err != nil {
			return nil, fmt.Errorf("deploy: replay %s: %w", opts.Replay, err)
		}
	} else if provider, err = d.liveProvider(); err != nil {
		if errors.Is(err, ErrNoProvider) {
			return nil, err // already says deploy:
		}
		return nil, fmt.Errorf("deploy: new session: %w", err)
	}

	var sess *session.Session
	if child != nil {
		h := session.Header{Cwd: child.parent.Cwd(), ParentSession: child.parent.ID()}
		var seed []session.Event
		if child.fork {
			// The parent's turn in flight is not the child's: only what
			// ends with its last turn/end is copied.
			seed = session.ClosedPrefix(child.parent.sess.Events())
			h.SeedLength = len(seed)
		}
		if sess, err = d.store.Create(h, seed...); err != nil {
			return nil, fmt.Errorf("deploy: child session of %s: %w", child.parent.ID(), err)
		}
	} else if opts.Resume != "" {
		if sess, err = d.store.Open(opts.Resume); err != nil {
			return nil, fmt.Errorf("deploy: resume: %w", err)
		}
		if hc := sess.Header().Cwd; cwd != "" && hc != cwd {
			sess.Close()
			return nil, fmt.Errorf("%w: resume %s: the session's cwd is %q, not %q", ErrInvalidOptions, opts.Resume, hc, cwd)
		}
	} else if sess, err = d.store.Create(session.Header{Cwd: cwd}); err != nil {
		return nil, fmt.Errorf("deploy: new session: %w", err)
	}

	s := &Session{d: d, sess: sess, model: opts.Model, replay: opts.Replay != "", provider: provider, wake: make(chan struct{})}
	if s.model == "" {
		s.model = d.opts.Model
	}
	var depth int
	var parentAgent string
	if child != nil {
		s.model, s.replay, s.parent = child.parent.model, child.parent.replay, child.parent
		depth, parentAgent = child.depth, child.agent
	}
	onEvent := opts.OnEvent
	a, err := agent.New(ctx, agent.Options{
		Model:      s.model,
		Depth:      depth,
		Parent:     parentAgent,
		MaxSteps:   d.opts.MaxSteps,
		Session:    sess,
		Provider:   provider,
		Registry:   d.reg,
		Bus:        d.bus,
		Tools:      runner{d},
		Logger:     d.log,
		State:      d.state,
		Permission: opts.Permission,
		// The deployment's limits bound every step's assembly too.
		Bounds: agent.AssemblyBounds{Timeout: d.opts.Limits.AssemblyTimeout, PromptBytes: d.opts.Limits.PromptBytes},
		OnEvent: func(e session.Event) {
			s.publish(e)
			if onEvent != nil {
				onEvent(e)
			}
		},
	})
	if err != nil {
		sess.Close()
		return nil, fmt.Errorf("deploy: new session: %w", err)
	}
	s.agent = a
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		a.Close(ctx)
		sess.Close()
		return nil, ErrClosed
	}
	d.sessions[s] = struct{}{}
	d.byID[s.ID()] = s
	d.mu.Unlock()
	return s, nil
}

func checkCwd(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("deploy: cwd %q: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("deploy: cwd: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%w: cwd %s is not a directory", ErrInvalidOptions, abs)
	}
	return filepath.Clean(abs), nil
}

// ID is the session's id.
func (s *Session) ID() string { return s.sess.Header().ID }

// Cwd is the session's working directory; empty for a cwd-less session.
func (s *Session) Cwd() string { return s.sess.Header().Cwd }

// Model is the model the session's agent runs.
func (s *Session) Model() string { return s.model }

// Replay reports whether the model is a replay of a recorded session.
func (s *Session) Replay() bool { return s.replay }

// Path is the session file.
func (s *Session) Path() string { return s.sess.Path() }

// History returns every event of the session's log, including those
// recorded before it was resumed.
func (s *Session) History() []session.Event { return s.sess.Events() }

// Prompt runs one turn on text. A turn that fails or is cancelled still
// ends, recorded, with its reason in the result; the error reports only
// that no turn could run (another is running, the session is closed) or
// the session could not record it.
func (s *Session) Prompt(ctx context.Context, text string) (agent.TurnResult, error) {
	return s.agent.Prompt(ctx, text)
}

// Cancel aborts the running turn, which ends "aborted" with reason. It
// reports whether a turn was running.
func (s *Session) Cancel(reason string) bool { return s.agent.Cancel(reason) }

// Close ends the agent (cancelling a running turn and closing its plugin
// instances) and closes the session log. Followers see the end of the
// stream. Closing twice does nothing.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.agent.Close(ctx)
	err := s.sess.Close()
	s.mu.Lock()
	s.ended = true
	close(s.wake)
	s.mu.Unlock()
	s.d.mu.Lock()
	delete(s.d.sessions, s)
	if s.d.byID[s.ID()] == s {
		delete(s.d.byID, s.ID())
	}
	s.d.mu.Unlock()
	if err != nil {
		return fmt.Errorf("deploy: close session %s: %w", s.ID(), err)
	}
	return nil
}

func (s *Session) publish(e session.Event) {
	s.mu.Lock()
	s.log = append(s.log, e)
	if !s.ended {
		close(s.wake)
		s.wake = make(chan struct{})
	}
	s.mu.Unlock()
}

// Follow returns a stream of the events recorded from now on, in order.
// Any number of streams may follow one session; a slow reader holds no
// one up.
func (s *Session) Follow() *Stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &Stream{s: s, next: len(s.log)}
}

// Stream reads a session's events in order.
type Stream struct {
	s    *Session
	next int
}

// ErrEndOfStream: the session closed and every event was read.
var ErrEndOfStream = errors.New("deploy: end of event stream")

// Next returns the next event, waiting for one. It fails with
// ErrEndOfStream once the session is closed and drained, or with ctx's
// error.
func (st *Stream) Next(ctx context.Context) (session.Event, error) {
	for {
		st.s.mu.Lock()
		if st.next < len(st.s.log) {
			e := st.s.log[st.next]
			st.next++
			st.s.mu.Unlock()
			return e, nil
		}
		ended, wake := st.s.ended, st.s.wake
		st.s.mu.Unlock()
		if ended {
			return session.Event{}, ErrEndOfStream
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return session.Event{}, ctx.Err()
		}
	}
}

// TryNext returns the next event if one is already recorded, without
// waiting.
func (st *Stream) TryNext() (session.Event, bool) {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	if st.next < len(st.s.log) {
		e := st.s.log[st.next]
		st.next++
		return e, true
	}
	return session.Event{}, false
}

// Header is the session file's header line.
func (s *Session) Header() session.Header { return s.sess.Header() }
