// Package httpapi is the HTTP front end of `dsh-wasm serve`: sessions of
// many tenants on one deployment, with turns streamed as Server-Sent
// Events carrying the same events as `run --json`.
//
// Every /v1 request carries "Authorization: Bearer TOKEN"; the token
// names a tenant. A tenant's sessions are those whose cwd lies inside its
// workspace root, WORKSPACES/TENANT: a session of another tenant is
// answered 404, as an unknown one, for every verb.
package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// Canceller passes a cancel to the worker running a session's turn (the
// PostgreSQL store's LISTEN/NOTIFY); nil on a single worker.
type Canceller interface {
	SendCancel(ctx context.Context, id, reason string) error
}

// Config configures a Server.
type Config struct {
	Deployment *deploy.Deployment
	// Workspaces holds each tenant's workspace root, Workspaces/TENANT.
	Workspaces string
	// Tokens maps bearer tokens to tenants.
	Tokens map[string]string
	// MaxTurns bounds the turns running at once on this worker, and
	// MaxTenantTurns those of one tenant, counted by TenantSlots; a prompt
	// beyond them gets 429.
	MaxTurns, MaxTenantTurns int
	// TenantSlots counts a tenant's turns: across workers with the
	// PostgreSQL store's slots; nil counts this worker's (LocalSlots).
	TenantSlots TurnSlots
	Canceller   Canceller
	// Ready reports whether the store answers (readiness); nil: always.
	Ready  func(context.Context) error
	Logger *slog.Logger
}

// Errors of New.
var ErrConfig = errors.New("httpapi: invalid configuration")

var tenantRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// Server serves the API. It is safe for concurrent use.
type Server struct {
	cfg     Config
	tokens  map[[32]byte]string // sha256(token) → tenant
	log     *slog.Logger
	metrics *metrics

	slots    TurnSlots
	mu       sync.Mutex
	running  map[string]*turnEntry // session id → its prompt on this worker
	turnsNow int
	draining bool
}

// New checks cfg and returns a server.
func New(cfg Config) (*Server, error) {
	if cfg.Deployment == nil {
		return nil, fmt.Errorf("%w: no deployment", ErrConfig)
	}
	if !filepath.IsAbs(cfg.Workspaces) {
		return nil, fmt.Errorf("%w: workspaces %q is not an absolute path", ErrConfig, cfg.Workspaces)
	}
	if len(cfg.Tokens) == 0 {
		return nil, fmt.Errorf("%w: no tokens", ErrConfig)
	}
	if cfg.MaxTurns <= 0 || cfg.MaxTenantTurns <= 0 {
		return nil, fmt.Errorf("%w: turn limits must be positive", ErrConfig)
	}
	s := &Server{cfg: cfg, tokens: map[[32]byte]string{}, log: cfg.Logger, metrics: newMetrics(),
		running: map[string]*turnEntry{}, slots: cfg.TenantSlots}
	if s.slots == nil {
		s.slots = &LocalSlots{}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	for tok, ten := range cfg.Tokens {
		if len(tok) < 16 {
			return nil, fmt.Errorf("%w: the token of tenant %q is shorter than 16 bytes", ErrConfig, ten)
		}
		if !tenantRE.MatchString(ten) {
			return nil, fmt.Errorf("%w: tenant name %q: want lower-case letters, digits, _ and -", ErrConfig, ten)
		}
		s.tokens[sha256.Sum256([]byte(tok))] = ten
	}
	return s, nil
}

// ParseTokens reads a token-to-tenant map: a JSON object {"TOKEN": "TENANT"}.
func ParseTokens(data []byte, from string) (map[string]string, error) {
	var m map[string]string
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%w: tokens in %s: want a JSON object {\"TOKEN\": \"TENANT\"}: %w", ErrConfig, from, err)
	}
	return m, nil
}

// Handler is the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", s.ready)
	mux.HandleFunc("GET /metrics", s.serveMetrics)
	mux.HandleFunc("POST /v1/sessions", s.auth(s.create))
	mux.HandleFunc("GET /v1/sessions", s.auth(s.list))
	mux.HandleFunc("GET /v1/sessions/{id}", s.auth(s.owned(s.history)))
	mux.HandleFunc("POST /v1/sessions/{id}/prompt", s.auth(s.owned(s.prompt)))
	mux.HandleFunc("POST /v1/sessions/{id}/cancel", s.auth(s.owned(s.cancel)))
	return mux
}

type ctxKey int

const (
	tenantKey ctxKey = iota
	headerKey
)

func tenantOf(r *http.Request) string { return r.Context().Value(tenantKey).(string) }

func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		ten, known := s.tokens[sha256.Sum256([]byte(tok))]
		if !ok || !known {
			w.Header().Set("WWW-Authenticate", `Bearer realm="dsh-wasm"`)
			httpError(w, http.StatusUnauthorized, "unauthorized: send Authorization: Bearer TOKEN")
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), tenantKey, ten)))
	}
}

// root is the tenant's workspace root.
func (s *Server) root(tenant string) string { return filepath.Join(s.cfg.Workspaces, tenant) }

func inside(root, p string) bool {
	return p == root || strings.HasPrefix(p, root+string(filepath.Separator))
}

// owned answers 404 unless the session exists and belongs to the tenant.
func (s *Server) owned(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		hd, err := s.cfg.Deployment.Store().Header(id)
		if err != nil || !inside(s.root(tenantOf(r)), hd.Cwd) {
			if err != nil && !errors.Is(err, session.ErrNotFound) && !errors.Is(err, session.ErrInvalidID) {
				s.log.Warn("httpapi: read session header", "id", id, "err", err)
				httpError(w, http.StatusInternalServerError, "the session store failed")
				return
			}
			httpError(w, http.StatusNotFound, "no such session")
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), headerKey, hd)))
	}
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	draining := s.draining
	s.mu.Unlock()
	if draining {
		httpError(w, http.StatusServiceUnavailable, "draining")
		return
	}
	if s.cfg.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.cfg.Ready(ctx); err != nil {
			httpError(w, http.StatusServiceUnavailable, "the session store does not answer")
			return
		}
	}
	io.WriteString(w, "ready\n")
}

// Drain makes readiness fail, so a load balancer stops sending work.
func (s *Server) Drain() {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
}

// maxBody bounds request bodies.
const maxBody = 1 << 20

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		httpError(w, http.StatusBadRequest, "bad request body: "+err.Error())
		return false
	}
	return true
}

// create makes a session with its cwd inside the tenant's root: "cwd"
// is relative to the root (empty: the root itself), and is created when
// missing. A path that leaves the root, by .. or a symbolic link, is
// refused: no component below the workspaces directory may be a link.
func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Cwd string `json:"cwd"`
	}
	if !decode(w, r, &req) {
		return
	}
	dir, err := s.openCwd(tenantOf(r), req.Cwd, true)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	cwd := dir.Name()
	dir.Close()
	sess, err := s.cfg.Deployment.Store().Create(session.Header{Cwd: cwd})
	if err != nil {
		s.log.Warn("httpapi: create session", "err", err)
		httpError(w, http.StatusInternalServerError, "the session store failed")
		return
	}
	h := sess.Header()
	if err := sess.Close(); err != nil {
		httpError(w, http.StatusInternalServerError, "the session store failed")
		return
	}
	writeJSON(w, http.StatusCreated, h)
}

// openCwd opens the tenant's directory rel (relative to its root)
// beneath the workspaces directory, following no symbolic link below it:
// at a session's creation (mkdir: missing directories are made) and at
// every open of the session, so a directory of the tenant swapped for a
// link since then is refused, wherever the link points. The session's
// jails and commands use the directory opened here, never its path.
func (s *Server) openCwd(tenant, rel string, mkdir bool) (*cwdDir, error) {
	if filepath.IsAbs(rel) || strings.ContainsRune(rel, 0) {
		return nil, errors.New("cwd: give a path relative to your workspace root")
	}
	root := s.root(tenant)
	if !inside(root, filepath.Join(root, rel)) { // Join cleans
		return nil, errors.New("cwd: leaves your workspace root")
	}
	if mkdir {
		// The workspaces directory is the operator's: made as named.
		if err := os.MkdirAll(s.cfg.Workspaces, 0o750); err != nil {
			s.log.Warn("httpapi: make the workspaces directory", "err", err)
			return nil, errors.New("cwd: the workspace root cannot be created")
		}
	}
	name, handle, err := deploy.OpenCwdBeneath(s.cfg.Workspaces, filepath.Join(tenant, rel), mkdir)
	switch {
	case errors.Is(err, deploy.ErrCwdEscapes):
		return nil, errors.New("cwd: leaves your workspace root (a symbolic link is in its path)")
	case errors.Is(err, deploy.ErrCwdNotDirectory):
		return nil, errors.New("cwd: not a directory")
	case errors.Is(err, fs.ErrNotExist):
		return nil, errors.New("cwd: no such directory")
	case err != nil:
		s.log.Warn("httpapi: open cwd", "tenant", tenant, "cwd", rel, "err", err)
		return nil, errors.New("cwd: cannot be opened")
	}
	return &cwdDir{name: name, root: handle}, nil
}

// cwdDir is a session's working directory opened by openCwd.
type cwdDir struct {
	name string
	root *os.Root
}

func (d *cwdDir) Name() string   { return d.name }
func (d *cwdDir) Root() *os.Root { return d.root }
func (d *cwdDir) Close() error   { return d.root.Close() }

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	hs, err := s.cfg.Deployment.Store().List()
	if err != nil && len(hs) == 0 {
		s.log.Warn("httpapi: list sessions", "err", err)
	}
	root := s.root(tenantOf(r))
	out := []session.Header{}
	for _, h := range hs {
		if inside(root, h.Cwd) {
			out = append(out, h)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// history is the session as its JSONL file: the header line then one
// event a line.
func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	if err := s.cfg.Deployment.Store().Export(r.PathValue("id"), w); err != nil {
		s.log.Warn("httpapi: export", "err", err)
	}
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var req struct {
		Reason string `json:"reason"`
	}
	if r.ContentLength != 0 && !decode(w, r, &req) {
		return
	}
	if req.Reason == "" {
		req.Reason = "cancelled by the client"
	}
	if s.CancelLocal(id, req.Reason) {
		writeJSON(w, http.StatusAccepted, map[string]string{"cancel": "sent"})
		return
	}
	if s.cfg.Canceller == nil {
		httpError(w, http.StatusConflict, "no turn of this session is running")
		return
	}
	if err := s.cfg.Canceller.SendCancel(r.Context(), id, req.Reason); err != nil {
		s.log.Warn("httpapi: send cancel", "err", err)
		httpError(w, http.StatusInternalServerError, "the session store failed")
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"cancel": "sent"})
}

// admit counts a turn against the worker's limit and the tenant's slots,
// or says which one is full.
func (s *Server) admit(ctx context.Context, tenant string) (release func(), full string, err error) {
	s.mu.Lock()
	if s.turnsNow >= s.cfg.MaxTurns {
		s.mu.Unlock()
		return nil, "this worker runs its maximum of turns", nil
	}
	s.turnsNow++
	s.mu.Unlock()
	unworker := func() {
		s.mu.Lock()
		s.turnsNow--
		s.mu.Unlock()
	}
	untenant, ok, err := s.slots.Acquire(ctx, tenant, s.cfg.MaxTenantTurns)
	if err != nil || !ok {
		unworker()
		return nil, "your tenant runs its maximum of turns", err
	}
	return func() { untenant(); unworker() }, "", nil
}

// busy answers a prompt for a session whose turn runs: 409, with the
// time after which to try again.
func (s *Server) busy(w http.ResponseWriter) {
	s.metrics.conflicts.Add(1)
	w.Header().Set("Retry-After", retryAfterBusy)
	httpError(w, http.StatusConflict, "a turn of this session is running")
}

// retryAfterBusy is the Retry-After of a 409, in seconds.
const retryAfterBusy = "1"

// prompt runs one turn and streams its events as SSE: the session's
// header, then every event the turn records, each a "data:" line with
// the event's JSON as `run --json` prints it, ending with turn/end.
func (s *Server) prompt(w http.ResponseWriter, r *http.Request) {
	id, tenant := r.PathValue("id"), tenantOf(r)
	var req struct {
		Text string `json:"text"`
	}
	if !decode(w, r, &req) {
		return
	}
	if strings.TrimSpace(req.Text) == "" {
		httpError(w, http.StatusBadRequest, "text: empty prompt")
		return
	}
	entry := s.register(r.Context(), id)
	if entry == nil {
		s.busy(w)
		return
	}
	defer s.unregister(id, entry)
	ctx := entry.ctx
	release, full, err := s.admit(ctx, tenant)
	if err != nil {
		s.log.Warn("httpapi: count the tenant's turns", "err", err)
		httpError(w, http.StatusInternalServerError, "the session store failed")
		return
	}
	if release == nil {
		s.metrics.refused.Add(1)
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusTooManyRequests, full)
		return
	}
	defer release()

	// The session's cwd is opened again beneath the tenant's root at
	// every open: what it named at creation may be a link by now.
	hd := r.Context().Value(headerKey).(session.Header)
	rel, err := filepath.Rel(s.root(tenant), hd.Cwd)
	if err != nil {
		httpError(w, http.StatusNotFound, "no such session")
		return
	}
	dir, err := s.openCwd(tenant, rel, false)
	if err != nil {
		httpError(w, http.StatusConflict, fmt.Sprintf("the session's %v; it cannot run", err))
		return
	}
	sess, err := s.cfg.Deployment.NewSession(context.WithoutCancel(ctx), deploy.SessionOptions{Resume: id, Cwd: dir.Name(), CwdDir: dir.Root()})
	dir.Close() // the session holds its own handle
	if err != nil {
		if errors.Is(err, session.ErrLocked) {
			s.busy(w)
			return
		}
		s.log.Warn("httpapi: open session", "id", id, "err", err)
		httpError(w, http.StatusInternalServerError, "cannot open the session")
		return
	}
	defer sess.Close(context.WithoutCancel(ctx))
	s.opened(entry, sess)

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Session-Id", id)
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}
	if err := send(sess.Header()); err != nil {
		return
	}
	s.metrics.running.Add(1)
	err = s.streamTurn(ctx, sess, req.Text, send)
	s.metrics.running.Add(-1)
	// A turn that ran but did not complete (a *deploy.TurnError) has
	// already been streamed with its turn/end; only an error that kept
	// the turn from running or being recorded is an error event.
	var te *deploy.TurnError
	if err != nil && !errors.As(err, &te) {
		s.log.Warn("httpapi: turn", "id", id, "err", err)
		fmt.Fprintf(w, "event: error\ndata: %s\n\n", mustJSON(map[string]string{"error": err.Error()}))
		if flusher != nil {
			flusher.Flush()
		}
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
