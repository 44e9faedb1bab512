package agent

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/dsh-wasm/dsh-wasm/internal/plugintest"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"log/slog"
	"sync"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/internal/replay"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/session/filestore"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

var discard = slog.New(slog.DiscardHandler)

// --- scripted model answers ---

type call struct{ id, name, args string }

func usageChunk(in, out int) model.Chunk {
	return model.Chunk{Type: model.ChunkUsage, Usage: &model.Usage{InputTokens: in, OutputTokens: out}}
}

func finish(kind string) model.Chunk {
	return model.Chunk{Type: model.ChunkFinish, Reason: &model.FinishReason{Kind: kind}}
}

// textAnswer is a complete answer of reasoning then text.
func textAnswer(text string) []model.Chunk {
	return []model.Chunk{
		{Type: model.ChunkBlockStart, Index: 0, BlockType: model.BlockReasoning},
		{Type: model.ChunkReasoningDelta, Index: 0, Text: "thinking about it"},
		{Type: model.ChunkBlockEnd, Index: 0},
		{Type: model.ChunkBlockStart, Index: 1, BlockType: model.BlockText},
		{Type: model.ChunkTextDelta, Index: 1, Text: text},
		{Type: model.ChunkBlockEnd, Index: 1},
		usageChunk(100, 10),
		finish(model.FinishStop),
	}
}

// callAnswer is a complete answer calling tools, its arguments split
// across two deltas.
func callAnswer(calls ...call) []model.Chunk {
	var cs []model.Chunk
	for i, c := range calls {
		half := len(c.args) / 2
		cs = append(cs,
			model.Chunk{Type: model.ChunkBlockStart, Index: i, BlockType: model.BlockToolCall},
			model.Chunk{Type: model.ChunkToolCallDelta, Index: i, ID: c.id, Name: c.name, ArgumentsDelta: c.args[:half]},
			model.Chunk{Type: model.ChunkToolCallDelta, Index: i, ArgumentsDelta: c.args[half:]},
			model.Chunk{Type: model.ChunkBlockEnd, Index: i},
		)
	}
	return append(cs, usageChunk(100, 20), finish(model.FinishToolCalls))
}

// step is one scripted answer.
func step(turn, n int, chunks []model.Chunk) replay.Step {
	return replay.Step{Turn: turn, Step: n, Chunks: chunks}
}

// scripted returns a replay provider answering with steps.
func scripted(t testing.TB, steps ...replay.Step) *replay.Provider {
	t.Helper()
	p, err := replay.New(&replay.Script{Name: t.Name(), Steps: steps}, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// recorder wraps a provider and keeps the requests it saw.
type recorder struct {
	inner model.Provider
	mu    sync.Mutex
	reqs  []model.Request
}

func (r *recorder) Generate(ctx context.Context, req *model.Request, emit func(model.Chunk) error) error {
	r.mu.Lock()
	r.reqs = append(r.reqs, *req)
	r.mu.Unlock()
	return r.inner.Generate(ctx, req, emit)
}

func (r *recorder) requests() []model.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]model.Request(nil), r.reqs...)
}

// --- tools ---

// fakeTools is a ToolRunner answering through fn.
type fakeTools struct {
	fn    func(ctx context.Context, name string, args []byte) (tool.Result, error)
	mu    sync.Mutex
	calls []string // name + " " + args
	ended []string
}

func (f *fakeTools) CallTool(ctx context.Context, facts *prompt.AgentFacts, name string, args []byte) (tool.Result, error) {
	f.mu.Lock()
	f.calls = append(f.calls, name+" "+string(args))
	f.mu.Unlock()
	if f.fn == nil {
		return tool.Result{}, errors.New("fakeTools: no tools")
	}
	return f.fn(ctx, name, args)
}

func (f *fakeTools) EndAgent(_ context.Context, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended = append(f.ended, id)
}

func (f *fakeTools) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// echoTools answers every call with "<name>: <args>".
func echoTools() *fakeTools {
	return &fakeTools{fn: func(_ context.Context, name string, args []byte) (tool.Result, error) {
		return tool.Result{Text: name + ": " + string(args)}, nil
	}}
}

// --- registries, sessions, agents ---

const testPersona = "You are a test agent."

// testModel is the model newFixture gives an agent without one.
const testModel = "test-model"

// noModel, set by a test, keeps newFixture from giving a model.
var noModel bool

// newRegistry returns a registry with the built-in variables, the harness
// sections and the named tools.
func newRegistry(t testing.TB, persona string, tools ...string) *prompt.Registry {
	t.Helper()
	reg := prompt.NewRegistry(discard)
	if _, err := RegisterBuiltinVariables(reg); err != nil {
		t.Fatal(err)
	}
	if _, _, err := prompt.RegisterHarnessSections(reg, persona); err != nil {
		t.Fatal(err)
	}
	for _, name := range tools {
		if _, err := reg.RegisterTool(prompt.Tool{Name: name, Description: "test tool " + name,
			Parameters: json.RawMessage(`{"type":"object"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

func newStore(t testing.TB) *filestore.Store { return filestore.New(t.TempDir(), filestore.Options{}) }

func newSession(t testing.TB, store *filestore.Store, h session.Header) *session.Session {
	t.Helper()
	s, err := store.Create(h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// fixture is an agent with what it runs on.
type fixture struct {
	*Agent
	sess  *session.Session
	store *filestore.Store
	reg   *prompt.Registry
	bus   *events.Bus
	tools *fakeTools
	prov  *recorder
}

// newFixture builds an agent on a fresh session with cwd /srv/project. The
// options' Provider is wrapped in a recorder; unset dependencies get
// defaults: a registry with an echo tool, a bus, echo tools.
func newFixture(t testing.TB, opts Options) *fixture {
	t.Helper()
	f := &fixture{store: newStore(t)}
	if opts.Session == nil {
		opts.Session = newSession(t, f.store, session.Header{Cwd: "/srv/project"})
	}
	if opts.Registry == nil {
		opts.Registry = newRegistry(t, testPersona, "echo")
	}
	if opts.Bus == nil {
		opts.Bus = events.New(discard)
	}
	if opts.Tools == nil {
		opts.Tools = echoTools()
	}
	if opts.Logger == nil {
		opts.Logger = discard
	}
	if opts.Model == "" && !noModel {
		opts.Model = testModel
	}
	f.prov = &recorder{inner: opts.Provider}
	opts.Provider = f.prov
	f.sess, f.reg, f.bus = opts.Session, opts.Registry, opts.Bus
	f.tools, _ = opts.Tools.(*fakeTools)
	a, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	f.Agent = a
	return f
}

func (f *fixture) prompt(t testing.TB, text string) TurnResult {
	t.Helper()
	res, err := f.Prompt(context.Background(), text)
	if err != nil {
		t.Fatalf("Prompt(%q): %v", text, err)
	}
	return res
}

// types lists the events' types, chunks left out.
func types(evs []session.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Type != session.TypeAssistantChunk {
			out = append(out, e.Type)
		}
	}
	return out
}

// ofType returns the payloads of the events of T's type.
func ofType[T session.Payload](t testing.TB, evs []session.Event) []T {
	t.Helper()
	var zero T
	var out []T
	for _, e := range evs {
		if e.Type == zero.EventType() {
			v, err := session.As[T](e)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
	}
	return out
}

// --- plugin host ---

// newHost returns a plugin host on reg and bus.
func newHost(t testing.TB, reg *prompt.Registry, bus *events.Bus) *plugin.Host {
	t.Helper()
	h, err := plugin.New(plugin.Options{Registry: reg, Bus: bus, Cache: plugintest.SharedCache(t), Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

// loadTestkit loads the testkit guest with config cfg.
func loadTestkit(t testing.TB, h *plugin.Host, name string, cfg map[string]any, limits config.Limits) {
	t.Helper()
	path, err := guestbuild.Build("testdata/guests/testkit")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Load(context.Background(), plugin.Spec{Name: name, Source: path, Config: b, Grants: &config.Grants{Limits: limits}}); err != nil {
		t.Fatal(err)
	}
}
