package config

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/netguard"
)

// Validate checks an Entry built in code (Decode already validates what it
// decodes). Unset limits count as their defaults. Errors are *Error values
// naming the field, joined with errors.Join.
func (e Entry) Validate() error {
	var errs []error
	bad := func(field, msg string) {
		errs = append(errs, &Error{Field: field, Msg: msg})
	}
	if e.Source == "" {
		bad("source", "missing (want builtin:NAME or a path to a .wasm file)")
	} else if msg := checkSource(e.Source); msg != "" {
		bad("source", msg)
	}
	if e.SHA256 != "" {
		if msg := checkSHA256(e.SHA256); msg != "" {
			bad("sha256", msg)
		}
	}
	if e.ABI != "" && !slices.Contains(ABIs, e.ABI) {
		bad("abi", fmt.Sprintf("%q is not one of %s (or leave it out to detect the ABI)", e.ABI, strings.Join(ABIs, ", ")))
	}
	if e.Config != nil {
		if msg := checkJSONValue(e.Config); msg != "" {
			bad("config", msg)
		}
	}
	if err := e.Grants.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Validate checks grants built in code with the rules Decode applies to
// YAML. Unset fields count as their defaults. Errors are *Error values
// naming the field (grants.limits.memory, say), joined with errors.Join.
func (g Grants) Validate() error {
	var errs []error
	bad := func(field, msg string) {
		errs = append(errs, &Error{Field: field, Msg: msg})
	}
	for i, fs := range g.FS {
		f := fmt.Sprintf("grants.fs[%d]", i)
		if msg := checkFSPath(fs.Path); msg != "" {
			bad(f+".path", msg)
		}
		if fs.Mode != "" {
			if msg := checkMode(fs.Mode); msg != "" {
				bad(f+".mode", msg)
			}
		}
	}
	durations := []struct {
		field string
		v     time.Duration
	}{
		{"grants.exec.timeout", g.Exec.Timeout},
		{"grants.exec.max_timeout", g.Exec.MaxTimeout},
		{"grants.limits.call_timeout", g.Limits.CallTimeout},
		{"grants.limits.init_timeout", g.Limits.InitTimeout},
		{"grants.limits.wall_timeout", g.Limits.WallTimeout},
		{"grants.net.timeout", g.Net.Timeout},
	}
	for _, d := range durations {
		if d.v != 0 {
			if msg := checkDuration(d.v); msg != "" {
				bad(d.field, msg)
			}
		}
	}
	if g.Exec.Timeout != 0 && g.Exec.MaxTimeout != 0 && g.Exec.Timeout > g.Exec.MaxTimeout {
		bad("grants.exec.timeout", fmt.Sprintf("%v exceeds max_timeout %v", g.Exec.Timeout, g.Exec.MaxTimeout))
	}
	sizes := []struct {
		field string
		v, hi ByteSize
	}{
		{"grants.exec.output_bytes", g.Exec.OutputBytes, MaxOutputBytes},
		{"grants.exec.file_bytes", g.Exec.FileBytes, MaxFileBytes},
		{"grants.net.response_bytes", g.Net.ResponseBytes, MaxResponse},
		{"grants.limits.memory", g.Limits.Memory, MaxMemory},
		{"grants.limits.host_bytes", g.Limits.HostBytes, MaxHostBytes},
		{"grants.limits.prompt_bytes", g.Limits.PromptBytes, MaxPromptBytes},
		{"grants.limits.log_bytes", g.Limits.LogBytes, MaxLogBytes},
		{"grants.limits.state_bytes", g.Limits.StateBytes, MaxStateBytes},
		{"grants.limits.disk_bytes", g.Limits.DiskBytes, MaxDiskBytes},
	}
	for _, s := range sizes {
		lo := ByteSize(1)
		if s.field == "grants.limits.host_bytes" {
			lo = MinHostBytes
		}
		if s.v != 0 {
			if msg := checkSize(s.v, lo, s.hi); msg != "" {
				bad(s.field, msg)
			}
		}
	}
	if msg := g.Limits.checkWall(); msg != "" {
		bad("grants.limits.wall_timeout", msg)
	}
	if msg := g.checkWallExec(); msg != "" {
		bad("grants.limits.wall_timeout", msg)
	}
	if g.Limits.DiskFiles != 0 {
		if msg := checkCount(g.Limits.DiskFiles, 1, MaxDiskFiles); msg != "" {
			bad("grants.limits.disk_files", msg)
		}
	}
	if g.Limits.MaxRegistrations != 0 {
		if msg := checkCount(g.Limits.MaxRegistrations, 1, MaxRegistrations); msg != "" {
			bad("grants.limits.max_registrations", msg)
		}
	}
	if g.Exec.Memory != 0 {
		if msg := checkSize(g.Exec.Memory, MinExecMemory, MaxExecMemory); msg != "" {
			bad("grants.exec.memory", msg)
		}
	}
	if g.Exec.MaxProcesses < 0 || g.Exec.MaxProcesses > MaxProcesses {
		bad("grants.exec.max_processes", fmt.Sprintf("%d: want a whole number from 1 to %d", g.Exec.MaxProcesses, MaxProcesses))
	}
	for i, v := range g.Exec.Env {
		if msg := checkExecEnv(v); msg != "" {
			bad(fmt.Sprintf("grants.exec.env[%d]", i), msg)
		}
	}
	for i, v := range g.Net.AllowedHosts {
		if msg := checkHostPattern(v); msg != "" {
			bad(fmt.Sprintf("grants.net.allowed_hosts[%d]", i), msg)
		}
	}
	for i, v := range g.Env {
		if msg := checkEnvName(v); msg != "" {
			bad(fmt.Sprintf("grants.env[%d]", i), msg)
		}
	}
	for i, v := range g.SessionEvents {
		if msg := CheckSessionEventType(v); msg != "" {
			bad(fmt.Sprintf("grants.session_events[%d]", i), msg)
		}
	}
	if msg := checkOrderRange(g.Prompt.Order); msg != "" {
		bad("grants.prompt.order", msg)
	}
	for i, v := range g.Events {
		if msg := checkEventGrant(v); msg != "" {
			bad(fmt.Sprintf("grants.events[%d]", i), msg)
		}
	}
	for i, v := range g.Subagents {
		if msg := CheckSubagentProvider(v); msg != "" {
			bad(fmt.Sprintf("grants.subagents[%d]", i), msg)
		}
	}
	return errors.Join(errs...)
}

// checkWall: an explicit wall-clock cap must leave room for the compute
// budgets it contains.
func (l Limits) checkWall() string {
	if l.WallTimeout == 0 {
		return ""
	}
	r := Grants{Limits: l}.Effective().Limits
	call, init := r.CallTimeout, r.InitTimeout
	if l.WallTimeout < call || l.WallTimeout < init {
		return fmt.Sprintf("%v is shorter than call_timeout %v or init_timeout %v, which it contains", l.WallTimeout, call, init)
	}
	return ""
}

// checkWallExec: with exec granted, an explicit wall-clock cap must let a
// command of max_timeout finish.
func (g Grants) checkWallExec() string {
	if g.Limits.WallTimeout == 0 || !g.Exec.Allowed {
		return ""
	}
	limit := g.Effective().Exec.MaxTimeout
	if g.Limits.WallTimeout < limit {
		return fmt.Sprintf("%v is shorter than grants.exec.max_timeout %v: a command the grant allows could not finish", g.Limits.WallTimeout, limit)
	}
	return ""
}

var builtinNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)

func checkSource(s string) string {
	if s == "" {
		return "empty (want builtin:NAME or a path to a .wasm file)"
	}
	if strings.ContainsAny(s, "\x00\n\r") {
		return "contains a control character"
	}
	if name, ok := strings.CutPrefix(s, BuiltinPrefix); ok {
		if !builtinNameRE.MatchString(name) {
			return fmt.Sprintf("bad builtin name %q: want lower-case letters, digits, '.', '_' or '-'", name)
		}
	}
	return ""
}

func checkSHA256(s string) string {
	hexPart, ok := strings.CutPrefix(s, "sha256:")
	if !ok {
		return fmt.Sprintf("%q: want \"sha256:\" followed by 64 hex digits", s)
	}
	if len(hexPart) != 64 {
		return fmt.Sprintf("want 64 hex digits after sha256:, got %d characters", len(hexPart))
	}
	if _, err := hex.DecodeString(hexPart); err != nil {
		return "digest is not hexadecimal"
	}
	return ""
}

// SHA256Digest returns the pinned digest, if any.
func (e Entry) SHA256Digest() ([32]byte, bool) {
	var out [32]byte
	hexPart, ok := strings.CutPrefix(e.SHA256, "sha256:")
	if !ok || len(hexPart) != 64 {
		return out, false
	}
	if _, err := hex.Decode(out[:], []byte(hexPart)); err != nil {
		return out, false
	}
	return out, true
}

func isAbs(p string) bool { return filepath.IsAbs(p) }

func cleanPath(p string) string { return filepath.Clean(p) }

func checkFSPath(p string) string {
	switch {
	case p == Workspace:
		return ""
	case p == "":
		return "empty (want an absolute path or the word workspace)"
	case strings.ContainsRune(p, 0):
		return "contains a NUL byte"
	case !isAbs(p):
		return fmt.Sprintf("relative path %q refused: use an absolute path or the word workspace", p)
	}
	return ""
}

func normalizeFSPath(p string) string {
	if p == Workspace {
		return p
	}
	return cleanPath(p)
}

func checkMode(m FSMode) string {
	if m != ModeRO && m != ModeRW {
		return fmt.Sprintf("mode %q: want ro or rw", string(m))
	}
	return ""
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func checkEnvName(s string) string {
	if !envNameRE.MatchString(s) {
		return fmt.Sprintf("%q is not an environment variable name (letters, digits and _, not starting with a digit)", s)
	}
	return ""
}

func checkExecEnv(s string) string {
	name, value, hasValue := strings.Cut(s, "=")
	if msg := checkEnvName(name); msg != "" {
		return fmt.Sprintf("%q: want NAME or NAME=VALUE with a valid name", s)
	}
	if hasValue && strings.ContainsRune(value, 0) {
		return "value contains a NUL byte"
	}
	return ""
}

func checkHostPattern(s string) string {
	if _, err := netguard.ParseHostPattern(s); err != nil {
		return strings.TrimPrefix(err.Error(), "netguard: ")
	}
	return ""
}

func checkDuration(v time.Duration) string {
	switch {
	case v <= 0:
		return fmt.Sprintf("%v: must be positive", v)
	case v > MaxDuration:
		return fmt.Sprintf("%v: longer than the %v maximum", v, MaxDuration)
	}
	return ""
}

func checkSize(v, lo, hi ByteSize) string {
	switch {
	case v < lo:
		return fmt.Sprintf("%d bytes: must be at least %d", uint64(v), uint64(lo))
	case v > hi:
		return fmt.Sprintf("%s exceeds the %s maximum", v, hi)
	}
	return ""
}

// checkJSONValue verifies a config built in code is JSON-compatible.
func checkJSONValue(v any) string {
	switch x := v.(type) {
	case nil, string, bool, int, int32, int64, uint, uint32, uint64:
		return ""
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Sprintf("%v cannot be represented in JSON", x)
		}
		return ""
	case map[string]any:
		for k, item := range x {
			if msg := checkJSONValue(item); msg != "" {
				return k + ": " + msg
			}
		}
		return ""
	case []any:
		for i, item := range x {
			if msg := checkJSONValue(item); msg != "" {
				return fmt.Sprintf("[%d]: %s", i, msg)
			}
		}
		return ""
	}
	return fmt.Sprintf("value of type %T is not JSON-compatible", v)
}

// ConfigJSON encodes Config as the JSON object handed to the plugin ("{}"
// when there is none).
func (e Entry) ConfigJSON() ([]byte, error) {
	if e.Config == nil {
		return []byte("{}"), nil
	}
	if msg := checkJSONValue(e.Config); msg != "" {
		return nil, &Error{Field: "config", Msg: msg}
	}
	b, err := json.Marshal(e.Config)
	if err != nil {
		return nil, &Error{Field: "config", Msg: "cannot encode as JSON", Err: err}
	}
	return b, nil
}
