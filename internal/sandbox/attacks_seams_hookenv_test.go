package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
)

func init() { seamGroups = append(seamGroups, hookEnvAttacks) }

// The seam: the session's working directory and the hook's shell. A
// Claude Code hook gets CLAUDE_PROJECT_DIR, the session's cwd, which the
// client chose (ACP session/new); the exec grant takes no environment
// from a plugin, so the bridge sets the variable in the text the shell
// runs. The cwd is data there, quoted: a directory name that is shell
// code must reach the hook as its name and run nothing.
//
// Each attack opens a session in a workspace subdirectory with a hostile
// name, with a Claude Code hook that saves $CLAUDE_PROJECT_DIR; the
// attack wins if a marker file appears, or the hook sees another name.
func hookEnvAttacks() []hostileAttack {
	attack := func(marker, name string) func(e *env) string {
		return func(e *env) string {
			cwd := filepath.Join(e.ws, name)
			must(e.t, os.MkdirAll(cwd, 0o755))
			save := `printf %s "$CLAUDE_PROJECT_DIR" > seen-dir.txt`
			run := hookRun{e: e, bridge: "hooks-claude", cwd: cwd,
				cfg: fmt.Sprintf(`{"config_path":%q}`, e.writeHooks("abs-"+marker+".json", hookFileBody(save)))}
			if _, err := run.session(`{"command":"true"}`); err != nil {
				e.t.Fatal(err)
			}
			for _, dir := range []string{e.ws, cwd, filepath.Dir(e.ws)} {
				if _, err := os.Stat(filepath.Join(dir, marker)); err == nil {
					e.t.Errorf("the directory's name ran as shell code: %s appeared in %s", marker, dir)
				}
			}
			b, err := os.ReadFile(filepath.Join(cwd, "seen-dir.txt"))
			if err != nil {
				e.t.Fatalf("the hook did not run: %v", err)
			}
			if string(b) != cwd {
				e.t.Errorf("CLAUDE_PROJECT_DIR %q, want the cwd %q", b, cwd)
			}
			e.record(string(b))
			return "held: the cwd reached the hook as CLAUDE_PROJECT_DIR, quoted, and ran nothing"
		}
	}
	return []hostileAttack{
		{name: "seams-hookenv-cwd-quote-break", run: attack("qb1", `x'; touch qb1; echo '`)},
		{name: "seams-hookenv-cwd-command-substitution", run: attack("cs1", "y$(touch cs1)`touch cs1`")},
		{name: "seams-hookenv-cwd-newline", run: attack("nl1", "z\ntouch nl1\n")},
	}
}
