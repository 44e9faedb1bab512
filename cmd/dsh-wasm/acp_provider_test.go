package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/deploytest"
	"github.com/dsh-wasm/dsh-wasm/internal/subagent"
	"github.com/dsh-wasm/dsh-wasm/internal/testcorpus"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// acpChildDeployment is a deployment with an ACP provider whose children
// are `dsh-wasm acp --replay recording`.
func acpChildDeployment(t *testing.T, recording string) *deploy.Deployment {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "child.yml")
	if err := os.WriteFile(cfg, []byte("model: replayed\npersona: You are a child agent.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := deploy.New(context.Background(), deploy.Options{Model: "m", SessionsDir: t.TempDir(), Cache: deploytest.Cache(t),
		ACPProviders: []deploy.ACPProviderOptions{{
			Name:    "acp",
			Command: []string{binary(t), "acp", "--config", cfg, "--replay", recording},
			Env:     []string{"XDG_DATA_HOME=" + t.TempDir()},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	return d
}

// The ACP provider runs our own ACP agent as a child: it answers with the
// recorded child's message, completes, and leaves a child session naming
// its parent in the parent deployment's store.
func TestACPProviderRunsOurOwnAgent(t *testing.T) {
	rec := filepath.Join(testcorpus.Sessions(t), "subagent-spawn", "session.1.jsonl")
	d := acpChildDeployment(t, rec)
	cwd := t.TempDir()
	parent := prompt.AgentFacts{ID: "agent-1", Session: "parent-session", Cwd: cwd}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := subagent.Of(d).Run(ctx, "acp", subagent.Request{Parent: parent, Description: "child", Prompt: "Reply with exactly the word CHILD_OK and nothing else."})
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != subagent.StopCompleted || res.Text != "CHILD_OK" {
		t.Fatalf("child result %+v, want completed with CHILD_OK", res)
	}
	s, err := d.Store().Open(res.ChildSession)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if h := s.Header(); h.ParentSession != "parent-session" || h.Cwd != cwd {
		t.Fatalf("child session header %+v", h)
	}
	evs := s.Events()
	if last := evs[len(evs)-1]; last.Type != session.TypeTurnEnd {
		t.Fatalf("the child's record ends with %s", last.Type)
	}
}

// Cancelling the parent reaches the ACP child: a child whose model hangs
// ends aborted instead of holding the parent.
func TestACPProviderCancel(t *testing.T) {
	rec := filepath.Join(testcorpus.Sessions(t), "cancel", "session.jsonl")
	d := acpChildDeployment(t, rec)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan subagent.Result, 1)
	go func() {
		res, err := subagent.Of(d).Run(ctx, "acp", subagent.Request{Parent: prompt.AgentFacts{Session: "p", Cwd: t.TempDir()}, Prompt: "count slowly"})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	time.Sleep(3 * time.Second)
	cancel()
	select {
	case res := <-done:
		if res.StopReason != subagent.StopAborted {
			t.Fatalf("stop reason %q, want aborted", res.StopReason)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the ACP child did not end after the parent's cancellation")
	}
}
