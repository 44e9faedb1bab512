package sandbox

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/internal/plugintest"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

func init() { seamGroups = append(seamGroups, hoststateAttacks) }

// hostWorld is the host's own state inside the agent's workspace, as when
// an agent runs in $HOME: a compile cache and a session store under
// ws/.cache and ws/.local, on a host that knows them as its state.
type hostWorld struct {
	cache    string // the compile cache's directory
	sessions string // the session store's directory
	cwdDir   string // one cwd's directory of sessions in it
	session  string // an earlier session's file, holding the canary
}

// Paths of the host's state relative to the workspace.
const (
	relCache    = ".cache/dsh-wasm/wazero"
	relSessions = ".local/share/dsh-wasm/sessions"
)

// hostState replaces the env's host by one whose state lies in the
// workspace. With realCache the compile cache is a fresh one there (the
// attacker compiles into it); otherwise the shared cache compiles, and
// the workspace's cache directory is host state all the same. tenants,
// when set, is HostState.Tenants.
func hostState(e *env, realCache bool, tenants string) *hostWorld {
	e.t.Helper()
	w := &hostWorld{cache: filepath.Join(e.ws, relCache), sessions: filepath.Join(e.ws, relSessions)}
	w.cwdDir = filepath.Join(w.sessions, "cwd-0123456789ab")
	w.session = filepath.Join(w.cwdDir, "s1.jsonl")
	must(e.t, os.MkdirAll(w.cwdDir, 0o700))
	must(e.t, os.WriteFile(w.session, []byte(`{"type":"user/message","text":"`+e.canary+`"}`+"\n"), 0o600))
	state := plugin.HostState{Dirs: []string{w.sessions}, Tenants: tenants}
	cache := plugintest.SharedCache(e.t)
	if realCache {
		c, err := plugin.NewCache(w.cache)
		must(e.t, err)
		e.t.Cleanup(func() { c.Close(context.Background()) })
		cache = c
	} else {
		must(e.t, os.MkdirAll(w.cache, 0o700))
		must(e.t, os.WriteFile(filepath.Join(w.cache, "entry"), []byte(e.canary), 0o600))
		state.Dirs = append(state.Dirs, w.cache)
		e.watched[w.cache] = snapshot(e.t, w.cache)
	}
	e.watched[w.sessions] = snapshot(e.t, w.sessions)
	logger := slog.New(captureHandler{c: e.logs})
	h, err := plugin.New(plugin.Options{Registry: prompt.NewRegistry(logger), Cache: cache, Logger: logger, HostState: state})
	must(e.t, err)
	e.t.Cleanup(func() { h.Close(context.Background()) })
	e.host = h
	return w
}

// wantHidden asserts that every probe of each path failed with ENOENT and
// that no listing of a parent showed it.
func (w *hostWorld) wantHidden(e *env, r report, paths ...string) {
	e.t.Helper()
	for _, p := range paths {
		e.wantErrno(r, "ENOENT", "read "+p, "stat "+p, "list "+p, "append "+p, "plant in "+p)
		s := r.step(e.t, "list the parent of "+p)
		if s.Errno == "OK" && strings.Contains(","+s.Data+",", ","+filepath.Base(p)+",") {
			e.t.Errorf("listing the parent of %s shows it: %q", p, s.Data)
		}
	}
}

// noPlanted fails if a file named "planted" appeared under dir.
func noPlanted(e *env, dir string) {
	e.t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "planted" {
			e.t.Errorf("a file was planted: %s", p)
		}
		return nil
	})
}

func hoststateAttacks() []hostileAttack {
	forged := `{"type":"user/message","text":"forged"}` + "\n"
	// A script that goes after the sessions from a command, directly, by
	// a symlink it makes and by a listing.
	execScript := func() string {
		return fmt.Sprintf(`cat %[1]s/cwd-0123456789ab/s1.jsonl; ls -A %[1]s; ln -s %[1]s cmd-link; cat cmd-link/cwd-0123456789ab/s1.jsonl; `+
			`echo '%[2]s' >> %[1]s/cwd-0123456789ab/s1.jsonl; echo x > %[3]s/planted; echo done`, relSessions, strings.TrimSpace(forged), relCache)
	}
	return []hostileAttack{
		{name: "hoststate-plant-in-the-compile-cache", run: func(e *env) string {
			w := hostState(e, true, "")
			e.attacker(nil)
			targets := []string{w.cache, filepath.Join(w.cache, "instrumented"), filepath.Join(w.cache, "instrumented", "refs")}
			r := e.attack(e.main, attackArgs{Attack: "hoststate-probe", WS: e.ws, Names: targets, Path: "planted"})
			w.wantHidden(e, r, targets...)
			noPlanted(e, w.cache)
			return "refused (the compile cache is not in the workspace's view: ENOENT, absent from listings; nothing planted)"
		}},
		{name: "hoststate-forge-a-session-through-a-symlink", run: func(e *env) string {
			w := hostState(e, false, "")
			e.attacker(nil)
			r := e.attack(e.main, attackArgs{Attack: "hoststate-probe", WS: e.ws, Path: forged,
				Rel: filepath.Join(relSessions, "cwd-0123456789ab"), ID: "s1.jsonl"})
			e.wantErrno(r, "OK", "symlink hs-link")
			e.wantErrno(r, "ENOENT", "read through hs-link", "list through hs-link", "append through hs-link")
			_ = w
			return "refused (a symlink the plugin makes to the sessions resolves to nothing: ENOENT)"
		}},
		{name: "hoststate-discover-by-listing", run: func(e *env) string {
			w := hostState(e, false, "")
			e.attacker(nil)
			targets := []string{w.sessions, w.cwdDir, w.session, w.cache, filepath.Join(w.cache, "entry")}
			r := e.attack(e.main, attackArgs{Attack: "hoststate-probe", WS: e.ws, Names: targets, Path: forged})
			// The hidden directories' own parents list without them.
			for _, p := range []string{w.sessions, w.cache} {
				if s := r.step(e.t, "list the parent of "+p); s.Errno != "OK" {
					e.t.Errorf("listing the parent of %s: %s, want a listing without it", p, s.Errno)
				}
			}
			w.wantHidden(e, r, targets...)
			return "refused (host state is left out of listings; every name in it is ENOENT)"
		}},
		{name: "hoststate-move-what-holds-it", run: func(e *env) string {
			hostState(e, false, "")
			e.attacker(nil)
			for _, dir := range []string{".local/share/dsh-wasm", ".local", ".cache"} {
				r := e.attack(e.main, attackArgs{Attack: "hoststate-probe", WS: e.ws, Outside: filepath.Join(e.ws, dir)})
				e.wantErrno(r, "EACCES", "rename "+filepath.Join(e.ws, dir))
				if _, err := os.Stat(filepath.Join(e.ws, dir)); err != nil {
					e.t.Errorf("%s moved: %v", dir, err)
				}
			}
			return "refused (EACCES: a directory holding host state stays where the host looks for it)"
		}},
		{name: "hoststate-grant-inside", run: func(e *env) string {
			w := hostState(e, false, "")
			for _, inside := range []string{w.cwdDir, w.cache} {
				_, err := e.load("inside", "attacker", map[string]any{"self": "inside"},
					fmt.Sprintf("fs: [{path: %q, mode: ro}]", inside), defaultLimits)
				e.wantErr("a grant inside host state", err, plugin.ErrHostState, inside)
				if err != nil && !strings.Contains(err.Error(), filepath.Dir(inside)) {
					e.t.Errorf("the error does not name the host state holding %s: %v", inside, err)
				}
			}
			return "refused at load (ErrHostState naming the grant and the host state)"
		}},
		{name: "hoststate-other-tenants-root", run: func(e *env) string {
			// The env's base holds each tenant's root: ws is the agent's,
			// ro and outside are other tenants'.
			hostState(e, false, e.base)
			_, err := e.load("other", "attacker", map[string]any{"self": "other"},
				fmt.Sprintf("fs: [{path: workspace, mode: rw}, {path: %q, mode: ro}]", e.ro), defaultLimits)
			e.wantErr("a grant of another tenant's root", err, plugin.ErrHostState, e.ro)
			e.mustLoad("attacker", "attacker", map[string]any{"self": "attacker"},
				fmt.Sprintf("fs: [{path: workspace, mode: rw}, {path: %q, mode: ro}]", e.base), defaultLimits)
			targets := []string{e.outside, e.ro}
			r := e.attack(e.main, attackArgs{Attack: "hoststate-probe", WS: e.ws, Names: targets, Path: forged})
			e.wantErrno(r, "ENOENT", "read "+e.outside, "list "+e.outside, "read "+e.ro, "list "+e.ro)
			// The workspace's parent lists the agent's own tenant only.
			if s := r.step(e.t, "list the parent of "+e.outside); s.Errno != "OK" || s.Data != filepath.Base(e.ws) {
				e.t.Errorf("listing the tenants: %s %q, want only %q", s.Errno, s.Data, filepath.Base(e.ws))
			}
			return "refused (another tenant's root is host state: not granted, and not seen through a wider grant)"
		}},
		{name: "hoststate-exec-bwrap-cat-session", bwrap: true, run: func(e *env) string {
			w := hostState(e, false, "")
			e.attacker(nil, sandboxGrant)
			res := e.sandboxed(execScript(), 0)
			if res.Stdout.Data == "" || !strings.HasSuffix(res.Stdout.Data, "done\n") || strings.Contains(res.Stdout.Data, "s1.jsonl") ||
				strings.Contains(res.Stdout.Data, "cwd-0123456789ab") {
				e.t.Errorf("the sandboxed command: stdout %q, stderr %q", res.Stdout.Data, res.Stderr.Data)
			}
			noPlanted(e, w.cache)
			return "refused (bwrap covers host state in the workspace with an empty read-only tmpfs)"
		}},
		{name: "hoststate-exec-move-then-read", bwrap: true, run: func(e *env) string {
			w := hostState(e, false, "")
			e.attacker(nil, sandboxGrant)
			// One command moves what holds the sessions away from under
			// its cover; the next would find them uncovered.
			first := e.sandboxed("mv .local .local-moved; mv .local/share .local/elsewhere; mv .cache .cache-moved; echo done", 0)
			if !strings.HasSuffix(first.Stdout.Data, "done\n") || strings.Count(first.Stderr.Data, "Device or resource busy") < 3 {
				e.t.Errorf("moving the directories holding host state: stdout %q, stderr %q", first.Stdout.Data, first.Stderr.Data)
			}
			second := e.sandboxed("cat .local-moved/share/dsh-wasm/sessions/cwd-0123456789ab/s1.jsonl .local/elsewhere/dsh-wasm/sessions/cwd-0123456789ab/s1.jsonl; echo done", 0)
			if strings.Contains(second.Stdout.Data, "user/message") {
				e.t.Errorf("the second command read the session: %q", second.Stdout.Data)
			}
			for _, d := range []string{w.sessions, w.cache} {
				if _, err := os.Stat(d); err != nil {
					e.t.Errorf("host state moved: %v", err)
				}
			}
			return "refused (EBUSY: the directories leading to host state are bound onto themselves in the sandbox)"
		}},
		{name: "hoststate-exec-pidns-cat-session", run: func(e *env) string {
			if plugin.ExecEnforced().Mode != "pid-namespace" {
				e.t.Skip("commands run outside a PID namespace here: unconfined by design (docs/SECURITY.md), nothing to hide host state with")
			}
			w := hostState(e, false, "")
			e.attacker(nil, execGrant)
			var res hostfns.ExecResult
			e.execOK(e.main, "exec", attackArgs{Exec: &hostfns.ExecRequest{Command: execScript()}}, &res)
			if !strings.HasSuffix(res.Stdout.Data, "done\n") || strings.Contains(res.Stdout.Data, "s1.jsonl") ||
				strings.Contains(res.Stdout.Data, "cwd-0123456789ab") {
				e.t.Errorf("the command: stdout %q, stderr %q", res.Stdout.Data, res.Stderr.Data)
			}
			// Its working directory cannot be the host state either.
			r := e.attack(e.main, attackArgs{Attack: "exec", Exec: &hostfns.ExecRequest{Command: "true", Cwd: w.cwdDir}})
			e.wantStatus(r, "exec_run", hostfns.ErrDenied, "which commands may not see")
			noPlanted(e, w.cache)
			return "refused (the launch helper covers host state in the command's own mount namespace)"
		}},
	}
}
