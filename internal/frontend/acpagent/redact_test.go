package acpagent_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/dsh-wasm/dsh-wasm/internal/deploytest"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/deepseek"
	"github.com/dsh-wasm/dsh-wasm/runtime/redact"
)

// A turn that fails on a 401 quoting the key answers the editor with a
// JSON-RPC error that shows the marker, not the key: the bridge's errors
// come from the deployment, which redacts them.
func TestPromptErrorDoesNotShowTheKey(t *testing.T) {
	const key = "sk-acp-0f1e2d3c4b5a69788796"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"bad Authorization: %s"}}`, r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	provider, err := deepseek.New(deepseek.Options{BaseURL: srv.URL, MaxRetries: -1,
		LookupEnv: func(string) (string, bool) { return key, true }})
	if err != nil {
		t.Fatal(err)
	}
	d, err := deploy.New(context.Background(), deploy.Options{Model: "m", Provider: provider,
		SessionsDir: t.TempDir(), Cache: deploytest.Cache(t), Redactor: redact.New(key)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	ctx := context.Background()
	conn, _ := connect(t, d)
	if _, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	ns, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Prompt(ctx, acp.PromptRequest{SessionId: ns.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("hi")}})
	if rpcCode(err) != -32603 {
		t.Fatalf("prompt = %v, want an internal error", err)
	}
	var re *acp.RequestError
	if !asRequestError(err, &re) {
		t.Fatalf("prompt error %T", err)
	}
	text := fmt.Sprintf("%s %v", re.Message, re.Data)
	if strings.Contains(text, key) || !strings.Contains(text, redact.Marker) {
		t.Errorf("the editor was told %q", text)
	}
	// The reference's wording: the provider's own message after "turn
	// failed: ", not the wrapped chain ("model call failed: deepseek:
	// model API error 401: ...").
	if want := "Internal error: turn failed: bad Authorization: Bearer " + redact.Marker; re.Message != want {
		t.Errorf("the editor was told %q, want %q", re.Message, want)
	}
}

func asRequestError(err error, re **acp.RequestError) bool { return errors.As(err, re) }
