package config

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

const file = "plugins.yaml"

func TestLoadFullEntry(t *testing.T) {
	src := `source: builtin:fs
sha256: "sha256:` + strings.Repeat("ab", 32) + `"
config:
  greeting: hi
  n: 3
  ratio: 0.5
  on: true
  none: ~
  list: [1, two, {three: 3}]
  when: 2001-12-14
grants:
  fs:
    - {path: workspace, mode: rw}
    - path: /usr/share/dict
    - {path: /data/../srv/, mode: ro}
  exec:
    allowed: true
    timeout: 30s
    max_timeout: 5m
    output_bytes: 64KiB
    env: [GOPATH, CI=1]
    sandbox: true
    max_processes: 100
    memory: 256MiB
    file_bytes: 2GiB
  net:
    allowed_hosts: [api.github.com, "*.githubusercontent.com", "localhost:8080"]
    response_bytes: 1MiB
    allow_private: true
  env: [GITHUB_TOKEN]
  limits:
    memory: 64MiB
    call_timeout: 5s
    init_timeout: 1m
`
	e, err := Load(file, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := Entry{
		Source: "builtin:fs",
		SHA256: "sha256:" + strings.Repeat("ab", 32),
		Config: map[string]any{
			"greeting": "hi", "n": 3, "ratio": 0.5, "on": true, "none": nil,
			"list": []any{1, "two", map[string]any{"three": 3}},
			"when": "2001-12-14",
		},
		Grants: Grants{
			FS: []FSGrant{
				{Path: Workspace, Mode: ModeRW},
				{Path: "/usr/share/dict", Mode: ModeRO},
				{Path: "/srv", Mode: ModeRO},
			},
			Exec: ExecGrant{
				Allowed: true, Timeout: 30 * time.Second, MaxTimeout: 5 * time.Minute,
				OutputBytes: 64 * KiB, Env: []string{"GOPATH", "CI=1"}, Sandbox: true,
				MaxProcesses: 100, Memory: 256 * MiB, FileBytes: 2 * GiB,
			},
			Net: NetGrant{
				AllowedHosts:  []string{"api.github.com", "*.githubusercontent.com", "localhost:8080"},
				ResponseBytes: MiB,
				Timeout:       DefaultNetTimeout,
				AllowPrivate:  true,
			},
			Env: []string{"GITHUB_TOKEN"},
			Limits: Limits{Memory: 64 * MiB, CallTimeout: 5 * time.Second, InitTimeout: time.Minute,
				WallTimeout: DefaultWallTimeout, HostBytes: DefaultHostBytes, PromptBytes: DefaultPromptBytes, LogBytes: DefaultLogBytes, StateBytes: DefaultStateBytes,
				DiskBytes: DefaultDiskBytes, DiskFiles: DefaultDiskFiles, MaxRegistrations: DefaultMaxRegistrations},
		},
	}
	if !reflect.DeepEqual(e, want) {
		t.Errorf("decoded\n%#v\nwant\n%#v", e, want)
	}
	if name, ok := e.Builtin(); !ok || name != "fs" {
		t.Errorf("Builtin() = %q, %v", name, ok)
	}
	if d, ok := e.SHA256Digest(); !ok || d[0] != 0xab || d[31] != 0xab {
		t.Errorf("SHA256Digest() = %x, %v", d, ok)
	}
	if got := e.Grants.Limits.MemoryPages(); got != 1024 {
		t.Errorf("MemoryPages() = %d, want 1024", got)
	}
	js, err := e.ConfigJSON()
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js, &back); err != nil || back["greeting"] != "hi" {
		t.Errorf("ConfigJSON = %s, %v", js, err)
	}
	if err := e.Validate(); err != nil {
		t.Errorf("Validate() on a decoded entry: %v", err)
	}
}

func TestLoadDefaults(t *testing.T) {
	e, err := Load(file, []byte("source: plugins/x.wasm\n"))
	if err != nil {
		t.Fatal(err)
	}
	g := e.Grants
	if g.Exec.Allowed || g.Exec.Sandbox || len(g.FS) != 0 || len(g.Net.AllowedHosts) != 0 || len(g.Env) != 0 {
		t.Errorf("defaults grant something: %+v", g)
	}
	if g.Exec.Timeout != DefaultExecTimeout || g.Exec.MaxTimeout != DefaultExecMaxTimeout ||
		g.Exec.OutputBytes != DefaultExecOutputBytes || g.Net.ResponseBytes != DefaultResponseBytes ||
		g.Limits.Memory != DefaultMemory || g.Limits.CallTimeout != DefaultCallTimeout ||
		g.Limits.InitTimeout != DefaultInitTimeout {
		t.Errorf("defaults not applied: %+v", g)
	}
	if e.Config != nil {
		t.Errorf("Config = %v, want nil", e.Config)
	}
	if js, _ := e.ConfigJSON(); string(js) != "{}" {
		t.Errorf("ConfigJSON = %s", js)
	}
	if _, ok := e.Builtin(); ok {
		t.Error("a path source reported as builtin")
	}
	// A timeout above the default max raises the max.
	e, err = Load(file, []byte("source: x.wasm\ngrants: {exec: {timeout: 20m}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if e.Grants.Exec.MaxTimeout != 20*time.Minute {
		t.Errorf("MaxTimeout = %v, want 20m", e.Grants.Exec.MaxTimeout)
	}
}

// TestLoadErrors covers every field's failure modes; each want is the
// exact prefix FILE:LINE: FIELD: plus a fragment of the message.
func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"empty", "", "plugins.yaml: empty document"},
		{"syntax", "source: [unclosed\n", "plugins.yaml:1: did not find expected"},
		{"not a mapping", "- a\n", "plugins.yaml:1: want a mapping, got a list"},
		{"missing source", "sha256: \"sha256:" + strings.Repeat("0", 64) + "\"\n", "plugins.yaml:1: source: missing"},
		{"unknown top field", "source: x.wasm\nsrc: y\n", "plugins.yaml:2: src: unknown field (known: abi, config, grants, sha256, source)"},
		{"duplicate key", "source: x.wasm\nsource: y.wasm\n", "plugins.yaml:2: source: duplicate key (first defined at line 1)"},
		{"source not string", "source: 12\n", `plugins.yaml:1: source: want a string, got int "12"`},
		{"source empty", "source: ''\n", "plugins.yaml:1: source: empty"},
		{"builtin bad name", "source: builtin:Bad Name\n", `plugins.yaml:1: source: bad builtin name "Bad Name"`},
		{"builtin empty", "source: 'builtin:'\n", `plugins.yaml:1: source: bad builtin name ""`},
		{"sha256 prefix", "source: x\nsha256: " + strings.Repeat("a", 64) + "\n", `plugins.yaml:2: sha256: "aaaa`},
		{"sha256 short", "source: x\nsha256: sha256:abc\n", "plugins.yaml:2: sha256: want 64 hex digits after sha256:, got 3 characters"},
		{"sha256 not hex", "source: x\nsha256: sha256:" + strings.Repeat("g", 64) + "\n", "plugins.yaml:2: sha256: digest is not hexadecimal"},
		{"config scalar", "source: x\nconfig: 3\n", `plugins.yaml:2: config: want a mapping, got int "3"`},
		{"config list", "source: x\nconfig: [1]\n", "plugins.yaml:2: config: want a mapping, got a list"},
		{"config int key", "source: x\nconfig:\n  a:\n    1: one\n", `plugins.yaml:4: config.a: map key int "1" is not a string; quote it`},
		{"config bool key", "source: x\nconfig:\n  true: yes\n", `plugins.yaml:3: config: map key bool "true" is not a string`},
		{"config null key", "source: x\nconfig:\n  ~: v\n", `plugins.yaml:3: config: map key null "~" is not a string`},
		{"config complex key", "source: x\nconfig:\n  ? [a]\n  : v\n", "plugins.yaml:3: config: map key a list is not a string"},
		{"config nan", "source: x\nconfig:\n  list: [1, .nan]\n", "plugins.yaml:3: config.list[1]: .nan cannot be represented in JSON"},
		{"config inf", "source: x\nconfig: {x: -.inf}\n", "plugins.yaml:2: config.x: -.inf cannot be represented in JSON"},
		{"config binary", "source: x\nconfig: {x: !!binary aGk=}\n", `plugins.yaml:2: config.x: binary "aGk=" cannot be represented in JSON`},
		{"config custom tag", "source: x\nconfig: {x: !thing v}\n", `config.x: !thing "v" cannot be represented in JSON`},
		{"config duplicate", "source: x\nconfig:\n  a: 1\n  a: 2\n", "plugins.yaml:4: config.a: duplicate key (first defined at line 3)"},
		{"config recursive alias", "source: x\nconfig: &a\n  self: *a\n", "config.self"},
		{"grants scalar", "source: x\ngrants: all\n", `plugins.yaml:2: grants: want a mapping, got str "all"`},
		{"grants unknown", "source: x\ngrants:\n  disk: []\n", "plugins.yaml:3: grants.disk: unknown field (known: env, events, exec, fs, limits, net, prompt, session_events, subagents)"},
		{"fs not list", "source: x\ngrants:\n  fs: /data\n", `plugins.yaml:3: grants.fs: want a list, got str "/data"`},
		{"fs item scalar", "source: x\ngrants:\n  fs:\n    - /data\n", `plugins.yaml:4: grants.fs[0]: want a mapping like {path: /data, mode: ro}, got str "/data"`},
		{"fs relative", "source: x\ngrants:\n  fs:\n    - {path: /ok}\n    - path: data\n", `plugins.yaml:5: grants.fs[1].path: relative path "data" refused: use an absolute path or the word workspace`},
		{"fs dot relative", "source: x\ngrants:\n  fs: [{path: ./data}]\n", `grants.fs[0].path: relative path "./data" refused`},
		{"fs missing path", "source: x\ngrants:\n  fs:\n    - mode: rw\n", "plugins.yaml:4: grants.fs[0].path: missing"},
		{"fs bad mode", "source: x\ngrants:\n  fs:\n    - path: /d\n      mode: write\n", `plugins.yaml:5: grants.fs[0].mode: mode "write": want ro or rw`},
		{"fs unknown field", "source: x\ngrants:\n  fs:\n    - path: /d\n      recursive: true\n", "plugins.yaml:5: grants.fs[0].recursive: unknown field (known: mode, path)"},
		{"exec unknown", "source: x\ngrants:\n  exec:\n    shell: zsh\n", "plugins.yaml:4: grants.exec.shell: unknown field"},
		{"exec allowed yes", "source: x\ngrants:\n  exec:\n    allowed: yes\n", `plugins.yaml:4: grants.exec.allowed: want true or false, got str "yes"`},
		{"exec timeout no unit", "source: x\ngrants:\n  exec:\n    timeout: 30\n", "plugins.yaml:4: grants.exec.timeout: duration 30 needs a unit, such as 30s"},
		{"exec timeout bad", "source: x\ngrants:\n  exec:\n    timeout: soon\n", `plugins.yaml:4: grants.exec.timeout: bad duration "soon"`},
		{"exec timeout zero", "source: x\ngrants:\n  exec:\n    timeout: 0s\n", "plugins.yaml:4: grants.exec.timeout: 0s: must be positive"},
		{"exec timeout negative", "source: x\ngrants:\n  exec:\n    timeout: -1s\n", "plugins.yaml:4: grants.exec.timeout: -1s: must be positive"},
		{"exec max timeout huge", "source: x\ngrants:\n  exec:\n    max_timeout: 25h\n", "plugins.yaml:4: grants.exec.max_timeout: 25h0m0s: longer than the 24h0m0s maximum"},
		{"exec timeout over max", "source: x\ngrants:\n  exec:\n    timeout: 5m\n    max_timeout: 1m\n", "plugins.yaml:3: grants.exec.timeout: 5m0s exceeds max_timeout 1m0s"},
		{"exec output zero", "source: x\ngrants:\n  exec:\n    output_bytes: 0\n", "plugins.yaml:4: grants.exec.output_bytes: 0 bytes: must be at least 1"},
		{"exec output huge", "source: x\ngrants:\n  exec:\n    output_bytes: 1GiB\n", "plugins.yaml:4: grants.exec.output_bytes: 1GiB exceeds the 64MiB maximum"},
		{"exec output unit", "source: x\ngrants:\n  exec:\n    output_bytes: 3 parsecs\n", `plugins.yaml:4: grants.exec.output_bytes: size "3 parsecs"`},
		{"exec env bad", "source: x\ngrants:\n  exec:\n    env: [OK, 1BAD]\n", `plugins.yaml:4: grants.exec.env[1]: "1BAD": want NAME or NAME=VALUE`},
		{"exec env not list", "source: x\ngrants:\n  exec:\n    env: PATH\n", `plugins.yaml:4: grants.exec.env: want a list, got str "PATH"`},
		{"exec sandbox str", "source: x\ngrants:\n  exec:\n    sandbox: 'true'\n", `plugins.yaml:4: grants.exec.sandbox: want true or false, got str "true"`},
		{"net unknown", "source: x\ngrants:\n  net:\n    hosts: [a]\n", "plugins.yaml:4: grants.net.hosts: unknown field (known: allow_private, allowed_hosts, response_bytes, timeout)"},
		{"net url", "source: x\ngrants:\n  net:\n    allowed_hosts:\n      - ok.example.com\n      - https://api.example.com\n", `plugins.yaml:6: grants.net.allowed_hosts[1]: invalid host pattern "https://api.example.com"`},
		{"net partial glob", "source: x\ngrants:\n  net:\n    allowed_hosts: [\"api-*.example.com\"]\n", `plugins.yaml:4: grants.net.allowed_hosts[0]: invalid host pattern`},
		{"net not string", "source: x\ngrants:\n  net:\n    allowed_hosts: [443]\n", `plugins.yaml:4: grants.net.allowed_hosts[0]: want a string, got int "443"`},
		{"net response zero", "source: x\ngrants:\n  net:\n    response_bytes: 0B\n", "plugins.yaml:4: grants.net.response_bytes: 0 bytes: must be at least 1"},
		{"net response huge", "source: x\ngrants:\n  net:\n    response_bytes: 2GiB\n", "plugins.yaml:4: grants.net.response_bytes: 2GiB exceeds the 1GiB maximum"},
		{"net allow_private str", "source: x\ngrants:\n  net:\n    allow_private: 1\n", `plugins.yaml:4: grants.net.allow_private: want true or false, got int "1"`},
		{"env bad", "source: x\ngrants:\n  env: [HOME, A-B]\n", `plugins.yaml:3: grants.env[1]: "A-B" is not an environment variable name`},
		{"env with value", "source: x\ngrants:\n  env: [A=1]\n", `plugins.yaml:3: grants.env[0]: "A=1" is not an environment variable name`},
		{"limits unknown", "source: x\ngrants:\n  limits:\n    cpu: 2\n", "plugins.yaml:4: grants.limits.cpu: unknown field (known: call_timeout, disk_bytes, disk_files, host_bytes, init_timeout, log_bytes, max_registrations, memory, prompt_bytes, snapshot, state_bytes, wall_timeout)"},
		{"memory zero", "source: x\ngrants:\n  limits:\n    memory: 0\n", "plugins.yaml:4: grants.limits.memory: 0 bytes: must be at least 1"},
		{"memory zero unit", "source: x\ngrants:\n  limits:\n    memory: 0MiB\n", "plugins.yaml:4: grants.limits.memory: 0 bytes: must be at least 1"},
		{"memory over 4GiB", "source: x\ngrants:\n  limits:\n    memory: 5GiB\n", "plugins.yaml:4: grants.limits.memory: 5GiB exceeds the 4GiB maximum"},
		{"memory just over", "source: x\ngrants:\n  limits:\n    memory: 4294967297\n", "plugins.yaml:4: grants.limits.memory: 4294967297 exceeds the 4GiB maximum"},
		{"memory negative", "source: x\ngrants:\n  limits:\n    memory: -1\n", "plugins.yaml:4: grants.limits.memory: size -1: want a non-negative number of bytes"},
		{"memory bad unit", "source: x\ngrants:\n  limits:\n    memory: 64 megs\n", `plugins.yaml:4: grants.limits.memory: size "64 megs"`},
		{"memory fraction", "source: x\ngrants:\n  limits:\n    memory: 1.1B\n", `plugins.yaml:4: grants.limits.memory: size "1.1B" is not a whole number of bytes`},
		{"memory list", "source: x\ngrants:\n  limits:\n    memory: [1]\n", "plugins.yaml:4: grants.limits.memory: want a size such as 64MiB, got a list"},
		{"call timeout unitless", "source: x\ngrants:\n  limits:\n    call_timeout: 5\n", "plugins.yaml:4: grants.limits.call_timeout: duration 5 needs a unit, such as 5s"},
		{"init timeout bad", "source: x\ngrants:\n  limits:\n    init_timeout: 5 seconds\n", `plugins.yaml:4: grants.limits.init_timeout: bad duration "5 seconds"`},
		{"two documents", "source: x\n---\nsource: y\n", "plugins.yaml:2: more than one YAML document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(file, []byte(tt.src))
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %v is not ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error:\n%v\nwant it to contain:\n%s", err, tt.want)
			}
		})
	}
}

func TestLoadReportsAllErrors(t *testing.T) {
	src := "source: x\ngrants:\n  fs: [{path: rel}]\n  env: [bad-name]\n  limits: {memory: 0}\n"
	_, err := Load(file, []byte(src))
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{"plugins.yaml:3: grants.fs[0].path", "plugins.yaml:4: grants.env[0]", "plugins.yaml:5: grants.limits.memory"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	var ce *Error
	if !errors.As(err, &ce) || ce.File != file || ce.Line == 0 {
		t.Errorf("errors.As(*Error) = %+v", ce)
	}
}

func TestMergeKeysAndAliases(t *testing.T) {
	src := `source: x
grants:
  limits: &lim
    memory: 1MiB
    call_timeout: 1s
  exec:
    <<: {allowed: true, timeout: 10s}
    timeout: 20s
config:
  base: &base {a: 1, b: 2}
  derived:
    <<: *base
    b: 3
  again: *base
`
	e, err := Load(file, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if !e.Grants.Exec.Allowed || e.Grants.Exec.Timeout != 20*time.Second {
		t.Errorf("exec = %+v", e.Grants.Exec)
	}
	want := map[string]any{"a": 1, "b": 3}
	if !reflect.DeepEqual(e.Config["derived"], want) {
		t.Errorf("derived = %v, want %v", e.Config["derived"], want)
	}
	if !reflect.DeepEqual(e.Config["again"], map[string]any{"a": 1, "b": 2}) {
		t.Errorf("again = %v", e.Config["again"])
	}
}

func TestAliasBombIsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("source: x\nconfig:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i <= 9; i++ {
		b.WriteString("  a" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [")
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*a" + string(rune('0'+i-1)))
		}
		b.WriteString("]\n")
	}
	start := time.Now()
	_, err := Load(file, []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "config too large") {
		t.Errorf("error = %v, want config too large", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

// deployment embeds Entry the way a larger file would.
type deployment struct {
	Name    string           `yaml:"name"`
	Plugins map[string]Entry `yaml:"plugins"`
}

func TestEmbeddedEntryIsStrict(t *testing.T) {
	src := "name: d\nplugins:\n  gh:\n    source: builtin:gh\n    grants:\n      net:\n        alowed_hosts: [x]\n"
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	var d deployment
	err := dec.Decode(&d)
	if err == nil {
		t.Fatal("unknown nested field accepted")
	}
	err = WithFile(err, "deploy.yaml")
	if want := "deploy.yaml:7: grants.net.alowed_hosts: unknown field"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q lacks %q", err, want)
	}
	if !errors.Is(err, ErrInvalidConfig) {
		t.Error("not ErrInvalidConfig")
	}

	ok := "name: d\nplugins:\n  gh:\n    source: builtin:gh\n    grants: {env: [TOKEN]}\n"
	dec = yaml.NewDecoder(strings.NewReader(ok))
	dec.KnownFields(true)
	if err := dec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	if got := d.Plugins["gh"]; got.Source != "builtin:gh" || got.Grants.Env[0] != "TOKEN" || got.Grants.Limits.Memory != DefaultMemory {
		t.Errorf("decoded %+v", got)
	}
	// Decode on a sub-node gives file names directly.
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(src), &root); err != nil {
		t.Fatal(err)
	}
	sub := root.Content[0].Content[3].Content[1] // plugins.gh
	_, err = Decode("deploy.yaml", sub)
	if err == nil || !strings.HasPrefix(err.Error(), "deploy.yaml:7: ") {
		t.Errorf("Decode error = %v", err)
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	e, err := Load(file, []byte("source: x.wasm\nconfig: {k: v}\ngrants:\n  fs: [{path: /d, mode: rw}]\n  exec: {allowed: true, output_bytes: 30000}\n  net: {allowed_hosts: [\"*.a.test\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Load(file, out)
	if err != nil {
		t.Fatalf("reloading %s: %v", out, err)
	}
	if !reflect.DeepEqual(e, back) {
		t.Errorf("round trip:\n%s\n%#v\n%#v", out, e, back)
	}
}

func TestValidateBuiltInCode(t *testing.T) {
	good := Entry{Source: "builtin:x", Grants: Grants{FS: []FSGrant{{Path: "/d"}}}}
	if err := good.Validate(); err != nil {
		t.Errorf("Validate(good) = %v", err)
	}
	bad := Entry{
		SHA256: "md5:x",
		Config: map[string]any{"f": func() {}},
		Grants: Grants{
			FS:     []FSGrant{{Path: "rel", Mode: "x"}},
			Exec:   ExecGrant{Timeout: time.Hour, MaxTimeout: time.Minute, OutputBytes: 65 * MiB, Env: []string{"=x"}},
			Net:    NetGrant{AllowedHosts: []string{"a b"}},
			Env:    []string{"1X"},
			Limits: Limits{Memory: 5 * GiB, CallTimeout: -time.Second},
		},
	}
	err := bad.Validate()
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Validate(bad) = %v", err)
	}
	for _, field := range []string{"source:", "sha256:", "config:", "grants.fs[0].path:", "grants.fs[0].mode:",
		"grants.exec.timeout:", "grants.exec.output_bytes:", "grants.exec.env[0]:", "grants.net.allowed_hosts[0]:",
		"grants.env[0]:", "grants.limits.memory:", "grants.limits.call_timeout:"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("Validate error lacks %q:\n%v", field, err)
		}
	}
}

func TestParseByteSize(t *testing.T) {
	tests := []struct {
		in   string
		want ByteSize
		ok   bool
	}{
		{"0", 0, true}, {"512", 512, true}, {"512B", 512, true}, {"512KiB", 512 * KiB, true},
		{"64MiB", 64 * MiB, true}, {"64mib", 64 * MiB, true}, {"1GiB", GiB, true}, {"1.5GiB", 3 * GiB / 2, true},
		{"2 MiB", 2 * MiB, true}, {"1kB", 1000, true}, {"1MB", 1000000, true}, {"1TiB", 1 << 40, true},
		{"", 0, false}, {"MiB", 0, false}, {"1.5", 0, false}, {"-1MiB", 0, false}, {"1XB", 0, false},
		{"99999999999999999999", 0, false}, {"17179869184GiB", 0, false}, {"1..2MiB", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseByteSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestMemoryPages(t *testing.T) {
	tests := []struct {
		mem  ByteSize
		want uint32
	}{
		{0, uint32(DefaultMemory / WasmPageSize)},
		{1, 1}, {64 * KiB, 1}, {64*KiB + 1, 2}, {512 * KiB, 8}, {64 * MiB, 1024}, {GiB, 16384}, {4 * GiB, 65536},
	}
	for _, tt := range tests {
		if got := (Limits{Memory: tt.mem}).MemoryPages(); got != tt.want {
			t.Errorf("MemoryPages(%v) = %d, want %d", tt.mem, got, tt.want)
		}
	}
}

func TestExecEnviron(t *testing.T) {
	host := map[string]string{
		"PATH": "/bin", "HOME": "/home/u", "AWS_SECRET_ACCESS_KEY": "s3cr3t", "GOPATH": "/go", "TERM": "xterm",
	}
	lookup := func(k string) (string, bool) { v, ok := host[k]; return v, ok }
	g := ExecGrant{Env: []string{"GOPATH", "CI=1", "UNSET", "TERM=dumb"}}
	got := g.Environ(lookup)
	want := []string{"PATH=/bin", "HOME=/home/u", "TERM=dumb", "GOPATH=/go", "CI=1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Environ = %v, want %v", got, want)
	}
	for _, kv := range got {
		if strings.HasPrefix(kv, "AWS_") {
			t.Errorf("secret leaked: %s", kv)
		}
	}
	if d := DefaultExecEnv(); len(d) == 0 || d[0] != "PATH" {
		t.Errorf("DefaultExecEnv = %v", d)
	}
}

func TestCommandTimeout(t *testing.T) {
	g := ExecGrant{Timeout: 30 * time.Second, MaxTimeout: time.Minute}
	tests := []struct {
		req  time.Duration
		want time.Duration
		ok   bool
	}{
		{0, 30 * time.Second, true}, {10 * time.Second, 10 * time.Second, true}, {time.Minute, time.Minute, true},
		{61 * time.Second, 0, false}, {-1, 0, false},
	}
	for _, tt := range tests {
		got, err := g.CommandTimeout(tt.req)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("CommandTimeout(%v) = %v, %v", tt.req, got, err)
		}
		if err != nil && !errors.Is(err, ErrNotGranted) {
			t.Errorf("CommandTimeout(%v) error not ErrNotGranted: %v", tt.req, err)
		}
	}
	if got, _ := (ExecGrant{}).CommandTimeout(0); got != DefaultExecTimeout {
		t.Errorf("zero grant default = %v", got)
	}
}

func TestFSGrantResolve(t *testing.T) {
	if p, err := (FSGrant{Path: Workspace}).Resolve("/home/u/proj/"); err != nil || p != "/home/u/proj" {
		t.Errorf("Resolve(workspace) = %q, %v", p, err)
	}
	if p, _ := (FSGrant{Path: "/data"}).Resolve("/w"); p != "/data" {
		t.Errorf("Resolve(/data) = %q", p)
	}
	if _, err := (FSGrant{Path: Workspace}).Resolve("rel"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Resolve with relative workspace: %v", err)
	}
}

func TestDiskQuotaGrants(t *testing.T) {
	e, err := Load("plugins.yaml", []byte("source: x\ngrants:\n  limits:\n    disk_bytes: 2MiB\n    disk_files: 10\n"))
	if err != nil {
		t.Fatal(err)
	}
	if b, f := e.Grants.Limits.DiskQuota(); b != 2<<20 || f != 10 {
		t.Errorf("DiskQuota() = %d, %d; want 2MiB, 10", b, f)
	}
	if b, f := (Limits{}).DiskQuota(); b != int64(DefaultDiskBytes) || f != DefaultDiskFiles {
		t.Errorf("default DiskQuota() = %d, %d", b, f)
	}
	for _, bad := range []string{"disk_files: 0", "disk_files: -1", "disk_files: 1.5", "disk_files: lots", "disk_bytes: 0", "disk_bytes: 2000TiB"} {
		if _, err := Load("plugins.yaml", []byte("source: x\ngrants:\n  limits:\n    "+bad+"\n")); err == nil || !strings.Contains(err.Error(), "grants.limits.disk_") {
			t.Errorf("%s: %v, want an error naming grants.limits.disk_*", bad, err)
		}
	}
}

func TestSnapshotLimit(t *testing.T) {
	for _, c := range []struct {
		yml  string
		want *bool
	}{
		{"source: builtin:facts\n", nil},
		{"source: builtin:facts\ngrants:\n  limits: {snapshot: false}\n", new(bool)},
	} {
		e, err := Load("p.yaml", []byte(c.yml))
		if err != nil {
			t.Fatal(err)
		}
		got := e.Grants.Limits.Snapshot
		if (got == nil) != (c.want == nil) || (got != nil && *got != *c.want) {
			t.Fatalf("%q: snapshot = %v, want %v", c.yml, got, c.want)
		}
	}
	if _, err := Load("p.yaml", []byte("source: builtin:facts\ngrants:\n  limits: {snapshot: maybe}\n")); err == nil || !strings.Contains(err.Error(), "p.yaml:3: grants.limits.snapshot") {
		t.Fatalf("a bad snapshot value: %v", err)
	}
}
