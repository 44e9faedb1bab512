package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dsh-wasm/dsh-wasm/internal/plugintest"
	"github.com/dsh-wasm/dsh-wasm/internal/turntest"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/agent"
	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

// Environment variables the suite plants: the canary one is never
// granted, the granted one is.
const (
	canaryEnv  = "HOSTILE_CANARY_ENV"
	grantedEnv = "HOSTILE_GRANTED"
	helloText  = "hello from the workspace"
	roText     = "read-only content"
)

// guestWasm builds testdata/hostile/<name> (once per process, under
// guestbuild's lock, cached on disk) and returns the module's path.
func guestWasm(t testing.TB, name string) string {
	t.Helper()
	p, err := guestbuild.Build("testdata/hostile/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func randomToken(t testing.TB) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// logCapture is an slog.Handler that keeps every record as text, so the
// suite can search what plugins managed to log.
type logCapture struct {
	mu      sync.Mutex
	records []string
}

type captureHandler struct {
	c      *logCapture
	prefix string
}

func (h captureHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h captureHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String())
	b.WriteByte(' ')
	b.WriteString(h.prefix)
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.c.mu.Lock()
	h.c.records = append(h.c.records, b.String())
	h.c.mu.Unlock()
	return nil
}

func (h captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	p := h.prefix
	for _, a := range as {
		p += fmt.Sprintf("%s=%v ", a.Key, a.Value)
	}
	return captureHandler{c: h.c, prefix: p}
}

func (h captureHandler) WithGroup(name string) slog.Handler {
	return captureHandler{c: h.c, prefix: h.prefix + name + "."}
}

func (c *logCapture) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.records)
}

// fileState is what the suite compares, before and after an attack, for
// every file outside the roots: not the access time.
type fileState struct {
	Mode    fs.FileMode
	Size    int64
	ModTime time.Time
	Nlink   uint64
	Content string // file content, or a symlink's target
}

func snapshot(t testing.TB, dir string) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		s := fileState{Mode: fi.Mode(), Size: fi.Size(), ModTime: fi.ModTime(), Nlink: linkCount(fi)}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			s.Content, err = os.Readlink(p)
		case fi.Mode().IsRegular():
			var b []byte
			b, err = os.ReadFile(p)
			s.Content = string(b)
		case fi.IsDir():
			s.Size = 0 // a directory's size is the file system's business
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = s
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", dir, err)
	}
	return out
}

// env is one attack's world: a workspace granted rw, a directory granted
// ro, a directory outside every root holding the canary, a host whose
// logs are captured, and a record of everything the plugins produced.
type env struct {
	t       *testing.T
	ctx     context.Context
	base    string
	ws      string // the agent's cwd, granted as "workspace" (rw)
	ro      string // granted ro
	outside string // outside every root
	rel     string // outside, relative to ws
	canary  string
	secrets []string // further tokens that must never be seen

	host *plugin.Host
	logs *logCapture
	main *prompt.AgentFacts

	mu      sync.Mutex
	outputs []string
	watched map[string]map[string]fileState
}

func newEnv(t *testing.T) *env {
	t.Helper()
	base := t.TempDir()
	e := &env{t: t, ctx: context.Background(), base: base,
		ws: filepath.Join(base, "ws"), ro: filepath.Join(base, "ro"), outside: filepath.Join(base, "outside"),
		canary: "CANARY-" + randomToken(t), logs: &logCapture{}}
	e.rel = "../" + filepath.Base(e.outside)
	for _, d := range []string{e.ws, e.ws + "/sub", e.ro, e.outside, e.outside + "/sub"} {
		must(t, os.MkdirAll(d, 0o755))
	}
	must(t, os.WriteFile(e.outside+"/secret.txt", []byte(e.canary), 0o600))
	must(t, os.WriteFile(e.outside+"/sub/deep.txt", []byte(e.canary), 0o644))
	must(t, os.WriteFile(e.ws+"/hello.txt", []byte(helloText), 0o644))
	must(t, os.WriteFile(e.ro+"/ro.txt", []byte(roText), 0o644))
	// Symlinks the host placed inside the workspace, pointing out.
	must(t, os.Symlink(e.outside+"/secret.txt", e.ws+"/host-abs-link"))
	must(t, os.Symlink(e.outside, e.ws+"/host-dir-link"))
	// An old, exact mtime makes any touch visible whatever the clock's
	// granularity.
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, p := range []string{e.outside + "/secret.txt", e.outside + "/sub/deep.txt", e.outside + "/sub", e.outside, e.ro + "/ro.txt", e.ro} {
		must(t, os.Chtimes(p, old, old))
	}
	t.Setenv(canaryEnv, e.canary)
	t.Setenv(grantedEnv, "visible")
	e.watched = map[string]map[string]fileState{e.outside: snapshot(t, e.outside), e.ro: snapshot(t, e.ro)}

	logger := slog.New(captureHandler{c: e.logs})
	h, err := plugin.New(plugin.Options{Registry: prompt.NewRegistry(logger), Cache: plugintest.SharedCache(t), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	e.host = h
	t.Cleanup(func() {
		if err := h.Close(context.Background()); err != nil {
			t.Errorf("close host: %v", err)
		}
	})
	e.main = e.agent("a1")
	return e
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// agent returns the facts of an agent working in the workspace.
func (e *env) agent(id string) *prompt.AgentFacts {
	return &prompt.AgentFacts{ID: id, Session: "session-" + id, Model: "m", Cwd: e.ws}
}

func (e *env) record(s string) {
	e.mu.Lock()
	e.outputs = append(e.outputs, s)
	e.mu.Unlock()
}

func (e *env) recordErr(err error) {
	if err != nil {
		e.record(err.Error())
	}
}

// Grant lines, for load's grants argument.

func (e *env) fsGrant() string {
	return fmt.Sprintf("fs: [{path: workspace, mode: rw}, {path: %q, mode: ro}]", e.ro)
}

func limits(call, init, memory string) string {
	return fmt.Sprintf("limits: {call_timeout: %s, init_timeout: %s, memory: %s}", call, init, memory)
}

var defaultLimits = limits("2s", "5s", "64MiB")

// load loads guest as plugin name from a YAML config entry, the way an
// operator's file would, and returns the host's answer.
func (e *env) load(name, guest string, cfg any, grants ...string) (*plugin.Plugin, error) {
	e.t.Helper()
	spec := e.spec(name, guestWasm(e.t, guest), "", cfg, grants...)
	p, err := e.host.Load(e.ctx, spec)
	e.recordErr(err)
	return p, err
}

// spec builds a Spec through config.Load and plugin.SpecFromEntry.
func (e *env) spec(name, source, pin string, cfg any, grants ...string) plugin.Spec {
	e.t.Helper()
	c, err := json.Marshal(cfg)
	must(e.t, err)
	var y strings.Builder
	fmt.Fprintf(&y, "source: %q\n", source)
	if pin != "" {
		fmt.Fprintf(&y, "sha256: %q\n", pin)
	}
	fmt.Fprintf(&y, "config: %s\n", c)
	if len(grants) > 0 {
		y.WriteString("grants:\n")
		for _, g := range grants {
			fmt.Fprintf(&y, "  %s\n", g)
		}
	}
	entry, err := config.Load(name+".yaml", []byte(y.String()))
	if err != nil {
		e.t.Fatalf("config:\n%s\n%v", y.String(), err)
	}
	spec, err := plugin.SpecFromEntry(name, entry)
	must(e.t, err)
	return spec
}

// compileFirst loads guest once, in a host of its own on the shared
// cache, and closes it, so that a later load of it finds its machine code
// in the cache: an attack whose wall-clock bound covers a load then
// measures the load, not the compiler (seconds on a cold cache and a
// loaded two-core machine). What that load does is not the attack's.
func (e *env) compileFirst(guest string) {
	e.t.Helper()
	h, err := plugin.New(plugin.Options{Registry: prompt.NewRegistry(nil), Cache: plugintest.SharedCache(e.t), Logger: slog.New(slog.DiscardHandler)})
	must(e.t, err)
	defer h.Close(context.Background())
	_, _ = h.Load(e.ctx, e.spec("warm", guestWasm(e.t, guest), "", map[string]any{"self": "warm", "prefix": "warm_"}, e.fsGrant(), defaultLimits))
}

func (e *env) mustLoad(name, guest string, cfg any, grants ...string) *plugin.Plugin {
	e.t.Helper()
	p, err := e.load(name, guest, cfg, grants...)
	if err != nil {
		e.t.Fatalf("load %s: %v", name, err)
	}
	return p
}

// attacker loads the attacker guest as plugin "attacker" with the
// workspace and ro grants and default limits, plus extra grants.
func (e *env) attacker(cfg map[string]any, grants ...string) *plugin.Plugin {
	e.t.Helper()
	if cfg == nil {
		cfg = map[string]any{}
	}
	cfg["self"] = "attacker"
	base := []string{e.fsGrant()}
	if !slices.ContainsFunc(grants, func(g string) bool { return strings.HasPrefix(g, "limits:") }) {
		base = append(base, defaultLimits)
	}
	return e.mustLoad("attacker", "attacker", cfg, append(base, grants...)...)
}

// call runs a tool and records whatever came back.
func (e *env) call(facts *prompt.AgentFacts, name string, args any) (tool.Result, error) {
	e.t.Helper()
	b, err := json.Marshal(args)
	must(e.t, err)
	return e.callRaw(e.ctx, facts, name, b)
}

func (e *env) callRaw(ctx context.Context, facts *prompt.AgentFacts, name string, args []byte) (tool.Result, error) {
	r, err := e.host.CallTool(ctx, facts, name, args)
	e.record(r.Text)
	e.recordErr(err)
	return r, err
}

// attackArgs mirror the attacker guest's arguments.
type attackArgs struct {
	Attack  string               `json:"attack"`
	WS      string               `json:"ws,omitempty"`
	RO      string               `json:"ro,omitempty"`
	Outside string               `json:"outside,omitempty"`
	Rel     string               `json:"rel,omitempty"`
	Path    string               `json:"path,omitempty"`
	N       int                  `json:"n,omitempty"`
	MS      int                  `json:"ms,omitempty"`
	Code    int                  `json:"code,omitempty"`
	Names   []string             `json:"names,omitempty"`
	Exec    *hostfns.ExecRequest `json:"exec,omitempty"`
	HTTP    *hostfns.HTTPRequest `json:"http,omitempty"`
	ID      string               `json:"id,omitempty"`
}

// fsArgs fills the paths of an fs attack.
func (e *env) fsArgs(name string) attackArgs {
	return attackArgs{Attack: name, WS: e.ws, RO: e.ro, Outside: e.outside, Rel: e.rel}
}

// step and report mirror the attacker guest's report.
type step struct {
	Op     string `json:"op"`
	Errno  string `json:"errno"`
	Status string `json:"status"`
	Code   uint32 `json:"code"`
	Msg    string `json:"msg"`
	N      int64  `json:"n"`
	Data   string `json:"data"`
}

type report struct {
	Steps []step `json:"steps"`
}

// attack runs the attack tool (tool "attack" unless given) and decodes
// its report; the tool itself must succeed.
func (e *env) attack(facts *prompt.AgentFacts, a attackArgs) report {
	e.t.Helper()
	return e.attackWith(facts, "attack", a)
}

func (e *env) attackWith(facts *prompt.AgentFacts, tool string, a attackArgs) report {
	e.t.Helper()
	res, err := e.call(facts, tool, a)
	if os.Getenv("HOSTILE_DEBUG") != "" {
		e.t.Logf("%s report: %.3000s (err %v)", a.Attack, res.Text, err)
	}
	if err != nil || res.IsError {
		e.t.Fatalf("attack %s: the tool failed: %+v, %v", a.Attack, res, err)
	}
	var r report
	if err := json.Unmarshal([]byte(res.Text), &r); err != nil {
		e.t.Fatalf("attack %s: bad report %q: %v", a.Attack, res.Text, err)
	}
	return r
}

func (r report) step(t testing.TB, op string) step {
	t.Helper()
	for _, s := range r.Steps {
		if s.Op == op {
			return s
		}
	}
	t.Fatalf("no step %q in report %+v", op, r.Steps)
	return step{}
}

// wantErrno asserts the errno of each op.
func (e *env) wantErrno(r report, errno string, ops ...string) {
	e.t.Helper()
	for _, op := range ops {
		if s := r.step(e.t, op); s.Errno != errno {
			e.t.Errorf("%s: errno %s (data %q), want %s", op, s.Errno, s.Data, errno)
		}
	}
}

// wantStatus asserts a host status and a fragment of its message.
func (e *env) wantStatus(r report, op string, st hostfns.Status, msg string) {
	e.t.Helper()
	s := r.step(e.t, op)
	if s.Code != uint32(st) || !strings.Contains(s.Msg, msg) {
		e.t.Errorf("%s: status %q (%d) %q, want %q (%d) containing %q", op, s.Status, s.Code, s.Msg, st, st, msg)
	}
}

// wantErr asserts that err is target and mentions msg.
func (e *env) wantErr(what string, err error, target error, msg string) {
	e.t.Helper()
	if err == nil || !errors.Is(err, target) || !strings.Contains(err.Error(), msg) {
		e.t.Errorf("%s: err = %v, want %v containing %q", what, err, target, msg)
	}
}

// finish checks what every attack must leave behind: legitimate calls
// work on the same host, no canary was seen anywhere, and nothing outside
// the roots changed.
func (e *env) finish() {
	e.t.Helper()
	e.legit()
	e.checkLeaks()
	defer e.lifecycle()
	for dir, before := range e.watched {
		after := snapshot(e.t, dir)
		for p, b := range before {
			a, ok := after[p]
			if !ok {
				e.t.Errorf("%s/%s disappeared", dir, p)
			} else if a != b {
				e.t.Errorf("%s/%s changed:\n before %+v\n after  %+v", dir, p, b, a)
			}
		}
		for p := range after {
			if _, ok := before[p]; !ok {
				e.t.Errorf("%s/%s appeared", dir, p)
			}
		}
	}
}

// legitBound is how long a legitimate call may take after an attack (a
// fresh instance included) on a loaded two-core machine.
const legitBound = 5 * time.Second

// lifecycle proves the host's lifecycle still answers promptly after the
// attack: EndAgent, Unload of every plugin, then Close (the suite's
// cleanup Close then finds it closed).
func (e *env) lifecycle() {
	e.t.Helper()
	e.within("EndAgent after the attack", closeBound, func() { e.host.EndAgent(e.ctx, e.main.ID) })
	for _, n := range e.host.Plugins() {
		e.within("Unload "+n+" after the attack", closeBound, func() {
			if err := e.host.Unload(e.ctx, n); err != nil {
				e.t.Errorf("unload %s: %v", n, err)
			}
		})
	}
	e.within("Close after the attack", closeBound, func() {
		if err := e.host.Close(e.ctx); err != nil {
			e.t.Errorf("close: %v", err)
		}
	})
}

// legit proves the host still serves legitimate work after the attack:
// the attacker's own benign tool when it is still loaded (on a re-created
// instance if the attack killed one), otherwise a benign plugin loaded
// now; then one agent turn through internal/agent in which the model calls
// that tool.
func (e *env) legit() {
	e.t.Helper()
	tool := "benign_ok"
	if p := e.host.Plugin("attacker"); p != nil && slices.ContainsFunc(p.Contribution().Tools, func(t prompt.Tool) bool { return t.Name == "ok" }) {
		tool = "ok"
		start := time.Now()
		r, err := e.call(e.main, tool, map[string]string{"path": e.ws + "/hello.txt"})
		if err != nil || r.IsError || r.Text != helloText {
			e.t.Errorf("legitimate call to the attacker after the attack: %+v, %v", r, err)
		}
		// Normal time: milliseconds; an attack that left the host busy
		// or a lock held shows as seconds.
		if took := time.Since(start); took > legitBound {
			e.t.Errorf("the legitimate call after the attack took %v", took)
		}
	} else if e.host.Plugin("benign") == nil {
		if _, err := e.load("benign", "attacker", map[string]any{"prefix": "benign_", "self": "benign"}, e.fsGrant(), defaultLimits); err != nil {
			e.t.Errorf("load a benign plugin after the attack: %v", err)
			return
		}
	}
	e.agentTurn(tool)
}

// agentTurn runs one turn of a real agent loop on the host: the model
// calls tool to read the workspace's hello.txt, then answers with what it
// read.
func (e *env) agentTurn(tool string) {
	e.t.Helper()
	args, _ := json.Marshal(map[string]string{"path": e.ws + "/hello.txt"})
	provider := &scripted.Tools{Calls: []scripted.Call{{Name: tool, Arguments: string(args)}}, Answer: scripted.Echo}
	start := time.Now()
	res, _, err := turntest.Turn(e.ctx, e.t, e.host, agent.Options{ID: "turn-" + randomToken(e.t)[:8], Model: "m",
		Provider: provider, Logger: slog.New(captureHandler{c: e.logs})}, e.ws, "read hello.txt")
	if took := time.Since(start); took > legitBound {
		e.t.Errorf("an agent turn after the attack took %v", took)
	}
	e.recordErr(err)
	e.record(res.Text)
	if err != nil || res.End.Kind != session.EndCompleted || res.Steps != 2 || res.Text != "the tool said: "+helloText {
		e.t.Errorf("an agent turn after the attack: %+v, %v", res, err)
	}
}

// checkLeaks searches every output, error and log record for the canary
// and the other secrets.
func (e *env) checkLeaks() {
	e.t.Helper()
	e.mu.Lock()
	outs := slices.Clone(e.outputs)
	e.mu.Unlock()
	logs := e.logs.all()
	for _, secret := range append([]string{e.canary}, e.secrets...) {
		for _, o := range outs {
			if strings.Contains(o, secret) {
				e.t.Errorf("a secret leaked into an output: %.300q", o)
			}
		}
		for _, l := range logs {
			if strings.Contains(l, secret) {
				e.t.Errorf("a secret leaked into the logs: %.300q", l)
			}
		}
	}
}

func jsonBytes(v any) ([]byte, error) { return json.Marshal(v) }
