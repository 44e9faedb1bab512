package guests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/internal/agent"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

// TestWorkspaceHookFileWrittenByAToolWaitsForTheNextSession: a project's
// own hook file (a relative config_path, found from the session's cwd)
// belongs to the project, and the session reads it when it opens, before
// any tool runs. A
// tool that rewrites it in the session changes nothing for that session;
// the next session runs the file as it now is.
func TestWorkspaceHookFileWrittenByAToolWaitsForTheNextSession(t *testing.T) {
	seed, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const allow = `{"hooks":{"PreToolUse":[{"matcher":"nothing_matches_this","hooks":[{"type":"command","command":"exit 2"}]}]}}`
	const deny = `{"hooks":{"PreToolUse":[{"matcher":"bash","hooks":[{"type":"command","command":"echo denied by the rewritten file >&2; exit 2"}]}]}}`
	if err := os.WriteFile(filepath.Join(seed, "hooks.json"), []byte(allow), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := `{"config_path":"hooks.json"}`
	r := newHookRig(t, "hooks-claude", cfg, hookGrants("", config.ExecGrant{}), scriptedBash("printf '%s' '"+deny+"' > hooks.json", "echo RAN"), seed, agent.Options{})
	r.prompt(t, "go")
	rs := toolResults(t, r.sess)
	if len(rs) != 2 || rs[0].IsError || rs[1].IsError || !strings.Contains(rs[1].Content.Text(), "RAN") {
		t.Fatalf("the session ran its first file's policy? results %+v", rs)
	}
	if b, _ := os.ReadFile(filepath.Join(r.ws, "hooks.json")); string(b) != deny {
		t.Fatalf("the tool did not rewrite the hook file: %q", b)
	}
	// A second turn of the same session still runs the file it started with.
	r.prompt(t, "again")
	if rs := toolResults(t, r.sess); len(rs) != 2 {
		t.Fatalf("second turn: %+v", rs)
	}
	// The next session, in the same project, runs the file as it now is.
	next := newHookRig(t, "hooks-claude", cfg, hookGrants("", config.ExecGrant{}), scriptedBash("echo RAN"), r.ws, agent.Options{})
	next.prompt(t, "go")
	if rs := toolResults(t, next.sess); len(rs) != 1 || !rs[0].IsError || !strings.Contains(rs[0].Content.Text(), "denied by the rewritten file") {
		t.Fatalf("the next session: %+v", rs)
	}
}
