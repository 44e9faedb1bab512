package deploy_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/guests"
	"github.com/dsh-wasm/dsh-wasm/internal/deploytest"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// TestCodingAgentWebSearch: the coding agent as shipped, its web plugin's
// search endpoint pointed at a local fake of DeepSeek's search, runs a
// turn in which the model calls web_search and reads the sources. The
// key the example grants is the one the fake checks.
func TestCodingAgentWebSearch(t *testing.T) {
	const key = "sk-test-web-search"
	t.Setenv("DEEPSEEK_API_KEY", key)
	var sawKey, sawQuery string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &body)
		if r.URL.Path == "/anthropic/v1/messages" && len(body.Messages) == 1 {
			sawKey, sawQuery = r.Header.Get("X-Api-Key"), body.Messages[0].Content
		}
		io.WriteString(w, `{"content":[{"type":"web_search_tool_result","content":[
			{"type":"web_search_result","url":"https://go.dev/blog/go1.24","title":"Go 1.24 is released","page_age":"2025-02-11"}]},
			{"type":"text","text":"Go 1.24 is the latest release."}]}`)
	}))
	defer srv.Close()

	cfg, err := config.LoadDeployment("../../examples/coding-agent/dsh.yml")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for i := range cfg.Plugins {
		e := &cfg.Plugins[i].Entry
		if e.Source != "builtin:tool-web" {
			continue
		}
		found = true
		search, _ := e.Config["search"].(map[string]any)
		if search == nil || search["provider"] != "deepseek" {
			t.Fatalf("the example's tool-web config is %v: want search.provider deepseek", e.Config)
		}
		// Only where the provider is: the fake, under the example's own
		// path, reachable as an IP literal.
		search["base_url"] = srv.URL + "/anthropic/v1"
		u, _ := url.Parse(srv.URL)
		e.Grants.Net.AllowedHosts = append(e.Grants.Net.AllowedHosts, u.Host)
	}
	if !found {
		t.Fatal("the coding agent loads no builtin:tool-web")
	}
	var result string
	prov := &scripted.Tools{
		Calls: []scripted.Call{{Name: "web_search", Arguments: `{"query":"latest Go release"}`}},
		Answer: func(req *model.Request) string {
			result, _, _ = scripted.LastResult(req)
			return "Go 1.24, per [the release post](https://go.dev/blog/go1.24)."
		},
	}
	ctx := context.Background()
	d, err := deploy.OpenConfig(ctx, cfg, deploy.Options{Provider: prov, SessionsDir: t.TempDir(),
		Cache: deploytest.Cache(t), Builtins: guests.All()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(ctx)
	s, err := d.NewSession(ctx, deploy.SessionOptions{Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	res, err := s.Prompt(ctx, "What is the latest Go release?")
	if err != nil {
		t.Fatal(err)
	}
	if res.End.Kind != session.EndCompleted {
		t.Fatalf("turn ended %+v", res.End)
	}
	want := "Go 1.24 is the latest release.\n\nSources:\n- [Go 1.24 is released](https://go.dev/blog/go1.24) — (2025-02-11)\n\n" +
		"Cite the relevant URLs above as markdown links in your answer."
	if result != want {
		t.Errorf("the model saw:\n%s\nwant:\n%s", result, want)
	}
	if sawKey != key || sawQuery != "latest Go release" {
		t.Errorf("the provider got key %q and query %q", sawKey, sawQuery)
	}
	if !strings.Contains(res.Text, "go.dev/blog/go1.24") {
		t.Errorf("answer %q", res.Text)
	}
}
