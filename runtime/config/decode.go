package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Error is one decoding or validation problem. Its message is
// "FILE:LINE: FIELD: problem" ("line N: ..." before a file is known, and
// without the location for Validate errors, which have no position).
// errors.Is(err, ErrInvalidConfig) holds for every *Error.
type Error struct {
	File   string
	Line   int // 0 when unknown
	Column int
	Field  string // dotted path, e.g. grants.fs[1].path
	Msg    string
	Err    error // underlying cause, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		fmt.Fprintf(&b, "%s: ", e.File)
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap exposes ErrInvalidConfig and the cause.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalidConfig, e.Err}
	}
	return []error{ErrInvalidConfig}
}

// WithFile sets File on every *Error in err that has none, so that errors
// from Entry.UnmarshalYAML (which cannot know the file) read FILE:LINE.
// It returns err.
func WithFile(err error, file string) error {
	var walk func(error)
	walk = func(e error) {
		switch x := e.(type) {
		case *Error:
			if x.File == "" {
				x.File = file
			}
		case interface{ Unwrap() []error }:
			for _, inner := range x.Unwrap() {
				walk(inner)
			}
		case interface{ Unwrap() error }:
			walk(x.Unwrap())
		}
	}
	walk(err)
	return err
}

// Load decodes a YAML document that holds exactly one Entry, with
// KnownFields(true), fills defaults and validates it. file is used in error
// messages only.
func Load(file string, data []byte) (Entry, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var e Entry
	if err := dec.Decode(&e); err != nil {
		if errors.Is(err, io.EOF) {
			return Entry{}, &Error{File: file, Msg: "empty document"}
		}
		return Entry{}, WithFile(yamlError(err), file)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := 0
		if err == nil {
			line = extra.Line
		}
		return Entry{}, &Error{File: file, Line: line, Msg: "more than one YAML document"}
	}
	return e, nil
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError turns yaml.v3's "yaml: line N: msg" into an *Error; our own
// errors pass through.
func yamlError(err error) error {
	var ce *Error
	if errors.As(err, &ce) {
		return err
	}
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{Line: line, Msg: m[2], Err: err}
	}
	return &Error{Msg: strings.TrimPrefix(msg, "yaml: "), Err: err}
}

// Decode decodes an Entry from node (a document or mapping node), refusing
// unknown and duplicate keys, fills defaults and validates. Every error is
// an *Error naming file:line; several are joined with errors.Join.
func Decode(file string, node *yaml.Node) (Entry, error) {
	d := &decoder{file: file, budget: maxConfigNodes}
	e := d.entry(node)
	if len(d.errs) > 0 {
		return Entry{}, errors.Join(d.errs...)
	}
	e.ApplyDefaults()
	return e, nil
}

// UnmarshalYAML decodes strictly with positions, like Decode; wrap the error
// with WithFile to get file names in messages.
func (e *Entry) UnmarshalYAML(node *yaml.Node) error {
	got, err := Decode("", node)
	if err != nil {
		return err
	}
	*e = got
	return nil
}

const (
	maxConfigNodes = 100000 // alias expansion budget for config
	maxConfigDepth = 64
)

type decoder struct {
	file   string
	errs   []error
	budget int
}

func (d *decoder) fail(n *yaml.Node, field, format string, args ...any) {
	e := &Error{File: d.file, Field: field, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	d.errs = append(d.errs, e)
}

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil
		}
		return resolve(n.Content[0])
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "scalar"
	}
	return "node"
}

func describe(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode {
		return "a " + kindName(n)
	}
	tag := strings.TrimPrefix(n.ShortTag(), "!!")
	return fmt.Sprintf("%s %q", tag, n.Value)
}

type pair struct{ key, value *yaml.Node }

// pairs lists a mapping's entries with "<<" merge keys expanded (explicit
// keys win over merged ones, earlier merges over later ones) and reports
// duplicate keys.
func (d *decoder) pairs(n *yaml.Node, field string, depth int) []pair {
	if depth > maxConfigDepth {
		d.fail(n, field, "nesting deeper than %d (recursive alias?)", maxConfigDepth)
		return nil
	}
	var own, merged []pair
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			var sources []*yaml.Node
			switch {
			case v != nil && v.Kind == yaml.MappingNode:
				sources = []*yaml.Node{v}
			case v != nil && v.Kind == yaml.SequenceNode:
				for _, s := range v.Content {
					sources = append(sources, resolve(s))
				}
			}
			for _, s := range sources {
				d.budget--
				if d.budget < 0 {
					if d.budget == -1 {
						d.fail(n.Content[i], field, "too many merged values (more than %d after alias expansion)", maxConfigNodes)
					}
					return nil
				}
				if s == nil || s.Kind != yaml.MappingNode {
					d.fail(n.Content[i], field, "<< merge needs a mapping or a list of mappings")
					continue
				}
				merged = append(merged, d.pairs(s, field, depth+1)...)
			}
			continue
		}
		if k.Kind == yaml.ScalarNode {
			if line, dup := seen[k.Value]; dup {
				d.fail(k, join(field, k.Value), "duplicate key (first defined at line %d)", line)
				continue
			}
			seen[k.Value] = k.Line
		}
		own = append(own, pair{k, v})
	}
	out := own
	for _, p := range merged {
		if p.key.Kind == yaml.ScalarNode {
			if _, dup := seen[p.key.Value]; dup {
				continue
			}
			seen[p.key.Value] = p.key.Line
		}
		out = append(out, p)
	}
	return out
}

func join(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// fields walks a mapping that maps to a struct: every key must be a known
// string; handlers get the value node and the field path.
func (d *decoder) fields(n *yaml.Node, field string, handlers map[string]func(v *yaml.Node, field string)) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n, field, "want a mapping, got %s", describe(n))
		return
	}
	for _, p := range d.pairs(n, field, 0) {
		if p.key.Kind != yaml.ScalarNode || p.key.ShortTag() != "!!str" {
			d.fail(p.key, field, "unknown field %s", describe(p.key))
			continue
		}
		h, ok := handlers[p.key.Value]
		if !ok {
			d.fail(p.key, join(field, p.key.Value), "unknown field (known: %s)", knownList(handlers))
			continue
		}
		h(p.value, join(field, p.key.Value))
	}
}

func knownList(handlers map[string]func(*yaml.Node, string)) string {
	names := make([]string, 0, len(handlers))
	for k := range handlers {
		names = append(names, k)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// str decodes a string scalar; ok is false (and an error recorded) otherwise.
func (d *decoder) str(n *yaml.Node, field string) (string, bool) {
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		if n == nil {
			d.fail(n, field, "want a string, got nothing")
		} else {
			d.fail(n, field, "want a string, got %s", describe(n))
		}
		return "", false
	}
	return n.Value, true
}

func (d *decoder) boolean(n *yaml.Node, field string) bool {
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		d.fail(n, field, "want true or false, got %s", describeOrNothing(n))
		return false
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		d.fail(n, field, "want true or false: %v", err)
	}
	return b
}

func describeOrNothing(n *yaml.Node) string {
	if n == nil {
		return "nothing"
	}
	return describe(n)
}

// duration decodes a Go duration string; zero and negative durations are
// refused since every duration here bounds something.
func (d *decoder) duration(n *yaml.Node, field string) time.Duration {
	if n == nil || n.Kind != yaml.ScalarNode {
		d.fail(n, field, "want a duration such as 30s, got %s", describeOrNothing(n))
		return 0
	}
	if tag := n.ShortTag(); tag == "!!int" || tag == "!!float" {
		d.fail(n, field, "duration %s needs a unit, such as %ss", n.Value, n.Value)
		return 0
	}
	if n.ShortTag() != "!!str" {
		d.fail(n, field, "want a duration such as 30s, got %s", describe(n))
		return 0
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		d.fail(n, field, "bad duration %q: want a Go duration such as 500ms, 30s or 2m", n.Value)
		return 0
	}
	if msg := checkDuration(v); msg != "" {
		d.fail(n, field, "%s", msg)
		return 0
	}
	return v
}

func (d *decoder) size(n *yaml.Node, field string, lo, hi ByteSize) ByteSize {
	if n == nil {
		d.fail(n, field, "want a size such as 64MiB, got nothing")
		return 0
	}
	v, err := decodeByteSize(n)
	if err != nil {
		d.fail(n, field, "%v", err)
		return 0
	}
	if msg := checkSize(v, lo, hi); msg != "" {
		d.fail(n, field, "%s", msg)
		return 0
	}
	return v
}

// count decodes an integer in [lo, hi].
func (d *decoder) count(n *yaml.Node, field string, lo, hi int) int {
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		d.fail(n, field, "want a whole number, got %s", describeOrNothing(n))
		return 0
	}
	v, err := strconv.Atoi(n.Value)
	if err != nil || v < lo || v > hi {
		d.fail(n, field, "%s: want a whole number from %d to %d", n.Value, lo, hi)
		return 0
	}
	return v
}

// list walks a sequence (null is an empty list).
func (d *decoder) list(n *yaml.Node, field string, each func(item *yaml.Node, field string)) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.fail(n, field, "want a list, got %s", describe(n))
		return
	}
	for i, item := range n.Content {
		each(resolve(item), fmt.Sprintf("%s[%d]", field, i))
	}
}

func (d *decoder) strings(n *yaml.Node, field string, check func(string) string) []string {
	var out []string
	d.list(n, field, func(item *yaml.Node, f string) {
		s, ok := d.str(item, f)
		if !ok {
			return
		}
		if msg := check(s); msg != "" {
			d.fail(item, f, "%s", msg)
			return
		}
		out = append(out, s)
	})
	return out
}

func (d *decoder) entry(node *yaml.Node) Entry {
	var e Entry
	n := resolve(node)
	if isNull(n) {
		d.fail(node, "", "empty plugin entry: want a mapping with at least source")
		return e
	}
	haveSource := false
	d.fields(n, "", map[string]func(*yaml.Node, string){
		"source": func(v *yaml.Node, f string) {
			haveSource = true
			if s, ok := d.str(v, f); ok {
				if msg := checkSource(s); msg != "" {
					d.fail(v, f, "%s", msg)
				}
				e.Source = s
			}
		},
		"sha256": func(v *yaml.Node, f string) {
			if s, ok := d.str(v, f); ok {
				if msg := checkSHA256(s); msg != "" {
					d.fail(v, f, "%s", msg)
				}
				e.SHA256 = s
			}
		},
		"config": func(v *yaml.Node, f string) {
			if isNull(v) {
				return
			}
			if v.Kind != yaml.MappingNode {
				d.fail(v, f, "want a mapping, got %s", describe(v))
				return
			}
			if m, ok := d.jsonValue(v, f, 0).(map[string]any); ok {
				e.Config = m
			}
		},
		"grants": func(v *yaml.Node, f string) { e.Grants = d.grants(v, f) },
		"abi": func(v *yaml.Node, f string) {
			if s, ok := d.str(v, f); ok {
				if !slices.Contains(ABIs, s) {
					d.fail(v, f, "%q is not one of %s (or leave it out to detect the ABI)", s, strings.Join(ABIs, ", "))
				}
				e.ABI = s
			}
		},
	})
	if n.Kind == yaml.MappingNode && !haveSource {
		d.fail(n, "source", "missing (want builtin:NAME or a path to a .wasm file)")
	}
	return e
}

func (d *decoder) grants(n *yaml.Node, field string) Grants {
	var g Grants
	d.fields(n, field, map[string]func(*yaml.Node, string){
		"fs": func(v *yaml.Node, f string) {
			d.list(v, f, func(item *yaml.Node, f string) {
				if fs, ok := d.fsGrant(item, f); ok {
					g.FS = append(g.FS, fs)
				}
			})
		},
		"exec":   func(v *yaml.Node, f string) { g.Exec = d.exec(v, f) },
		"net":    func(v *yaml.Node, f string) { g.Net = d.net(v, f) },
		"env":    func(v *yaml.Node, f string) { g.Env = d.strings(v, f, checkEnvName) },
		"limits": func(v *yaml.Node, f string) { g.Limits = d.limits(v, f) },
		"session_events": func(v *yaml.Node, f string) {
			g.SessionEvents = d.strings(v, f, CheckSessionEventType)
		},
		"prompt":    func(v *yaml.Node, f string) { g.Prompt = d.promptGrant(v, f) },
		"events":    func(v *yaml.Node, f string) { g.Events = d.strings(v, f, checkEventGrant) },
		"subagents": func(v *yaml.Node, f string) { g.Subagents = d.strings(v, f, CheckSubagentProvider) },
	})
	if g.Exec.Timeout != 0 && g.Exec.MaxTimeout != 0 && g.Exec.Timeout > g.Exec.MaxTimeout {
		d.fail(n, join(field, "exec.timeout"), "%v exceeds max_timeout %v", g.Exec.Timeout, g.Exec.MaxTimeout)
	}
	if msg := g.checkWallExec(); msg != "" {
		d.fail(wallNode(n), join(field, "limits.wall_timeout"), "%s", msg)
	}
	return g
}

// wallNode finds grants.limits.wall_timeout's node under a grants
// mapping, for the error's line; the mapping itself when absent.
func wallNode(grants *yaml.Node) *yaml.Node {
	find := func(m *yaml.Node, key string) *yaml.Node {
		if m == nil || m.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == key {
				return resolve(m.Content[i+1])
			}
		}
		return nil
	}
	if v := find(find(grants, "limits"), "wall_timeout"); v != nil {
		return v
	}
	return grants
}

func (d *decoder) fsGrant(n *yaml.Node, field string) (FSGrant, bool) {
	if isNull(n) || n.Kind != yaml.MappingNode {
		d.fail(n, field, "want a mapping like {path: /data, mode: ro}, got %s", describeOrNothing(n))
		return FSGrant{}, false
	}
	var g FSGrant
	ok, havePath := true, false
	d.fields(n, field, map[string]func(*yaml.Node, string){
		"path": func(v *yaml.Node, f string) {
			havePath = true
			s, good := d.str(v, f)
			if !good {
				ok = false
				return
			}
			if msg := checkFSPath(s); msg != "" {
				d.fail(v, f, "%s", msg)
				ok = false
				return
			}
			g.Path = normalizeFSPath(s)
		},
		"mode": func(v *yaml.Node, f string) {
			s, good := d.str(v, f)
			if !good {
				ok = false
				return
			}
			if msg := checkMode(FSMode(s)); msg != "" {
				d.fail(v, f, "%s", msg)
				ok = false
				return
			}
			g.Mode = FSMode(s)
		},
	})
	if !havePath {
		d.fail(n, join(field, "path"), "missing (want an absolute path or the word workspace)")
		ok = false
	}
	return g, ok
}

func (d *decoder) exec(n *yaml.Node, field string) ExecGrant {
	var g ExecGrant
	d.fields(n, field, map[string]func(*yaml.Node, string){
		"allowed":     func(v *yaml.Node, f string) { g.Allowed = d.boolean(v, f) },
		"timeout":     func(v *yaml.Node, f string) { g.Timeout = d.duration(v, f) },
		"max_timeout": func(v *yaml.Node, f string) { g.MaxTimeout = d.duration(v, f) },
		"output_bytes": func(v *yaml.Node, f string) {
			g.OutputBytes = d.size(v, f, 1, MaxOutputBytes)
		},
		"env":     func(v *yaml.Node, f string) { g.Env = d.strings(v, f, checkExecEnv) },
		"sandbox": func(v *yaml.Node, f string) { g.Sandbox = d.boolean(v, f) },
		"max_processes": func(v *yaml.Node, f string) {
			g.MaxProcesses = d.count(v, f, 1, MaxProcesses)
		},
		"memory":     func(v *yaml.Node, f string) { g.Memory = d.size(v, f, MinExecMemory, MaxExecMemory) },
		"file_bytes": func(v *yaml.Node, f string) { g.FileBytes = d.size(v, f, 1, MaxFileBytes) },
	})
	return g
}

func (d *decoder) net(n *yaml.Node, field string) NetGrant {
	var g NetGrant
	d.fields(n, field, map[string]func(*yaml.Node, string){
		"allowed_hosts": func(v *yaml.Node, f string) { g.AllowedHosts = d.strings(v, f, checkHostPattern) },
		"allow_private": func(v *yaml.Node, f string) { g.AllowPrivate = d.boolean(v, f) },
		"timeout":       func(v *yaml.Node, f string) { g.Timeout = d.duration(v, f) },
		"response_bytes": func(v *yaml.Node, f string) {
			g.ResponseBytes = d.size(v, f, 1, MaxResponse)
		},
	})
	return g
}

func (d *decoder) limits(n *yaml.Node, field string) Limits {
	var l Limits
	d.fields(n, field, map[string]func(*yaml.Node, string){
		"memory":       func(v *yaml.Node, f string) { l.Memory = d.size(v, f, 1, MaxMemory) },
		"call_timeout": func(v *yaml.Node, f string) { l.CallTimeout = d.duration(v, f) },
		"init_timeout": func(v *yaml.Node, f string) { l.InitTimeout = d.duration(v, f) },
		"wall_timeout": func(v *yaml.Node, f string) { l.WallTimeout = d.duration(v, f) },
		"host_bytes":   func(v *yaml.Node, f string) { l.HostBytes = d.size(v, f, MinHostBytes, MaxHostBytes) },
		"prompt_bytes": func(v *yaml.Node, f string) { l.PromptBytes = d.size(v, f, 1, MaxPromptBytes) },
		"log_bytes":    func(v *yaml.Node, f string) { l.LogBytes = d.size(v, f, 1, MaxLogBytes) },
		"state_bytes":  func(v *yaml.Node, f string) { l.StateBytes = d.size(v, f, 1, MaxStateBytes) },
		"disk_bytes":   func(v *yaml.Node, f string) { l.DiskBytes = d.size(v, f, 1, MaxDiskBytes) },
		"disk_files":   func(v *yaml.Node, f string) { l.DiskFiles = d.count(v, f, 1, MaxDiskFiles) },
		"max_registrations": func(v *yaml.Node, f string) {
			l.MaxRegistrations = d.count(v, f, 1, MaxRegistrations)
		},
		"snapshot": func(v *yaml.Node, f string) {
			b := d.boolean(v, f)
			l.Snapshot = &b
		},
	})
	if msg := l.checkWall(); msg != "" {
		d.fail(wallNode(&yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: "limits"}, n}, Line: n.Line}), join(field, "wall_timeout"), "%s", msg)
	}
	return l
}

// jsonValue converts a YAML node to a JSON-compatible Go value, refusing
// what JSON cannot carry (non-string keys, NaN, infinities, binary data).
func (d *decoder) jsonValue(n *yaml.Node, field string, depth int) any {
	d.budget--
	if d.budget < 0 {
		if d.budget == -1 {
			d.fail(n, field, "config too large (more than %d values after alias expansion)", maxConfigNodes)
		}
		return nil
	}
	if depth > maxConfigDepth {
		d.fail(n, field, "nesting deeper than %d (recursive alias?)", maxConfigDepth)
		return nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		for _, p := range d.pairs(n, field, depth) {
			if p.key.Kind != yaml.ScalarNode || p.key.ShortTag() != "!!str" {
				d.fail(p.key, field, "map key %s is not a string; quote it", describe(p.key))
				continue
			}
			m[p.key.Value] = d.jsonValue(p.value, join(field, p.key.Value), depth+1)
		}
		return m
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, item := range n.Content {
			out = append(out, d.jsonValue(resolve(item), fmt.Sprintf("%s[%d]", field, i), depth+1))
		}
		return out
	case yaml.ScalarNode:
		return d.jsonScalar(n, field)
	}
	d.fail(n, field, "unsupported YAML node")
	return nil
}

func (d *decoder) jsonScalar(n *yaml.Node, field string) any {
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!str":
		if !utf8.ValidString(n.Value) {
			d.fail(n, field, "string is not valid UTF-8")
		}
		return n.Value
	case "!!bool", "!!int":
		var v any
		if err := n.Decode(&v); err != nil {
			d.fail(n, field, "bad %s: %v", describe(n), err)
			return nil
		}
		if _, isFloat := v.(float64); isFloat {
			// an integer beyond 64 bits, which yaml.v3 gives as a float
			d.fail(n, field, "integer %s does not fit in 64 bits", n.Value)
			return nil
		}
		return v
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			d.fail(n, field, "bad %s: %v", describe(n), err)
			return nil
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			d.fail(n, field, "%s cannot be represented in JSON", n.Value)
			return nil
		}
		return f
	case "!!timestamp":
		// JSON has no time type: pass the text as written.
		return n.Value
	}
	d.fail(n, field, "%s cannot be represented in JSON", describe(n))
	return nil
}

func (d *decoder) promptGrant(n *yaml.Node, field string) PromptGrant {
	var g PromptGrant
	d.fields(n, field, map[string]func(*yaml.Node, string){
		"order": func(v *yaml.Node, f string) {
			if v == nil || v.Kind != yaml.SequenceNode || len(v.Content) != 2 {
				d.fail(v, f, "want a range [lo, hi] of two integers, got %s", describeOrNothing(v))
				return
			}
			var r [2]int
			for i, item := range v.Content {
				item = resolve(item)
				if item == nil || item.Kind != yaml.ScalarNode || item.ShortTag() != "!!int" || item.Decode(&r[i]) != nil {
					d.fail(item, fmt.Sprintf("%s[%d]", f, i), "want an integer, got %s", describeOrNothing(item))
					return
				}
			}
			if msg := checkOrderRange(&r); msg != "" {
				d.fail(v, f, "%s", msg)
				return
			}
			g.Order = &r
		},
	})
	return g
}
