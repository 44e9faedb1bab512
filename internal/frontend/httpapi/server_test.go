package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

const (
	alphaTok = "alpha-0123456789abcdef"
	betaTok  = "beta-0123456789abcdef"
)

func newServer(t *testing.T, turns ...[]scripted.Answer) (*httptest.Server, string) {
	t.Helper()
	return newServerFor(t, map[string]string{alphaTok: "alpha", betaTok: "beta"}, turns...)
}

// newServerFor is newServer with the given token-to-tenant map.
func newServerFor(t *testing.T, tokens map[string]string, turns ...[]scripted.Answer) (*httptest.Server, string) {
	t.Helper()
	p, err := scripted.Provider(turns...)
	if err != nil {
		t.Fatal(err)
	}
	d, err := deploy.New(context.Background(), deploy.Options{Model: "m", Provider: p, SessionsDir: t.TempDir(), Builtins: os.DirFS(t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	ws := t.TempDir()
	s, err := New(Config{Deployment: d, Workspaces: ws, Tokens: tokens, MaxTurns: 4, MaxTenantTurns: 2})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return hs, ws
}

func do(t *testing.T, method, url, tok, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestConfigRefusals(t *testing.T) {
	d := &deploy.Deployment{}
	for _, c := range []struct {
		name   string
		tokens map[string]string
	}{
		{"short token", map[string]string{"short": "alpha"}},
		{"tenant with a slash", map[string]string{alphaTok: "../beta"}},
		{"upper-case tenant", map[string]string{alphaTok: "Alpha"}},
		{"no tokens", nil},
	} {
		_, err := New(Config{Deployment: d, Workspaces: "/w", Tokens: c.tokens, MaxTurns: 1, MaxTenantTurns: 1})
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", c.name, err)
		}
	}
	if _, err := New(Config{Deployment: d, Workspaces: "rel", Tokens: map[string]string{alphaTok: "a"}, MaxTurns: 1, MaxTenantTurns: 1}); !errors.Is(err, ErrConfig) {
		t.Errorf("relative workspaces: %v", err)
	}
}

// A cwd cannot leave the tenant's root: not by an absolute path, .., or
// a symbolic link inside the root.
func TestCwdStaysInsideTheRoot(t *testing.T) {
	hs, ws := newServer(t)
	if err := os.MkdirAll(filepath.Join(ws, "alpha"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, "beta", "secret"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(ws, "beta"), filepath.Join(ws, "alpha", "link")); err != nil {
		t.Fatal(err)
	}
	for _, cwd := range []string{"/tmp", "../beta", "a/../../beta", "link", "link/secret", "link/secret/made"} {
		body, _ := json.Marshal(map[string]string{"cwd": cwd})
		if code, out := do(t, "POST", hs.URL+"/v1/sessions", alphaTok, string(body)); code != http.StatusBadRequest {
			t.Errorf("cwd %q: %d %s, want 400", cwd, code, out)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "beta", "secret", "made")); err == nil {
		t.Errorf("a refused cwd created a directory in another tenant's root")
	}
	if code, out := do(t, "POST", hs.URL+"/v1/sessions", alphaTok, `{"cwd":"ok/deeper"}`); code != http.StatusCreated {
		t.Errorf("cwd inside the root: %d %s", code, out)
	}
	if code, _ := do(t, "POST", hs.URL+"/v1/sessions", "nope-nope-nope-nope", `{}`); code != http.StatusUnauthorized {
		t.Errorf("unknown token: %d, want 401", code)
	}
}

// A prompt streams the header and then exactly the events the session
// records, each as `run --json` prints it; another tenant's request for
// the session gets the answer an unknown id gets.
func TestPromptStreamsTheSessionsEvents(t *testing.T) {
	hs, _ := newServer(t, []scripted.Answer{{Reasoning: "hm", Text: "hello there"}})
	code, body := do(t, "POST", hs.URL+"/v1/sessions", alphaTok, `{"cwd":"p"}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	var h session.Header
	json.Unmarshal(body, &h)

	req, _ := http.NewRequest("POST", hs.URL+"/v1/sessions/"+h.ID+"/prompt", strings.NewReader(`{"text":"hi"}`))
	req.Header.Set("Authorization", "Bearer "+alphaTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var streamed [][]byte
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
			streamed = append(streamed, bytes.Clone(line))
		}
	}
	resp.Body.Close()

	code, file := do(t, "GET", hs.URL+"/v1/sessions/"+h.ID, alphaTok, "")
	if code != 200 {
		t.Fatalf("history: %d", code)
	}
	lines := bytes.Split(bytes.TrimSuffix(file, []byte("\n")), []byte("\n"))
	if len(streamed) != len(lines) || len(lines) < 4 {
		t.Fatalf("streamed %d lines, the session holds %d", len(streamed), len(lines))
	}
	for i := range lines {
		var a, b any
		json.Unmarshal(streamed[i], &a)
		json.Unmarshal(lines[i], &b)
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if !bytes.Equal(ja, jb) {
			t.Errorf("line %d streamed\n%s\nstored\n%s", i, streamed[i], lines[i])
		}
	}
	if !bytes.Contains(file, []byte("hello there")) {
		t.Errorf("the answer is not in the session")
	}

	_, unknown := do(t, "GET", hs.URL+"/v1/sessions/no-such-id", betaTok, "")
	for _, c := range []struct{ method, path, body string }{
		{"GET", "", ""}, {"POST", "/prompt", `{"text":"x"}`}, {"POST", "/cancel", ""},
	} {
		code, out := do(t, c.method, hs.URL+"/v1/sessions/"+h.ID+c.path, betaTok, c.body)
		if code != http.StatusNotFound || !bytes.Equal(out, unknown) {
			t.Errorf("beta %s %s: %d %s, want the 404 of an unknown id (%s)", c.method, c.path, code, out, unknown)
		}
	}
	if code, out := do(t, "GET", hs.URL+"/v1/sessions", betaTok, ""); code != 200 || strings.TrimSpace(string(out)) != "[]" {
		t.Errorf("beta's list: %d %s", code, out)
	}
}

// Tenants whose names are prefixes of each other (acme and acme2, whose
// roots are WS/acme and WS/acme2) are as isolated as any two: neither
// reads, prompts, cancels or lists the other's sessions, whether a
// session sits at the tenant's root or below it.
func TestTenantsWhoseNamesArePrefixes(t *testing.T) {
	const acmeTok, acme2Tok = "acme-0123456789abcdef", "acme2-0123456789abcdef"
	hs, _ := newServerFor(t, map[string]string{acmeTok: "acme", acme2Tok: "acme2"})
	create := func(tok, cwd string) string {
		t.Helper()
		body, _ := json.Marshal(map[string]string{"cwd": cwd})
		code, out := do(t, "POST", hs.URL+"/v1/sessions", tok, string(body))
		if code != http.StatusCreated {
			t.Fatalf("create in %q: %d %s", cwd, code, out)
		}
		var h session.Header
		if err := json.Unmarshal(out, &h); err != nil || h.ID == "" {
			t.Fatalf("create: %s: %v", out, err)
		}
		return h.ID
	}
	_, unknown := do(t, "GET", hs.URL+"/v1/sessions/no-such-id", acmeTok, "")
	for _, c := range []struct{ owner, other, cwd string }{
		{acme2Tok, acmeTok, ""}, {acme2Tok, acmeTok, "deep/er"}, {acmeTok, acme2Tok, ""},
	} {
		id := create(c.owner, c.cwd)
		if code, _ := do(t, "GET", hs.URL+"/v1/sessions/"+id, c.owner, ""); code != http.StatusOK {
			t.Fatalf("the owner reads its session: %d", code)
		}
		for _, r := range []struct{ method, path, body string }{
			{"GET", "", ""}, {"POST", "/prompt", `{"text":"x"}`}, {"POST", "/cancel", ""},
		} {
			code, out := do(t, r.method, hs.URL+"/v1/sessions/"+id+r.path, c.other, r.body)
			if code != http.StatusNotFound || !bytes.Equal(out, unknown) {
				t.Errorf("%s %s of another tenant's session (cwd %q): %d %s, want the 404 of an unknown id", r.method, r.path, c.cwd, code, out)
			}
		}
	}
	for _, c := range []struct {
		tok  string
		want int
	}{{acmeTok, 1}, {acme2Tok, 2}} {
		code, out := do(t, "GET", hs.URL+"/v1/sessions", c.tok, "")
		var hs []session.Header
		if code != 200 || json.Unmarshal(out, &hs) != nil || len(hs) != c.want {
			t.Errorf("list: %d %s; want %d sessions, the tenant's own", code, out, c.want)
		}
	}
}
