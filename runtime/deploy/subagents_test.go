package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/guests"
	"github.com/dsh-wasm/dsh-wasm/internal/deploytest"
	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/internal/subagent"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// subagentGuest is builtin:subagent under name, bound to provider, its
// tool called tool, granted the providers in grants.
func subagentGuest(name, provider, tool string, grants ...string) deploy.PluginSpec {
	cfg, _ := json.Marshal(map[string]string{"provider": provider, "tool_name": tool})
	return deploy.PluginSpec{Name: name, Source: "builtin:subagent", Config: cfg, Grants: &config.Grants{Subagents: grants}}
}

// brain answers model requests by looking at them: the parent and each
// child are told apart by their request's metadata.
type brain struct {
	mu       sync.Mutex
	requests []*model.Request
	answer   func(ctx context.Context, req *model.Request) (scripted.Answer, error)
}

func (b *brain) Generate(ctx context.Context, req *model.Request, emit func(model.Chunk) error) error {
	b.mu.Lock()
	b.requests = append(b.requests, req)
	b.mu.Unlock()
	a, err := b.answer(ctx, req)
	if err != nil {
		return err
	}
	for _, c := range a.Chunks() {
		if err := emit(c); err != nil {
			return err
		}
	}
	return nil
}

func (b *brain) childRequests() []*model.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*model.Request
	for _, r := range b.requests {
		if r.Meta.ParentSessionID != "" {
			out = append(out, r)
		}
	}
	return out
}

// lastToolResult is the text of the last tool message of req.
func lastToolResult(req *model.Request) (string, bool, bool) {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Role == "tool" {
			var sb strings.Builder
			for _, p := range m.Content {
				sb.WriteString(p.Text)
			}
			return sb.String(), m.IsError, true
		}
	}
	return "", false, false
}

func userTexts(req *model.Request) []string {
	var out []string
	for _, m := range req.Messages {
		if m.Role == "user" {
			for _, p := range m.Content {
				out = append(out, p.Text)
			}
		}
	}
	return out
}

// delegate is a parent that calls tool once per turn with childPrompt,
// then reports the tool's result as its answer ("ERR:" before an error).
func delegate(tool, childPrompt string, child func(context.Context, *model.Request) (scripted.Answer, error)) *brain {
	return &brain{answer: func(ctx context.Context, req *model.Request) (scripted.Answer, error) {
		if req.Meta.ParentSessionID != "" {
			return child(ctx, req)
		}
		if req.Meta.Step == 1 {
			args, _ := json.Marshal(map[string]string{"description": "delegated task", "prompt": childPrompt})
			return scripted.Answer{Calls: []scripted.Call{{ID: "call-1", Name: tool, Arguments: string(args)}}}, nil
		}
		text, isErr, _ := lastToolResult(req)
		if isErr {
			text = "ERR:" + text
		}
		return scripted.Answer{Text: text}, nil
	}}
}

// children returns the logs of the sessions in dir whose parent is
// parentID.
func children(t *testing.T, parent *deploy.Session) []*session.Log {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(filepath.Dir(parent.Path()), "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []*session.Log
	for _, f := range files {
		l, err := session.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if l.Header.ParentSession == parent.ID() {
			out = append(out, l)
		}
	}
	return out
}

func lastTurnEnd(t *testing.T, evs []session.Event) session.EndReason {
	t.Helper()
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == session.TypeTurnEnd {
			te, err := session.As[session.TurnEnd](evs[i])
			if err != nil {
				t.Fatal(err)
			}
			return te.Reason
		}
	}
	t.Fatal("no turn/end")
	return session.EndReason{}
}

// A spawned child runs the tool's prompt as a fresh conversation in a
// session file of its own that names its parent; its last message is the
// tool's result, and its stream is not the parent's.
func TestSpawnRunsAChildInItsOwnSession(t *testing.T) {
	b := delegate("subagent", "say CHILD_OK", func(_ context.Context, req *model.Request) (scripted.Answer, error) {
		return scripted.Answer{Text: "CHILD_OK"}, nil
	})
	d := open(t, deploy.Options{Model: "test-model", Provider: b, Persona: "You are Test Persona.",
		Plugins: []deploy.PluginSpec{subagentGuest("subagent", "spawn", "subagent", "spawn")}})
	s, err := d.NewSession(context.Background(), deploy.SessionOptions{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Prompt(context.Background(), "delegate it")
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "CHILD_OK" {
		t.Fatalf("parent answered %q (its err %v), want the child's CHILD_OK", res.Text, res.Err)
	}
	kids := children(t, s)
	if len(kids) != 1 {
		t.Fatalf("%d child sessions, want 1", len(kids))
	}
	k := kids[0]
	if k.Header.SeedLength != 0 || k.Header.Cwd != s.Cwd() {
		t.Fatalf("spawned child header %+v", k.Header)
	}
	if r := lastTurnEnd(t, k.Events); r.Kind != session.EndCompleted {
		t.Fatalf("child turn ended %+v", r)
	}
	crs := b.childRequests()
	if len(crs) != 1 || !slices.Equal(userTexts(crs[0]), []string{"say CHILD_OK"}) {
		t.Fatalf("child saw user messages %v, want only its prompt", userTexts(crs[0]))
	}
	if !strings.Contains(crs[0].System, "You are Test Persona.") {
		t.Fatal("the child's system prompt lacks the deployment persona")
	}
	// The child's records are in its file only: the parent's log has one
	// turn and one user message, its own.
	var users, turns int
	for _, e := range s.History() {
		switch e.Type {
		case session.TypeUserMessage:
			users++
		case session.TypeTurnStart:
			turns++
		}
	}
	if users != 1 || turns != 1 {
		t.Fatalf("the parent's log has %d user messages and %d turns, want 1 and 1", users, turns)
	}
}

// A fork's child inherits the completed turns and not the turn in
// flight: its seed is the parent's log up to the last turn/end, and the
// header says how long that is.
func TestForkSeesOnlyTheCompletedPrefix(t *testing.T) {
	turn := 0
	b := delegate("subagent_fork", "what is the codeword?", func(_ context.Context, req *model.Request) (scripted.Answer, error) {
		return scripted.Answer{Text: "MARMALADE"}, nil
	})
	first := b.answer
	b.answer = func(ctx context.Context, req *model.Request) (scripted.Answer, error) {
		if req.Meta.ParentSessionID == "" && req.Meta.Turn == 1 {
			return scripted.Answer{Text: "noted"}, nil
		}
		return first(ctx, req)
	}
	d := open(t, deploy.Options{Model: "test-model", Provider: b,
		Plugins: []deploy.PluginSpec{subagentGuest("subagent_fork", "fork", "subagent_fork", "fork")}})
	s, err := d.NewSession(context.Background(), deploy.SessionOptions{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"the codeword is MARMALADE", "fork and ask"} {
		turn++
		if res, err := s.Prompt(context.Background(), text); err != nil || res.End.Kind != session.EndCompleted {
			t.Fatalf("turn %d: %+v %v", turn, res, err)
		}
	}
	crs := b.childRequests()
	if len(crs) != 1 {
		t.Fatalf("%d child requests", len(crs))
	}
	got := userTexts(crs[0])
	if !slices.Equal(got, []string{"the codeword is MARMALADE", "what is the codeword?"}) {
		t.Fatalf("fork child saw user messages %q, want turn 1 and its own prompt, not the turn in flight", got)
	}
	kids := children(t, s)
	if len(kids) != 1 {
		t.Fatalf("%d children", len(kids))
	}
	k := kids[0]
	parent := s.History()
	n := k.Header.SeedLength
	if n == 0 || n >= len(parent) || parent[n-1].Type != session.TypeTurnEnd {
		t.Fatalf("seedLength %d does not end at the parent's first turn/end", n)
	}
	for i := 0; i < n; i++ {
		if k.Events[i].Type != parent[i].Type || string(k.Events[i].Data) != string(parent[i].Data) {
			t.Fatalf("seed event %d differs from the parent's: %s vs %s", i, k.Events[i].Data, parent[i].Data)
		}
	}
	if k.Events[n].Type != session.TypeTurnStart || !strings.Contains(string(k.Events[n].Data), `"turn":2`) {
		t.Fatalf("the child's own turn does not continue the parent's numbering: %s", k.Events[n].Data)
	}
}

// A child at the depth limit cannot start another: the grandchild's tool
// call is an error result naming the limit.
func TestSubagentDepthLimit(t *testing.T) {
	var b *brain
	b = &brain{answer: func(_ context.Context, req *model.Request) (scripted.Answer, error) {
		if req.Meta.Step == 1 {
			args := `{"description":"nest","prompt":"go deeper"}`
			return scripted.Answer{Calls: []scripted.Call{{ID: "c", Name: "subagent", Arguments: args}}}, nil
		}
		text, isErr, _ := lastToolResult(req)
		if isErr {
			text = "ERR:" + text
		}
		return scripted.Answer{Text: text}, nil
	}}
	d := open(t, deploy.Options{Model: "test-model", Provider: b, SubagentDepth: 1,
		Plugins: []deploy.PluginSpec{subagentGuest("subagent", "spawn", "subagent", "spawn")}})
	s, err := d.NewSession(context.Background(), deploy.SessionOptions{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Prompt(context.Background(), "nest")
	if err != nil {
		t.Fatal(err)
	}
	// The parent gets the child's answer, which is the child's own
	// failed attempt to go one level deeper.
	if !strings.HasPrefix(res.Text, "ERR:") || !strings.Contains(res.Text, "depth") {
		t.Fatalf("parent answered %q, want the child's depth-limit error", res.Text)
	}
	if n := len(children(t, s)); n != 1 {
		t.Fatalf("%d children of the top agent, want 1", n)
	}
}

// Cancelling the parent's turn cancels the child's: both end aborted.
func TestCancellingParentCancelsChild(t *testing.T) {
	started := make(chan struct{})
	b := delegate("subagent", "wait forever", func(ctx context.Context, _ *model.Request) (scripted.Answer, error) {
		close(started)
		<-ctx.Done()
		return scripted.Answer{}, ctx.Err()
	})
	d := open(t, deploy.Options{Model: "test-model", Provider: b,
		Plugins: []deploy.PluginSpec{subagentGuest("subagent", "spawn", "subagent", "spawn")}})
	s, err := d.NewSession(context.Background(), deploy.SessionOptions{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		res, err := s.Prompt(context.Background(), "go")
		if te := (*deploy.TurnError)(nil); errors.As(err, &te) && te.End.Kind == session.EndAborted {
			err = nil
		} else if err == nil {
			err = errors.New("parent ended " + res.End.Kind)
		}
		done <- err
	}()
	select {
	case <-started:
	case <-time.After(60 * time.Second):
		t.Fatal("the child never called the model")
	}
	if !s.Cancel("test") {
		t.Fatal("Cancel found no running turn")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the parent did not end after Cancel: the child holds it")
	}
	kids := children(t, s)
	if len(kids) != 1 {
		t.Fatalf("%d children", len(kids))
	}
	if r := lastTurnEnd(t, kids[0].Events); r.Kind != session.EndAborted {
		t.Fatalf("child turn ended %+v, want aborted", r)
	}
}

// A plugin without grants.subagents cannot run a child, even with the
// tool registered: the call is an error result naming the grant.
func TestSubagentRunWithoutGrantIsDenied(t *testing.T) {
	b := delegate("subagent", "x", func(context.Context, *model.Request) (scripted.Answer, error) {
		return scripted.Answer{Text: "should not run"}, nil
	})
	d := open(t, deploy.Options{Model: "test-model", Provider: b,
		Plugins: []deploy.PluginSpec{subagentGuest("subagent", "spawn", "subagent", "fork")}})
	s, err := d.NewSession(context.Background(), deploy.SessionOptions{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Prompt(context.Background(), "go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Text, "ERR:") || !strings.Contains(res.Text, "grants.subagents") {
		t.Fatalf("parent saw %q, want a denial naming grants.subagents", res.Text)
	}
	if len(b.childRequests()) != 0 || len(children(t, s)) != 0 {
		t.Fatal("a child ran without the grant")
	}
}

// customProvider is a provider the test adds and removes.
type customProvider struct {
	name    string
	inherit bool
}

func (p customProvider) Name() string                        { return p.name }
func (p customProvider) Capabilities() subagent.Capabilities { return subagent.Capabilities{} }
func (p customProvider) InheritsParentContext() bool         { return p.inherit }
func (p customProvider) Start(context.Context, subagent.Request) (subagent.Run, error) {
	return nil, errors.New("not for running")
}

func toolDesc(d *deploy.Deployment, name string) (string, bool) {
	for _, t := range deploy.RegistryOf(d).Tools() {
		if t.Name == name {
			return t.Description, true
		}
	}
	return "", false
}

// The tool follows its provider: absent before it, there after
// provider-added, worded from InheritsParentContext, gone after
// provider-removed, and re-worded when it comes back with other facts or
// the plugin reloads.
func TestSubagentToolFollowsItsProvider(t *testing.T) {
	ctx := context.Background()
	spec := subagentGuest("helper", "custom", "helper", "custom")
	d := open(t, deploy.Options{Model: "test-model", Provider: &brain{}, Plugins: []deploy.PluginSpec{spec}})
	if _, ok := toolDesc(d, "helper"); ok {
		t.Fatal("the tool exists before its provider")
	}
	if err := subagent.Of(d).Register(ctx, customProvider{name: "custom"}); err != nil {
		t.Fatal(err)
	}
	desc, ok := toolDesc(d, "helper")
	if !ok || !strings.Contains(desc, "does not see this conversation") || strings.Contains(desc, "INHERITS") {
		t.Fatalf("after provider-added: %v %q", ok, desc)
	}
	if err := subagent.Of(d).Unregister(ctx, "custom"); err != nil {
		t.Fatal(err)
	}
	if _, ok := toolDesc(d, "helper"); ok {
		t.Fatal("the tool survived provider-removed")
	}
	if err := subagent.Of(d).Register(ctx, customProvider{name: "custom", inherit: true}); err != nil {
		t.Fatal(err)
	}
	if desc, _ := toolDesc(d, "helper"); !strings.Contains(desc, "INHERITS") {
		t.Fatalf("an inheriting provider's tool reads %q", desc)
	}
	// Reload: dsh_init asks subagent_providers and words the tool from
	// the provider as it is now.
	if err := subagent.Of(d).Unregister(ctx, "custom"); err != nil {
		t.Fatal(err)
	}
	if _, err := plugin.HostOf(d).Reload(ctx, deploy.HostSpec(spec)); err != nil {
		t.Fatal(err)
	}
	if _, ok := toolDesc(d, "helper"); ok {
		t.Fatal("reloaded without its provider, the tool is there")
	}
	if err := subagent.Of(d).Register(ctx, customProvider{name: "custom"}); err != nil {
		t.Fatal(err)
	}
	if _, err := plugin.HostOf(d).Reload(ctx, deploy.HostSpec(spec)); err != nil {
		t.Fatal(err)
	}
	if desc, ok := toolDesc(d, "helper"); !ok || !strings.Contains(desc, "does not see this conversation") {
		t.Fatalf("after reload: %v %q", ok, desc)
	}
	// Unloading the plugin takes the tool with it.
	if err := plugin.HostOf(d).Unload(ctx, "helper"); err != nil {
		t.Fatal(err)
	}
	if _, ok := toolDesc(d, "helper"); ok {
		t.Fatal("the tool survived the unload")
	}
}

// A provider-removed listener that fails before the guest's cannot keep
// the guest from dropping its stale tool.
func TestFailingProviderRemovedListenerDoesNotStarveTheTool(t *testing.T) {
	ctx := context.Background()
	d := open(t, deploy.Options{Model: "test-model", Provider: &brain{}})
	if _, err := deploy.BusOf(d).On(events.EventProviderRemoved, "thrower", func(context.Context, any) error {
		panic("listener bug")
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := plugin.HostOf(d).Load(ctx, deploy.HostSpec(subagentGuest("helper", "custom", "helper", "custom"))); err != nil {
		t.Fatal(err)
	}
	if err := subagent.Of(d).Register(ctx, customProvider{name: "custom"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := toolDesc(d, "helper"); !ok {
		t.Fatal("no tool after provider-added")
	}
	err := subagent.Of(d).Unregister(ctx, "custom")
	if !errors.Is(err, events.ErrListenerPanic) {
		t.Fatalf("Unregister = %v, want the thrower reported", err)
	}
	if _, ok := toolDesc(d, "helper"); ok {
		t.Fatal("the tool is stale: the failing listener starved the guest's")
	}
}

// A provider-added listener that fails rolls the registration back, and
// the guest, which had taken the provider, drops its tool again.
func TestFailingProviderAddedListenerRollsBack(t *testing.T) {
	ctx := context.Background()
	d := open(t, deploy.Options{Model: "test-model", Provider: &brain{},
		Plugins: []deploy.PluginSpec{subagentGuest("helper", "custom", "helper", "custom")}})
	if _, err := deploy.BusOf(d).On(events.EventProviderAdded, "refuser", func(context.Context, any) error {
		return errors.New("not this one")
	}); err != nil {
		t.Fatal(err)
	}
	if err := subagent.Of(d).Register(ctx, customProvider{name: "custom"}); err == nil {
		t.Fatal("Register succeeded although a listener refused")
	}
	if _, ok := subagent.Of(d).Lookup("custom"); ok {
		t.Fatal("the refused provider is registered")
	}
	if _, ok := toolDesc(d, "helper"); ok {
		t.Fatal("the guest kept the tool of a provider that was rolled back")
	}
}

// The deployment offers spawn and fork, with their facts.
func TestBuiltinProviders(t *testing.T) {
	d := open(t, deploy.Options{Model: "test-model", Provider: &brain{}})
	got := subagent.Of(d).Providers()
	if len(got) != 2 || got[0].Name != "spawn" || got[0].InheritsParentContext || got[1].Name != "fork" || !got[1].InheritsParentContext {
		t.Fatalf("providers %+v", got)
	}
}

// A child that does not complete is a tool error for the parent's model,
// carrying the child's stop reason.
func TestChildThatDoesNotCompleteIsAToolError(t *testing.T) {
	b := delegate("subagent", "fail", func(context.Context, *model.Request) (scripted.Answer, error) {
		return scripted.Answer{}, errors.New("model unavailable")
	})
	d := open(t, deploy.Options{Model: "test-model", Provider: b,
		Plugins: []deploy.PluginSpec{subagentGuest("subagent", "spawn", "subagent", "spawn")}})
	s, err := d.NewSession(context.Background(), deploy.SessionOptions{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Prompt(context.Background(), "go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Text, "ERR:") || !strings.Contains(res.Text, `did not complete`) || !strings.Contains(res.Text, `"error"`) {
		t.Fatalf("parent saw %q, want a tool error with the child's stop reason", res.Text)
	}
	if res.End.Kind != session.EndCompleted {
		t.Fatalf("the parent's turn ended %+v: a failed child must not end it", res.End)
	}
}

// A deployment file's subagents section sets the depth limit and adds its
// ACP agents as providers, and a guest bound to one offers its tool.
func TestOpenRegistersACPProvidersFromTheFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "dsh.yml")
	src := `model: m
sessions: state
plugins:
  - name: review
    source: builtin:subagent
    config: {provider: reviewer, tool_name: review}
    grants: {subagents: [reviewer]}
subagents:
  max_depth: 2
  acp:
    - {name: reviewer, command: [some-acp-agent, --stdio]}
`
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, err := deploy.Open(ctx, file, deploy.Options{Cache: deploytest.Cache(t), Builtins: guests.All()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(ctx)
	var names []string
	for _, p := range subagent.Of(d).Providers() {
		names = append(names, p.Name)
		if p.Capabilities.MaxDepth != 2 {
			t.Errorf("provider %s has depth limit %d, want the file's 2", p.Name, p.Capabilities.MaxDepth)
		}
	}
	if !slices.Equal(names, []string{"spawn", "fork", "reviewer"}) {
		t.Fatalf("providers %v", names)
	}
	if desc, ok := toolDesc(d, "review"); !ok || !strings.Contains(desc, "does not see this conversation") {
		t.Fatalf("the ACP-bound tool: %v %q", ok, desc)
	}
}

// A child gets its own instance of every plugin: a counter the parent
// bumped starts afresh in the child, and the child's calls do not move
// the parent's.
func TestChildHasItsOwnPluginInstances(t *testing.T) {
	var mu sync.Mutex
	var parentResults []string
	b := &brain{answer: func(_ context.Context, req *model.Request) (scripted.Answer, error) {
		if req.Meta.ParentSessionID != "" {
			if req.Meta.Step == 1 {
				return scripted.Answer{Calls: []scripted.Call{{ID: "k1", Name: "counter", Arguments: `{}`}}}, nil
			}
			text, _, _ := lastToolResult(req)
			return scripted.Answer{Text: text}, nil
		}
		if req.Meta.Step > 1 {
			text, _, _ := lastToolResult(req)
			mu.Lock()
			parentResults = append(parentResults, text)
			mu.Unlock()
		}
		switch req.Meta.Step {
		case 1, 3:
			return scripted.Answer{Calls: []scripted.Call{{ID: fmt.Sprint("p", req.Meta.Step), Name: "counter", Arguments: `{}`}}}, nil
		case 2:
			return scripted.Answer{Calls: []scripted.Call{{ID: "p2", Name: "subagent", Arguments: `{"description":"count","prompt":"count once"}`}}}, nil
		}
		return scripted.Answer{Text: "done"}, nil
	}}
	d := open(t, deploy.Options{Model: "test-model", Provider: b, Plugins: []deploy.PluginSpec{
		testkit(t, "kit", map[string]any{"tools": []string{"counter"}}),
		subagentGuest("subagent", "spawn", "subagent", "spawn"),
	}})
	s, err := d.NewSession(context.Background(), deploy.SessionOptions{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := s.Prompt(context.Background(), "count"); err != nil || res.Text != "done" {
		t.Fatalf("%+v %v", res, err)
	}
	if !slices.Equal(parentResults, []string{"1", "1", "2"}) {
		t.Fatalf("parent saw counter, child's counter, counter = %v; want 1, 1, 2 (separate instances)", parentResults)
	}
}
