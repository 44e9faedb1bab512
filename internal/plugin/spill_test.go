package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

// TestExecSpill: a stream longer than the output cap is saved whole under
// spill_dir, which must lie in a writable granted root and cannot be led
// out of it by a symlink.
func TestExecSpill(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ro, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	outside, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "escape")); err != nil {
		t.Fatal(err)
	}
	h := newHost(t)
	g := &config.Grants{
		FS:   []config.FSGrant{{Path: config.Workspace, Mode: config.ModeRW}, {Path: ro, Mode: config.ModeRO}},
		Exec: config.ExecGrant{Allowed: true, OutputBytes: 100},
	}
	if _, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Grants: g, Config: cfg(t, map[string]any{"tools": []string{"probe"}})}); err != nil {
		t.Fatal(err)
	}
	run := func(spillDir string) (hostfns.Status, string) {
		req, _ := json.Marshal(hostfns.ExecRequest{Command: "seq 1 1000; echo short >&2", SpillDir: spillDir})
		args, _ := json.Marshal([]map[string]string{{"fn": hostfns.FnExecRun, "req": string(req)}})
		facts := &prompt.AgentFacts{ID: "a", Session: "s", Cwd: ws}
		r, err := h.CallTool(bg, facts, "probe", args)
		if err != nil || r.IsError {
			t.Fatalf("probe: %+v, %v", r, err)
		}
		var out []probeOut
		if err := json.Unmarshal([]byte(r.Text), &out); err != nil {
			t.Fatal(err)
		}
		return hostfns.Status(out[0].Status), out[0].Message
	}
	st, msg := run(filepath.Join(ws, "scratch", "deep"))
	if st != 0 {
		t.Fatalf("exec_run with spill_dir: %v %s", st, msg)
	}
	var res hostfns.ExecResult
	if err := json.Unmarshal([]byte(msg), &res); err != nil {
		t.Fatal(err)
	}
	var full strings.Builder
	for i := 1; i <= 1000; i++ {
		full.WriteString(strconv.Itoa(i) + "\n")
	}
	o := res.Stdout
	if !o.Truncated || o.OmittedAt != 50 || len(o.Data) != 100 || o.SpillPath == "" || !strings.HasPrefix(o.SpillPath, filepath.Join(ws, "scratch", "deep")+"/") {
		t.Fatalf("stdout %+v", o)
	}
	if b, err := os.ReadFile(o.SpillPath); err != nil || string(b) != full.String() {
		t.Fatalf("spilled %d bytes (%v), want %d", len(b), err, full.Len())
	}
	if res.Stderr.SpillPath != "" || res.Stderr.Data != "short\n" {
		t.Fatalf("a short stream spilled: %+v", res.Stderr)
	}
	for _, bad := range []struct{ dir, msg string }{
		{ro, "not inside a writable granted fs root"},
		{outside, "not inside a writable granted fs root"},
		{"scratch", "clean absolute path"},
		{ws + "/a/../b", "clean absolute path"},
		{filepath.Join(ws, "escape", "x"), "spill_dir"},
	} {
		if st, msg := run(bad.dir); st == 0 || !strings.Contains(msg, bad.msg) {
			t.Errorf("spill_dir %q: %v %q; want a refusal containing %q", bad.dir, st, msg, bad.msg)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("spill escaped through a symlink: %v", entries)
	}
}

// TestExecSpillChargesDiskQuota: the file the host saves a command's
// output into counts against the plugin's disk quota (grants.limits.
// disk_bytes), like a file the plugin wrote; past the quota the saved copy
// stops and says so, and the disk holds no more than the quota allows.
func TestExecSpillChargesDiskQuota(t *testing.T) {
	for _, c := range []struct {
		name  string
		quota config.ByteSize
	}{{"room", 1 << 20}, {"over", 2000}} {
		t.Run(c.name, func(t *testing.T) {
			ws, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			h := newHost(t)
			g := &config.Grants{
				FS:     []config.FSGrant{{Path: config.Workspace, Mode: config.ModeRW}},
				Exec:   config.ExecGrant{Allowed: true, OutputBytes: 100},
				Limits: config.Limits{DiskBytes: c.quota},
			}
			p, err := h.Load(bg, Spec{Name: "kit", Source: testkit(t), Grants: g, Config: cfg(t, map[string]any{"tools": []string{"probe"}})})
			if err != nil {
				t.Fatal(err)
			}
			req, _ := json.Marshal(hostfns.ExecRequest{Command: "seq 1 1000", SpillDir: filepath.Join(ws, "scratch")})
			args, _ := json.Marshal([]map[string]string{{"fn": hostfns.FnExecRun, "req": string(req)}})
			r, err := h.CallTool(bg, &prompt.AgentFacts{ID: "a", Session: "s", Cwd: ws}, "probe", args)
			if err != nil || r.IsError {
				t.Fatalf("probe: %+v, %v", r, err)
			}
			var out []probeOut
			if err := json.Unmarshal([]byte(r.Text), &out); err != nil {
				t.Fatal(err)
			}
			var res hostfns.ExecResult
			if err := json.Unmarshal([]byte(out[0].Message), &res); err != nil {
				t.Fatalf("%v: %s", err, out[0].Message)
			}
			used, files := p.diskQuota().Used()
			size := int64(0)
			if res.Stdout.SpillPath != "" {
				fi, err := os.Stat(res.Stdout.SpillPath)
				if err != nil {
					t.Fatal(err)
				}
				size = fi.Size()
			}
			switch c.name {
			case "room":
				if res.Stdout.SpillTruncated || size != 3893 || used != size || files != 1 {
					t.Fatalf("saved %d bytes (truncated %v); quota charged %d bytes, %d files; want 3893, 3893, 1",
						size, res.Stdout.SpillTruncated, used, files)
				}
			case "over":
				if used > int64(c.quota) || size > int64(c.quota) || used != size {
					t.Fatalf("saved %d bytes; quota charged %d of %d", size, used, c.quota)
				}
				if res.Stdout.SpillPath != "" && !res.Stdout.SpillTruncated {
					t.Fatalf("a copy cut by the quota is not marked truncated: %+v", res.Stdout)
				}
			}
		})
	}
}
