package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/dsh-wasm/dsh-wasm/internal/agent"
	"github.com/dsh-wasm/dsh-wasm/internal/replay"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/workdir"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// SessionOptions say what session to open.
type SessionOptions struct {
	// Cwd is the working directory: the workspace plugins' fs grants
	// resolve to and the {{cwd}} variable. It must be an existing
	// directory; a relative one is made absolute. Empty makes a cwd-less
	// session (or keeps a resumed session's). The directory is opened
	// once, as the session opens (a resumed session's too), and every
	// later use (the fs jails, commands, subagents) reaches it through
	// that descriptor: renaming it or swapping it for a link afterwards
	// changes nothing for this session.
	Cwd string
	// CwdDir, when set, is the working directory already opened by the
	// caller (serve opens it beneath the tenant's root), and Cwd, which
	// must then be set, absolute and clean, only its name; a resumed
	// session's cwd must be that name. The session takes its own handle,
	// so the caller may close CwdDir once NewSession returns.
	CwdDir *os.Root
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
	// may run . Nil refuses every such call.
	Permission PermissionFunc
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
	// dir is the opened cwd (nil for a cwd-less session), the one owner
	// of the working directory; unbind releases it from the plugin host.
	dir    *workdir.Dir
	unbind func()

	mu     sync.Mutex
	log    []session.Event // every event recorded since the session opened
	wake   chan struct{}   // closed and replaced when log grows or the session ends
	closed bool            // Close was called
	ended  bool            // Close finished: nothing more is recorded
}

// NewSession opens a session: a new one, or with Resume an existing one,
// and an agent on it.
func (d *Deployment) NewSession(ctx context.Context, opts SessionOptions) (*Session, error) {
	s, err := d.newSession(ctx, opts, nil)
	return s, d.opts.Redactor.Error(err)
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
	// The working directory is opened here, once: a child's is its
	// parent's, a caller's opened one is taken as it is.
	var dir *workdir.Dir
	defer func() {
		if err != nil && dir != nil {
			dir.Close()
		}
	}()
	switch {
	case child != nil:
		if pd := child.parent.dir; pd != nil {
			if dir, err = pd.Dup(); err != nil {
				return nil, fmt.Errorf("deploy: child session of %s: cwd: %w", child.parent.ID(), err)
			}
		}
	case opts.CwdDir != nil:
		if dir, err = workdir.FromRoot(opts.Cwd, opts.CwdDir); err != nil {
			return nil, fmt.Errorf("%w: cwd: %w", ErrInvalidOptions, err)
		}
	case opts.Cwd != "":
		if dir, err = openCwd(opts.Cwd); err != nil {
			return nil, err
		}
	}
	if dir != nil {
		if err = d.host.CheckHostState(dir.Name()); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
		}
	}
	cwd := ""
	if dir != nil {
		cwd = dir.Name()
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
		hc := sess.Header().Cwd
		if cwd != "" && hc != cwd {
			sess.Close()
			return nil, fmt.Errorf("%w: resume %s: the session's cwd is %q, not %q", ErrInvalidOptions, opts.Resume, hc, cwd)
		}
		if dir == nil && hc != "" {
			if dir, err = openCwd(hc); err != nil {
				sess.Close()
				return nil, fmt.Errorf("deploy: resume %s: %w", opts.Resume, err)
			}
		}
		if err = d.host.CheckHostState(hc); err != nil {
			sess.Close()
			return nil, fmt.Errorf("%w: resume %s: %w", ErrInvalidOptions, opts.Resume, err)
		}
	} else if sess, err = d.store.Create(session.Header{Cwd: cwd}); err != nil {
		return nil, fmt.Errorf("deploy: new session: %w", err)
	}

	s := &Session{d: d, sess: sess, model: opts.Model, replay: opts.Replay != "", provider: provider, wake: make(chan struct{}), dir: dir}
	if dir != nil && d.host != nil {
		// The agent's id is its session's: its instances reach the
		// workspace through dir from their first call on.
		if s.unbind, err = d.host.BindWorkdir(sess.Header().ID, dir.Name(), dir.Root()); err != nil {
			sess.Close()
			return nil, fmt.Errorf("deploy: new session: %w", err)
		}
	}
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
		Permission: opts.Permission.loop(),
		// The deployment's limits bound every step's assembly too.
		Bounds: agent.AssemblyBounds{Timeout: d.opts.Limits.AssemblyTimeout, PromptBytes: d.opts.Limits.PromptBytes},
		Output: d.opts.Limits.output(),
		OnEvent: func(e session.Event) {
			s.publish(e)
			if onEvent != nil {
				onEvent(e)
			}
		},
	})
	if err != nil {
		s.release()
		sess.Close()
		return nil, fmt.Errorf("deploy: new session: %w", err)
	}
	s.agent = a
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		a.Close(ctx)
		s.release()
		sess.Close()
		return nil, ErrClosed
	}
	d.sessions[s] = struct{}{}
	d.byID[s.ID()] = s
	d.mu.Unlock()
	return s, nil
}

// openCwd opens a working directory given as a path, once.
func openCwd(path string) (*workdir.Dir, error) {
	d, err := workdir.Open(path)
	if errors.Is(err, workdir.ErrNotDirectory) {
		return nil, fmt.Errorf("%w: cwd: %w", ErrInvalidOptions, err)
	}
	if err != nil {
		return nil, fmt.Errorf("deploy: cwd: %w", err)
	}
	return d, nil
}

// release lets go of the session's working directory; the session's
// own handle on it is closed, handles the jails took stay theirs.
func (s *Session) release() {
	if s.unbind != nil {
		s.unbind()
	}
	if s.dir != nil {
		s.dir.Close()
	}
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

// Prompt runs one turn on text. A turn that ran but did not complete
// (it failed, was cancelled, hit the token ceiling: see TurnError) is
// still recorded, and Prompt returns its result together with a
// *TurnError carrying its end. Any other error reports that no turn
// could run (another is running, the session is closed) or the session
// could not record it.
//
// The result and the error are redacted with the deployment's secrets,
// as the recorded turn/end is.
func (s *Session) Prompt(ctx context.Context, text string) (TurnResult, error) {
	r, err := s.agent.Prompt(ctx, text)
	res := TurnResult(r)
	red := s.d.opts.Redactor
	res.End.Message, res.End.Reason = red.String(res.End.Message), red.String(res.End.Reason)
	res.Text, res.Err = red.String(res.Text), red.Error(res.Err)
	if err != nil {
		return res, red.Error(err)
	}
	if !completed(res.End) {
		return res, &TurnError{Turn: res.Turn, End: res.End, Err: res.Err}
	}
	return res, nil
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
	s.release()
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
