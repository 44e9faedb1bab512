package sandbox

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

func init() { seamGroups = append(seamGroups, cwdAttacks) }

// The seam: an agent's working directory is one fact, the directory its
// session opened (docs/SECURITY.md, "Seams"). Each attack below binds an
// opened cwd to an agent, as deploy does when a session opens, then
// points the cwd's name (or a parent of it) at a decoy holding the
// canary, and uses the workspace through a different part of the host:
// the fs jail made on first use, the exec jail's default and explicit
// working directory, a command manager made before the swap, the saved
// output of a long command. Every one must keep to the opened directory.

// cwdSetup is an agent whose cwd, base/<name>/w, is opened and bound,
// and a decoy directory (watched: it must not change) whose secret.txt
// and w/secret.txt hold the canary.
type cwdSetup struct {
	facts        *prompt.AgentFacts
	parent, cwd  string
	decoy, moved string
}

const cwdMine = "the opened directory's own file"

func (e *env) cwdAgent(name string) cwdSetup {
	e.t.Helper()
	parent := filepath.Join(e.base, name)
	s := cwdSetup{parent: parent, cwd: filepath.Join(parent, "w"), decoy: filepath.Join(e.base, name+"-decoy"), moved: filepath.Join(e.base, name+"-moved")}
	must(e.t, os.MkdirAll(s.cwd, 0o755))
	must(e.t, os.WriteFile(filepath.Join(s.cwd, "mine.txt"), []byte(cwdMine), 0o644))
	must(e.t, os.MkdirAll(filepath.Join(s.decoy, "w"), 0o755))
	must(e.t, os.WriteFile(filepath.Join(s.decoy, "secret.txt"), []byte(e.canary), 0o644))
	must(e.t, os.WriteFile(filepath.Join(s.decoy, "w", "secret.txt"), []byte(e.canary), 0o644))
	e.watched[s.decoy] = snapshot(e.t, s.decoy)
	dir, err := os.OpenRoot(s.cwd)
	must(e.t, err)
	s.facts = &prompt.AgentFacts{ID: "cwd-" + name, Session: "session-cwd-" + name, Model: "m", Cwd: s.cwd}
	unbind, err := e.host.BindWorkdir(s.facts.ID, s.cwd, dir)
	must(e.t, err)
	dir.Close() // the host holds its own handle, as deploy's session does
	e.t.Cleanup(unbind)
	return s
}

// swapCwd moves the cwd away and puts a link to the decoy at its name.
func (s cwdSetup) swapCwd(e *env) {
	e.t.Helper()
	must(e.t, os.Rename(s.cwd, s.moved))
	must(e.t, os.Symlink(s.decoy, s.cwd))
}

// swapParent moves the cwd's parent away and puts a link to the decoy
// at its name: the cwd's name now leads to decoy/w.
func (s cwdSetup) swapParent(e *env) {
	e.t.Helper()
	must(e.t, os.Rename(s.parent, s.moved))
	must(e.t, os.Symlink(s.decoy, s.parent))
}

// wantRead reads name in the cwd through the fs jail: mine.txt must be the
// opened directory's, secret.txt must not be there.
func (e *env) wantOpenedFS(s cwdSetup) {
	e.t.Helper()
	r := e.attack(s.facts, attackArgs{Attack: "fs-read", Path: s.cwd + "/mine.txt"})
	if st := r.step(e.t, "read "+s.cwd+"/mine.txt"); st.Errno != "OK" || st.Data != cwdMine {
		e.t.Errorf("the fs jail does not serve the opened directory: %+v", st)
	}
	r = e.attack(s.facts, attackArgs{Attack: "fs-read", Path: s.cwd + "/secret.txt"})
	e.wantErrno(r, "ENOENT", "read "+s.cwd+"/secret.txt")
}

// wantOpenedExec runs a command in the cwd (by default, or at dir) and
// checks it ran in the opened directory and wrote nothing in the decoy.
func (e *env) wantOpenedExec(s cwdSetup, dir string) {
	e.t.Helper()
	var res hostfns.ExecResult
	e.execOK(s.facts, "exec", attackArgs{Exec: &hostfns.ExecRequest{Command: "cat mine.txt; cat secret.txt 2>/dev/null; echo planted > planted.txt", Cwd: dir}}, &res)
	e.record(res.Stdout.Data)
	if strings.TrimSpace(res.Stdout.Data) != cwdMine {
		e.t.Errorf("command at %q: stdout %q (stderr %q), want only the opened directory's file", dir, res.Stdout.Data, res.Stderr.Data)
	}
}

func cwdAttacks() []hostileAttack {
	return []hostileAttack{
		{name: "seam-cwd-swapped-before-first-use", run: func(e *env) string {
			e.attacker(nil, execGrant)
			s := e.cwdAgent("first-use")
			s.swapCwd(e) // before the agent's instance, jail or command manager exists
			e.wantOpenedFS(s)
			e.wantOpenedExec(s, "")
			e.wantOpenedExec(s, s.cwd)
			return "held (the jail and commands made after the swap use the opened directory)"
		}},
		{name: "seam-cwd-parent-swapped", run: func(e *env) string {
			e.attacker(nil, execGrant)
			s := e.cwdAgent("parent")
			s.swapParent(e)
			e.wantOpenedFS(s)
			e.wantOpenedExec(s, "")
			e.wantOpenedExec(s, s.cwd)
			return "held (a parent of the cwd swapped for a link changes nothing)"
		}},
		{name: "seam-cwd-exec-check-then-use", run: func(e *env) string {
			e.attacker(nil, execGrant)
			s := e.cwdAgent("check-use")
			e.wantOpenedExec(s, "") // the command manager is made and checks its roots now
			s.swapCwd(e)            // and is used after the swap
			e.wantOpenedExec(s, "")
			e.wantOpenedExec(s, s.cwd)
			return "held (a command manager made before the swap starts commands in the opened directory)"
		}},
		{name: "seam-cwd-spill-after-swap", run: func(e *env) string {
			e.attacker(nil, execGrant)
			s := e.cwdAgent("spill")
			s.swapCwd(e)
			var res hostfns.ExecResult
			// Past output_bytes (4096) the host saves the whole stream
			// under spill_dir, inside the workspace.
			e.execOK(s.facts, "exec", attackArgs{Exec: &hostfns.ExecRequest{Command: "head -c 20000 /dev/zero | tr '\\0' x", SpillDir: s.cwd + "/.scratch"}}, &res)
			if !res.Stdout.Truncated {
				e.t.Fatalf("the output was not cut, nothing was saved: %+v", res.Stdout.Total)
			}
			saved, _ := filepath.Glob(filepath.Join(s.moved, ".scratch", "*"))
			if len(saved) == 0 {
				b, _ := json.Marshal(res)
				e.t.Errorf("the saved output is not in the opened directory: %.300s", b)
			}
			return "held (a command's saved output lands in the opened directory)"
		}},
	}
}
