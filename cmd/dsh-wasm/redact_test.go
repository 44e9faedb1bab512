package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/redact"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

const leakyKey = "sk-cli-9a8b7c6d5e4f3a2b1c0d"

// authEcho is a model API, or a proxy before it, that answers every
// request 401 with a body quoting its Authorization header, in pieces.
func authEcho() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		body := `{"error":{"message":"rejected Authorization: ` + r.Header.Get("Authorization") + `","type":"auth"}}`
		for i := 0; i < len(body); i += 5 {
			fmt.Fprint(w, body[i:min(i+5, len(body))])
			w.(http.Flusher).Flush()
		}
	})
}

// `run -p` against a model whose 401 quotes the key: what the command
// prints (the turn's events with --json, its error, its log on standard
// error with -v) shows the marker, never the key.
func TestRunDoesNotPrintTheKey(t *testing.T) {
	srv := httptest.NewServer(authEcho())
	defer srv.Close()
	dir := t.TempDir()
	t.Setenv("XDG_DATA_HOME", dir)
	t.Setenv("DSH_TEST_CLI_KEY", leakyKey)
	cfg := filepath.Join(dir, "dsh.yml")
	yml := fmt.Sprintf("model: m\nprovider:\n  base_url: %s\n  api_key_env: DSH_TEST_CLI_KEY\n  max_retries: 0\nplugins: []\n", srv.URL)
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, json := range []bool{false, true} {
		args := []string{"run", "--config", cfg, "--cwd", dir, "-v", "-p", "hello"}
		if json {
			args = append(args, "--json")
		}
		_, out, errOut := runCLI(t, "", args...)
		all := out + errOut
		if !strings.Contains(all, "401") {
			t.Fatalf("--json=%v: the 401 is not shown:\nstdout:\n%s\nstderr:\n%s", json, out, errOut)
		}
		if strings.Contains(all, leakyKey) || strings.Contains(all, leakyKey[:14]) || !strings.Contains(all, redact.Marker) {
			t.Errorf("--json=%v: printed\nstdout:\n%s\nstderr:\n%s", json, out, errOut)
		}
	}
}

// serve: a tenant whose turn fails on a 401 that quotes the key sees the
// marker, never the key, in the turn's SSE stream and in the session it
// exports; nor does the worker's log show it.
func TestServeDoesNotShowTheKey(t *testing.T) {
	ms := httptest.NewServer(authEcho())
	defer ms.Close()
	cfgPath, env := serveSetup(t, ms.URL, false, "")
	env = append(env, "DEEPSEEK_API_KEY="+leakyKey)
	w := startWorker(t, cfgPath, env)
	h := createSession(t, w, tokenAlpha, "proj")
	ts := promptTurn(t, context.Background(), w, tokenAlpha, h.ID, "quick one")
	if ts.code != http.StatusOK {
		t.Fatalf("prompt: %d %s", ts.code, ts.body)
	}
	evs := ts.finish(t)
	if k := endKind(t, evs); k != session.EndError {
		t.Fatalf("turn ended %s, want error", k)
	}
	stream := fmt.Sprint(evs)
	for what, text := range map[string]string{
		"SSE stream":       stream,
		"exported session": string(exported(t, cfgPath, env, h.ID)),
	} {
		// The turn/end records the provider's message and the 401 as
		// its code (AUTH), as the reference records them.
		if !strings.Contains(text, "AUTH") || !strings.Contains(text, "rejected Authorization") {
			t.Fatalf("%s does not show the 401 (AUTH) and its message:\n%s", what, text)
		}
		if strings.Contains(text, leakyKey) || !strings.Contains(text, redact.Marker) {
			t.Errorf("%s:\n%s", what, text)
		}
	}
}

// Once a command has read the deployment, everything it writes to
// standard error, whether through the deployment or not (serve's HTTP
// and store logs, a message printed directly, the final error), is
// redacted, a key split across writes included; before, bytes pass
// through unchanged.
func TestStandardErrorRedactsOnceTheDeploymentIsRead(t *testing.T) {
	t.Setenv("DSH_TEST_CLI_KEY", leakyKey)
	var raw strings.Builder
	sw := &secretWriter{w: &raw}
	s := streams{err: sw, g: &globals{stderr: sw}}
	fmt.Fprint(s.err, "before: plain\n")
	cfg, err := config.DecodeDeployment("dsh.yml", t.TempDir(), []byte("model: m\nprovider:\n  api_key_env: DSH_TEST_CLI_KEY\n"))
	if err != nil {
		t.Fatal(err)
	}
	s.g.redactor(cfg)
	stderrLogger(s, true).Warn("httpapi: turn", "err", "401 Bearer "+leakyKey)
	fmt.Fprint(s.err, "split: "+leakyKey[:9])
	fmt.Fprint(s.err, leakyKey[9:]+" done\nerror: cut "+leakyKey[:16])
	sw.Flush()
	got := raw.String()
	if !strings.HasPrefix(got, "before: plain\n") || strings.Contains(got, leakyKey[:9]) || strings.Count(got, redact.Marker) != 3 {
		t.Errorf("standard error:\n%s", got)
	}
}
