package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/guests"
	"github.com/dsh-wasm/dsh-wasm/internal/deploytest"
	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

func testkit(t testing.TB, name string, cfg map[string]any) deploy.PluginSpec {
	t.Helper()
	path, err := guestbuild.Build("testdata/guests/testkit")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return deploy.PluginSpec{Name: name, Source: path, Config: b}
}

func open(t testing.TB, opts deploy.Options) *deploy.Deployment {
	t.Helper()
	if opts.SessionsDir == "" {
		opts.SessionsDir = t.TempDir()
	}
	if opts.Cache == nil {
		opts.Cache = deploytest.Cache(t)
	}
	if opts.Builtins == nil {
		opts.Builtins = guests.All()
	}
	d, err := deploy.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return d
}

// A plugin cannot claim what the harness or the embedder registers: the
// harness's names are reserved, and the embedder's native sections and
// tools are in the registry before any plugin loads, so the plugin's
// registration fails and so does the deployment.
func TestHarnessNamesAreTakenBeforePlugins(t *testing.T) {
	cases := []struct {
		name string
		cfg  map[string]any
		want string
	}{
		{"variable model", map[string]any{"variables": []string{"model"}}, "name reserved for the harness"},
		{"variable cwd", map[string]any{"variables": []string{"cwd"}}, "name reserved for the harness"},
		{"identity section", map[string]any{"sections": []map[string]any{{"name": prompt.IdentitySection, "order": 5, "text": "I am someone else."}}}, "name reserved for the harness"},
		{"persona section", map[string]any{"sections": []map[string]any{{"name": prompt.PersonaSection, "order": 5, "text": "x"}}}, "name reserved for the harness"},
		{"native section", map[string]any{"sections": []map[string]any{{"name": "embedder:rules", "order": 5, "text": "x"}}}, prompt.ErrDuplicateSection.Error()},
		{"native tool", map[string]any{"tools": []string{"echo"}}, prompt.ErrDuplicateTool.Error()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := deploy.New(context.Background(), deploy.Options{
				SessionsDir: t.TempDir(), Cache: deploytest.Cache(t),
				Sections: []prompt.Section{{Name: "embedder:rules", Order: 50, Text: "Be brief."}},
				Tools:    []deploy.Tool{echoTool()},
				Plugins:  []deploy.PluginSpec{testkit(t, "claimer", c.cfg)},
			})
			// The refusal reaches the guest as a status and comes back as
			// its init error: the cause is in the text.
			if !errors.Is(err, plugin.ErrInit) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New = %v, want an init failure: %v", err, c.want)
			}
			if !strings.Contains(err.Error(), "claimer") {
				t.Errorf("error %q does not name the plugin", err)
			}
		})
	}
}

func echoTool() deploy.Tool {
	return deploy.Tool{
		Tool: prompt.Tool{
			Name:        "echo",
			Description: "Echo the text back.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		},
		Run: func(_ context.Context, c deploy.ToolCall) (tool.Result, error) {
			var a struct{ Text string }
			if err := json.Unmarshal(c.Args, &a); err != nil {
				return tool.Result{}, err
			}
			return tool.Result{Text: "native " + a.Text + " in " + c.Agent.Cwd}, nil
		},
	}
}

// One session runs a native tool and a Wasm tool in one step, a failing
// native tool becomes an error result, the stream shows every event in
// order, and Close releases the agent's plugin instance.
func TestSessionRunsNativeAndWasmTools(t *testing.T) {
	provider, err := scripted.Provider([]scripted.Answer{
		{Calls: []scripted.Call{
			{ID: "c1", Name: "echo", Arguments: `{"text":"hi"}`},
			{ID: "c2", Name: "counter", Arguments: `{}`},
			{ID: "c3", Name: "boom", Arguments: `{}`},
		}},
		{Text: "done"},
	})
	if err != nil {
		t.Fatal(err)
	}
	boom := deploy.Tool{Tool: prompt.Tool{Name: "boom", Description: "Fails."}, Run: func(context.Context, deploy.ToolCall) (tool.Result, error) {
		panic("kaboom")
	}}
	// Eager, so that the load-time instance exists whether or not an
	// earlier test recorded the plugin's manifest (lazy_test.go covers
	// lazy loads).
	d := open(t, deploy.Options{
		Model: "m1", Persona: "Persona on {{model}}.", Provider: provider,
		Tools:        []deploy.Tool{echoTool(), boom},
		Plugins:      []deploy.PluginSpec{testkit(t, "kit", map[string]any{"tools": []string{"counter"}})},
		EagerCompile: true,
	})
	ctx := context.Background()
	cwd := t.TempDir()
	s, err := d.NewSession(ctx, deploy.SessionOptions{Cwd: cwd})
	if err != nil {
		t.Fatal(err)
	}
	st := s.Follow()
	res, err := s.Prompt(ctx, "go")
	if err != nil {
		t.Fatal(err)
	}
	if res.End.Kind != session.EndCompleted || res.Text != "done" || res.Steps != 2 {
		t.Fatalf("turn = %+v", res)
	}
	var results []session.ToolResult
	var types []string
	for {
		e, err := st.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, e.Type)
		if e.Type == session.TypeToolResult {
			r, err := session.As[session.ToolResult](e)
			if err != nil {
				t.Fatal(err)
			}
			results = append(results, r)
		}
		if e.Type == session.TypeTurnEnd {
			break
		}
	}
	if types[0] != session.TypeTurnStart || types[1] != session.TypeUserMessage {
		t.Errorf("stream starts %v", types[:2])
	}
	if len(results) != 3 {
		t.Fatalf("results = %+v", results)
	}
	if got := results[0].Content.Text(); got != "native hi in "+s.Cwd() || results[0].IsError {
		t.Errorf("native result = %q (error %v)", got, results[0].IsError)
	}
	if got := results[1].Content.Text(); got != "1" || results[1].IsError {
		t.Errorf("wasm result = %q (error %v)", got, results[1].IsError)
	}
	if got := results[2].Content.Text(); !results[2].IsError || !strings.Contains(got, "boom") || !strings.Contains(got, "kaboom") {
		t.Errorf("panicking tool result = %q (error %v)", got, results[2].IsError)
	}
	p := plugin.HostOf(d).Plugin("kit")
	if n := p.Instances(); n != 2 {
		t.Errorf("instances during the session = %d, want the load-time one and the agent's", n)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := p.Instances(); n != 1 {
		t.Errorf("instances after Close = %d, want 1", n)
	}
	if _, err := st.Next(ctx); !errors.Is(err, deploy.ErrEndOfStream) {
		t.Errorf("Next after close = %v", err)
	}
	if _, err := s.Prompt(ctx, "again"); err == nil {
		t.Error("Prompt after Close succeeded")
	}
}

// A session resumed by id continues the same log: the next turn is turn
// 2, and the model sees the first turn.
func TestResumeContinuesTheSession(t *testing.T) {
	provider, err := scripted.Provider([]scripted.Answer{{Text: "one"}}, []scripted.Answer{{Text: "two"}})
	if err != nil {
		t.Fatal(err)
	}
	d := open(t, deploy.Options{Provider: provider, Model: "m"})
	ctx := context.Background()
	cwd := t.TempDir()
	s, err := d.NewSession(ctx, deploy.SessionOptions{Cwd: cwd})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prompt(ctx, "first"); err != nil {
		t.Fatal(err)
	}
	id := s.ID()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := d.NewSession(ctx, deploy.SessionOptions{Resume: id, Cwd: t.TempDir()}); !errors.Is(err, deploy.ErrInvalidOptions) {
		t.Errorf("resume with another cwd = %v", err)
	} else if !strings.HasPrefix(err.Error(), "deploy: invalid options: resume "+id+": ") {
		t.Errorf("resume with another cwd = %q: want the package named once", err)
	}
	r, err := d.NewSession(ctx, deploy.SessionOptions{Resume: id})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	if r.Cwd() != s.Cwd() {
		t.Errorf("resumed cwd %q, want %q", r.Cwd(), s.Cwd())
	}
	res, err := r.Prompt(ctx, "second")
	if err != nil {
		t.Fatal(err)
	}
	if res.Turn != 2 || res.Text != "two" {
		t.Errorf("resumed turn = %+v", res)
	}
	var users []string
	for _, e := range r.History() {
		if e.Type == session.TypeUserMessage {
			u, _ := session.As[session.UserMessage](e)
			users = append(users, u.Content.Text())
		}
	}
	if fmt.Sprint(users) != "[first second]" {
		t.Errorf("history users = %v", users)
	}
}

// A deployment without a provider opens (prompt and tools need no key);
// only a live session fails, with the provider's error.
func TestProviderIsNeededOnlyByLiveSessions(t *testing.T) {
	keyErr := errors.New("no key in $X")
	d := open(t, deploy.Options{NewProvider: func() (model.Provider, error) { return nil, keyErr }})
	ctx := context.Background()
	if _, err := d.SystemPrompt(ctx, deploy.PromptOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.NewSession(ctx, deploy.SessionOptions{}); !errors.Is(err, keyErr) {
		t.Errorf("live session = %v, want the provider's error", err)
	}
	d2 := open(t, deploy.Options{})
	if _, err := d2.NewSession(ctx, deploy.SessionOptions{}); !errors.Is(err, deploy.ErrNoProvider) {
		t.Errorf("no provider = %v", err)
	} else if strings.Count(err.Error(), "deploy: ") != 1 {
		t.Errorf("no provider = %q: want the package named once", err)
	}
}

// SystemPrompt renders exactly what the loop sends, and explains each
// part with its owner, size and references.
func TestSystemPromptExplainsOwners(t *testing.T) {
	var got string
	provider := model.ProviderFunc(func(_ context.Context, req *model.Request, emit func(model.Chunk) error) error {
		got = req.System
		for _, c := range (scripted.Answer{Text: "ok"}).Chunks() {
			if err := emit(c); err != nil {
				return err
			}
		}
		return nil
	})
	d := open(t, deploy.Options{
		Model: "m9", Persona: "You run {{model}} in {{cwd}}.", Provider: provider,
		Sections: []prompt.Section{{Name: "embedder:rules", Order: 50, Text: "Be brief."}},
		Tools:    []deploy.Tool{echoTool()},
		Plugins: []deploy.PluginSpec{testkit(t, "kit", map[string]any{
			"tools":    []string{"counter"},
			"sections": []map[string]any{{"name": "kit:guide", "order": 120, "text": "Use counter."}}})},
	})
	ctx := context.Background()
	cwd := t.TempDir()
	p, err := d.SystemPrompt(ctx, deploy.PromptOptions{Cwd: cwd})
	if err != nil {
		t.Fatal(err)
	}
	want := prompt.Identity + "\n\nYou run m9 in " + cwd + ".\n\nBe brief.\n\nUse counter."
	if p.System != want {
		t.Errorf("system =\n%q\nwant\n%q", p.System, want)
	}
	var owners []string
	for _, s := range p.Sections {
		owners = append(owners, fmt.Sprintf("%s=%s/%d/%v", s.Name, s.Owner, s.Bytes, s.Variables))
	}
	wantOwners := fmt.Sprintf("[harness:identity=harness/%d/[] deployment:persona=deployment/%d/[model cwd] embedder:rules=deployment/9/[] kit:guide=plugin kit/12/[]]",
		len(prompt.Identity), len("You run m9 in "+cwd+"."))
	if fmt.Sprint(owners) != wantOwners {
		t.Errorf("sections = %v\nwant %v", owners, wantOwners)
	}
	if len(p.Tools) != 2 || p.Tools[0].Name != "echo" || p.ToolInfo[0].Owner != "deployment" ||
		p.Tools[1].Name != "counter" || p.ToolInfo[1].Owner != "plugin kit" {
		t.Errorf("tools = %+v %+v", p.Tools, p.ToolInfo)
	}
	if _, err := d.SystemPrompt(ctx, deploy.PromptOptions{}); err == nil || !strings.Contains(err.Error(), "cwd") ||
		!strings.Contains(err.Error(), prompt.PersonaSection) {
		t.Errorf("cwd-less prompt = %v, want an error naming the section and the variable", err)
	}

	s, err := d.NewSession(ctx, deploy.SessionOptions{Cwd: cwd})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	ctx2, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := s.Prompt(ctx2, "hi"); err != nil {
		t.Fatal(err)
	}
	if got != p.System {
		t.Errorf("the loop sent\n%q\nSystemPrompt said\n%q", got, p.System)
	}
}

// The deployment's limits bound an inspected prompt: a section that
// misses the assembly deadline fails it, naming the limit, and so does a
// prompt over the byte quota.
func TestSystemPromptHonoursLimits(t *testing.T) {
	slow := prompt.Section{Name: "embedder:slow", Order: 10, Dynamic: func(ctx context.Context, _ prompt.AssembleContext) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}}
	d := open(t, deploy.Options{Sections: []prompt.Section{slow}, Limits: deploy.Limits{AssemblyTimeout: 50 * time.Millisecond}})
	_, err := d.SystemPrompt(context.Background(), deploy.PromptOptions{})
	if !errors.Is(err, deploy.ErrLimit) || !strings.Contains(err.Error(), "assembly_timeout") || !strings.Contains(err.Error(), "embedder:slow") {
		t.Errorf("slow section = %v", err)
	}
	d = open(t, deploy.Options{Persona: strings.Repeat("x", 200), Limits: deploy.Limits{PromptBytes: 100}})
	if _, err := d.SystemPrompt(context.Background(), deploy.PromptOptions{}); !errors.Is(err, deploy.ErrLimit) || !strings.Contains(err.Error(), "prompt_bytes") {
		t.Errorf("large prompt = %v", err)
	}
	d = open(t, deploy.Options{Persona: "short", Limits: deploy.Limits{PromptBytes: 1000, AssemblyTimeout: time.Minute}})
	if _, err := d.SystemPrompt(context.Background(), deploy.PromptOptions{}); err != nil {
		t.Errorf("prompt within limits = %v", err)
	}
}
