package deploy_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/guests"
	"github.com/dsh-wasm/dsh-wasm/internal/deploytest"
	"github.com/dsh-wasm/dsh-wasm/internal/syncbuf"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
	"github.com/dsh-wasm/dsh-wasm/runtime/redact"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/tool"
)

// echoingModel is a model API, or a proxy before it, that first asks for
// the tool "probe", then answers 401 with a body that quotes the request's
// Authorization header, written in pieces that split the key. It keeps
// the request bodies it got: what the model was shown.
type echoingModel struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (m *echoingModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	m.bodies = append(m.bodies, body)
	n := len(m.bodies)
	m.mu.Unlock()
	if n == 1 {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"probe","arguments":"{}"}}]}}]}`+"\n\n")
		fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`+"\n\ndata: [DONE]\n\n")
		return
	}
	auth := r.Header.Get("Authorization")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	body = []byte(`{"error":{"message":"invalid credentials in header Authorization: ` + auth + `","type":"authentication_error"}}`)
	for i := 0; i < len(body); i += 7 {
		w.Write(body[i:min(i+7, len(body))])
		w.(http.Flusher).Flush()
	}
}

func (m *echoingModel) body(i int) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if i >= len(m.bodies) {
		return nil
	}
	return m.bodies[i]
}

const testKey = "sk-test-5f0c1d2e3a4b5c6d7e8f9a0b"

// A provider whose 401 quotes the Authorization header, a tool whose
// error quotes the key, and a plugin that prints it: none of them puts
// the deployment's key into turn/end, the turn's result, the session's
// events (as followed and as exported), the model's next request (the
// tool's error result) or the log; each shows the marker instead.
func TestSecretsStayOutOfWhatTheDeploymentShows(t *testing.T) {
	t.Setenv("DSH_TEST_REDACT_KEY", testKey)
	model := &echoingModel{}
	srv := httptest.NewServer(model)
	defer srv.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "dsh.yml")
	yml := fmt.Sprintf("model: m\nprovider:\n  base_url: %s\n  api_key_env: DSH_TEST_REDACT_KEY\n  max_retries: 0\nsessions: %s\n", srv.URL, filepath.Join(dir, "sessions"))
	if err := os.WriteFile(file, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	var nonce [4]byte
	rand.Read(nonce[:])
	printer := testkit(t, "printer-"+hex.EncodeToString(nonce[:]), map[string]any{"init_print": "my granted key is " + testKey})
	var logs syncbuf.Buffer
	probe := deploy.Tool{
		Tool: prompt.Tool{Name: "probe", Description: "Probe.", Parameters: []byte(`{"type":"object"}`)},
		Run: func(context.Context, deploy.ToolCall) (tool.Result, error) {
			return tool.Result{}, errors.New("upstream refused Authorization: Bearer " + testKey)
		},
	}
	ctx := context.Background()
	d, err := deploy.Open(ctx, file, deploy.Options{Cache: deploytest.Cache(t), Builtins: guests.All(), EagerCompile: true,
		Logger:  slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Tools:   []deploy.Tool{probe},
		Plugins: []deploy.PluginSpec{printer}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(ctx)
	s, err := d.NewSession(ctx, deploy.SessionOptions{Cwd: dir})
	if err != nil {
		t.Fatal(err)
	}
	stream := s.Follow()
	res, err := s.Prompt(ctx, "hello")
	if te := (*deploy.TurnError)(nil); !errors.As(err, &te) {
		t.Fatalf("a failed turn returned %v, want a *deploy.TurnError", err)
	}
	if res.End.Kind != session.EndError || res.End.Code != "AUTH" || !strings.Contains(fmt.Sprint(res.Err), "401") {
		t.Fatalf("turn ended %+v (%v), want an AUTH error with the 401", res.End, res.Err)
	}
	var followed bytes.Buffer
	for e, ok := stream.TryNext(); ok; e, ok = stream.TryNext() {
		b, _ := e.MarshalJSON()
		followed.Write(append(b, '\n'))
	}
	var exported bytes.Buffer
	if err := d.Store().Export(s.ID(), &exported); err != nil {
		t.Fatal(err)
	}
	shown := map[string]string{
		"turn/end message":        res.End.Message,
		"turn result error":       fmt.Sprint(res.Err),
		"followed events":         followed.String(),
		"exported session":        exported.String(),
		"the model's 2nd request": string(model.body(1)),
		"log":                     logs.String(),
	}
	for what, text := range shown {
		if strings.Contains(text, testKey) || strings.Contains(text, testKey[:16]) {
			t.Errorf("%s holds the key:\n%s", what, text)
		}
		if !strings.Contains(text, redact.Marker) {
			t.Errorf("%s shows no %s:\n%s", what, redact.Marker, text)
		}
	}
}

// failingStore fails as a database driver might, quoting its DSN.
type failingStore struct {
	session.Storage
	dsn string
}

func (s failingStore) Create(session.Header, ...session.Event) (*session.Session, error) {
	return nil, fmt.Errorf("connect to %s: connection refused", s.dsn)
}

// A store whose error quotes its DSN, password and all, does not show the
// password through the deployment's errors or its logger, whether the
// DSN is a URL or keyword/value pairs.
func TestStoreErrorDoesNotShowTheDSNPassword(t *testing.T) {
	const pw = "hunter2-but-longer"
	for _, dsn := range []string{
		"postgres://dsh:" + pw + "@db.internal:5432/dsh?sslmode=require",
		"host=db.internal user=dsh password='" + pw + "' dbname=dsh",
	} {
		t.Setenv("DSH_TEST_REDACT_DSN", dsn)
		dir := t.TempDir()
		file := filepath.Join(dir, "dsh.yml")
		yml := fmt.Sprintf("model: m\nstore:\n  dsn_env: DSH_TEST_REDACT_DSN\nsessions: %s\n", dir)
		if err := os.WriteFile(file, []byte(yml), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		provider, err := scripted.Provider(nil)
		if err != nil {
			t.Fatal(err)
		}
		var logs syncbuf.Buffer
		d, err := deploy.Open(ctx, file, deploy.Options{Cache: deploytest.Cache(t), Builtins: guests.All(), Provider: provider,
			Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			Store:  failingStore{dsn: dsn}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.NewSession(ctx, deploy.SessionOptions{Cwd: dir})
		d.Logger().Warn("store failed", "err", err)
		d.Close(ctx)
		if err == nil || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("NewSession = %v, want the store's failure", err)
		}
		for what, text := range map[string]string{"error": err.Error(), "log": logs.String()} {
			if strings.Contains(text, pw) || !strings.Contains(text, redact.Marker) {
				t.Errorf("DSN %q: the %s shows %q", dsn, what, text)
			}
		}
	}
}

// A tool called outside any session (an MCP client's call through
// Agent.CallTool) is redacted too: its result and its error go straight
// to the caller.
func TestAgentCallToolIsRedacted(t *testing.T) {
	quote := func(fail bool) deploy.Tool {
		name := map[bool]string{false: "says", true: "fails"}[fail]
		return deploy.Tool{Tool: prompt.Tool{Name: name, Description: name, Parameters: []byte(`{"type":"object"}`)},
			Run: func(context.Context, deploy.ToolCall) (tool.Result, error) {
				if fail {
					return tool.Result{}, errors.New("401 for " + testKey)
				}
				return tool.Result{Text: "the key is " + testKey}, nil
			}}
	}
	d := open(t, deploy.Options{Tools: []deploy.Tool{quote(false), quote(true)}, Redactor: redact.New(testKey)})
	a, err := d.NewAgent(deploy.AgentOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	res, err := a.CallTool(context.Background(), "says", []byte(`{}`))
	if err != nil || strings.Contains(res.Text, testKey) || !strings.Contains(res.Text, redact.Marker) {
		t.Errorf("says = %+v, %v", res, err)
	}
	res, err = a.CallTool(context.Background(), "fails", []byte(`{}`))
	text := fmt.Sprint(res.Text, err)
	if strings.Contains(text, testKey) || !strings.Contains(text, redact.Marker) {
		t.Errorf("fails = %q", text)
	}
}
