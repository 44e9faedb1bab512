package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/replay"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/model/scripted"
)

// tmux drives a terminal session on a private server.
type tmux struct {
	t           *testing.T
	bin, socket string
	session     string
}

func (x *tmux) run(args ...string) string {
	x.t.Helper()
	out, err := exec.Command(x.bin, append([]string{"-L", x.socket}, args...)...).CombinedOutput()
	if err != nil {
		x.t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
	return string(out)
}

func (x *tmux) screen() string {
	return x.run("capture-pane", "-p", "-J", "-t", x.session, "-S", "-300")
}

// waitFor waits until the screen shows every want, and returns it.
func (x *tmux) waitFor(what string, want ...string) string {
	x.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := x.screen()
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(s, w)
		}
		if ok {
			return s
		}
		if time.Now().After(deadline) {
			x.t.Fatalf("%s: the screen never showed %q:\n%s", what, want, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (x *tmux) send(keys ...string) {
	x.run(append([]string{"send-keys", "-t", x.session}, keys...)...)
}

// The interactive UI under a real terminal: a prompt streams its answer
// and shows a tool card with its outcome and the token usage; Ctrl-C in
// the middle of a turn cancels it; the next prompt runs; /exit quits.
func TestInteractiveUIUnderTmux(t *testing.T) {
	tm := needTool(t, "tmux", "the interactive UI's terminal test")
	bin := binary(t)
	rec := writeReplay(t,
		replay.Entry{Kind: replay.KindChunks, Chunks: scripted.Answer{
			Reasoning: "I will run the command.", Text: "Running it now.",
			Calls: []scripted.Call{
				{ID: "c0", Name: "todo_write", Arguments: `{"todos":[{"content":"Check the tool","status":"in_progress"}]}`},
				{ID: "c1", Name: "bash", Arguments: `{"command":"echo TMUX_TOOL_OK","description":"Say ok"}`}},
			Usage: &model.Usage{InputTokens: 1200, OutputTokens: 40}}.Chunks()},
		replay.Entry{Kind: replay.KindChunks, Chunks: scripted.Answer{Text: "First answer: **all good** from the tool.",
			Usage: &model.Usage{InputTokens: 100, CacheReadTokens: 1200, OutputTokens: 12}}.Chunks()},
		replay.Entry{Kind: replay.KindHang},
		replay.Entry{Kind: replay.KindChunks, Chunks: scripted.Answer{Text: "Second answer after the cancel."}.Chunks()},
	)
	cwd := t.TempDir()
	config, err := filepath.Abs(exampleConfig("coding-agent"))
	if err != nil {
		t.Fatal(err)
	}
	x := &tmux{t: t, bin: tm, socket: fmt.Sprintf("dsh-test-%d", os.Getpid()), session: "ui"}
	status := filepath.Join(t.TempDir(), "status")
	data := t.TempDir()
	cmd := fmt.Sprintf("XDG_DATA_HOME=%s %s run --config %s --replay %s --cwd %s 2>/dev/null; echo $? > %s",
		data, bin, config, rec, cwd, status)
	x.run("new-session", "-d", "-s", x.session, "-x", "120", "-y", "50", cmd)
	t.Cleanup(func() { exec.Command(tm, "-L", x.socket, "kill-server").Run() })

	banner := x.waitFor("banner", "model    deepseek-v4-flash", "cwd      "+cwd, "session  ", "the model is a replay of")
	_, rest, _ := strings.Cut(banner, "session  ")
	id := strings.Fields(rest)[0]
	x.send("run the check", "Enter")
	s := x.waitFor("first turn", "⏺ bash", "echo TMUX_TOOL_OK", "⎿", "plan", "▸ Check the tool", "First answer:", "all good", "tokens: 2500 in (1200 cached)")
	if !strings.Contains(s, "I will run the command.") || !strings.Contains(s, "Running it now.") {
		t.Errorf("reasoning or text before the call is missing:\n%s", s)
	}
	if !strings.Contains(s, "TMUX_TOOL_OK") {
		t.Errorf("the tool card shows no output:\n%s", s)
	}

	x.send("start something long", "Enter")
	x.waitFor("streamed text mid-turn", "partial", "Ctrl-C cancels")
	x.send("C-c")
	x.waitFor("cancelled turn", "turn aborted")

	x.send("and now?", "Enter")
	x.waitFor("turn after the cancel", "Second answer after the cancel.")
	x.send("/exit", "Enter")
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(status)
		if err == nil && strings.TrimSpace(string(b)) != "" {
			if strings.TrimSpace(string(b)) != "0" {
				t.Errorf("exit status %s after /exit", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still running after /exit:\n%s", x.screen())
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Resumed, the UI shows the conversation so far; Ctrl-C when idle quits.
	// (A server of its own: the first one exits with its last session.)
	x.session, x.socket = "resumed", x.socket+"-resumed"
	t.Cleanup(func() { exec.Command(tm, "-L", x.socket, "kill-server").Run() })
	cmd = fmt.Sprintf("XDG_DATA_HOME=%s %s run --config %s --replay %s --resume %s 2>/dev/null; echo $? > %s.2",
		data, bin, config, rec, id, status)
	x.run("new-session", "-d", "-s", x.session, "-x", "120", "-y", "50", cmd)
	x.waitFor("resumed banner", "session  "+id, "resumed; the conversation so far:", "› run the check", "(2 tool calls)", "Second answer after the cancel.")
	x.send("C-c")
	deadline = time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(status + ".2"); err == nil && strings.TrimSpace(string(b)) != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Ctrl-C when idle did not quit:\n%s", x.screen())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
