// Package hostfns defines the dsh:host/v1 ABI between the dsh-wasm host
// and its plugins: the host functions a plugin imports, the functions it
// exports, their calling convention, status codes and JSON messages.
//
// It is defined once, here, and imported by both sides: the host's
// implementation (internal/plugin) and the Go guest SDK (hostfns/guest).
// This package imports neither wazero nor extism, so it builds for the
// host and for wasip1 alike. docs/ABI.md is the plugin author's guide.
//
// # Calling convention
//
// Every host function has the signature
//
//	(in_ptr, in_len, out_ptr, out_cap i32) -> i64
//
// The request is in_len bytes of JSON at in_ptr in the guest's own memory.
// The result word packs a status and a length: status is the high 32 bits
// (StatusOK or an error code), n the low 32. The n payload bytes — the
// response on success, a UTF-8 message on error — are written at out_ptr
// when n <= out_cap. Otherwise the host keeps them, and the guest allocates
// n bytes and calls take(ptr, n) to copy them; the next host call discards
// what was not taken.
//
// The host calls the guest's exports with (ptr, len i32) -> i64: it asks
// dsh_alloc for len bytes, writes the input there, and calls the export.
// The export returns ptr<<32 | len of its output in guest memory (0 for an
// empty success). The output's first byte is an OutStatus; the rest is the
// payload. Inputs to per-call exports are frames: NUL-separated fields
// (names cannot contain NUL, and JSON never does), so the hot path needs
// no JSON envelope.
package hostfns

import "encoding/json"

// Module is the import module of every host function.
const Module = "dsh:host/v1"

// ABIVersion is the version a plugin's dsh_abi_version export must return.
const ABIVersion = 1

// Exports a plugin provides. Only ExportABIVersion, ExportAlloc and
// ExportInit are required; the others are needed by plugins that use them
// (a plugin with a dynamic section must export ExportSection, and so on).
const (
	// dsh_abi_version() -> i32: must return ABIVersion.
	ExportABIVersion = "dsh_abi_version"
	// dsh_alloc(size i32) -> i32: a pointer to size writable bytes, valid
	// until the next export call. Must not return 0 for size > 0.
	ExportAlloc = "dsh_alloc"
	// dsh_init(config): called once per load, in the load-time instance,
	// with the plugin's config JSON. What it registers is the plugin's
	// contribution; registration is allowed only in this instance.
	ExportInit = "dsh_init"
	// dsh_setup(config): called once in each per-agent instance, with the
	// same config. Registration calls from a per-agent instance fail with
	// ErrDenied.
	ExportSetup = "dsh_setup"
	// dsh_section(name NUL context): the text of a dynamic section.
	ExportSection = "dsh_section"
	// dsh_variable(name NUL context): a variable's value, or OutNoValue.
	ExportVariable = "dsh_variable"
	// dsh_tool(name NUL context NUL arguments): runs a tool. The output
	// payload is the result text; OutError marks a failure, its payload
	// the message (the model reads "Error: " and it); OutResult carries a
	// ToolOutput.
	ExportTool = "dsh_tool"
	// dsh_event(event NUL context NUL payload): an event the plugin
	// subscribed to. For a waterfall, the output payload is the (possibly
	// modified) payload JSON; empty means unchanged.
	ExportEvent = "dsh_event"
	// _initialize: the WASI reactor initialiser, called before anything
	// else when present.
	ExportInitialize = "_initialize"
)

// OutStatus is the first byte of an export's output.
type OutStatus byte

// Export output statuses.
const (
	OutOK      OutStatus = 0
	OutError   OutStatus = 1 // payload is an error message
	OutNoValue OutStatus = 2 // dsh_variable only: no value this time
	OutResult  OutStatus = 3 // dsh_tool only: payload is a ToolOutput JSON object
)

// ToolOutput is a dsh_tool result with more than text (OutResult): data
// for the front ends beside the text, or a failure's identity.
type ToolOutput struct {
	// Text is what the model reads: the result, or the failure's message
	// when Error is set.
	Text string `json:"text"`
	// Meta, when set, is a JSON object for displays (a write's or an
	// edit's diffs, say), recorded with the result; the model never
	// sees it. At most MaxToolMeta bytes.
	Meta json.RawMessage `json:"meta,omitempty"`
	// Error, when set, makes the result a failure that programs can tell
	// apart: Name (FsError) and Code (FS_NOT_OBSERVED), each 1 to
	// MaxToolErrorField ASCII letters, digits and underscores.
	Error *ToolFailure `json:"error,omitempty"`
}

// ToolFailure identifies a tool's failure.
type ToolFailure struct {
	Name string `json:"name"`
	Code string `json:"code"`
}

// Bounds on a ToolOutput.
const (
	MaxToolMeta       = 1 << 20
	MaxToolErrorField = 64
)

// FrameSep separates the fields of an export's input frame.
const FrameSep = 0

// Status is a host function's result status, the high half of its i64.
type Status uint32

// Host function statuses. The payload of an error status is a message.
const (
	StatusOK          Status = 0
	ErrBadPointer     Status = 1  // a pointer/length pair is outside guest memory, or in and out overlap
	ErrBadUTF8        Status = 2  // a string is not UTF-8
	ErrBadJSON        Status = 3  // the request is not valid JSON of the expected shape
	ErrRule           Status = 4  // a registration broke a rule (duplicate or malformed name)
	ErrDenied         Status = 5  // not granted, or not allowed in this phase
	ErrNotFound       Status = 6  // no such thing (unregistering what the plugin does not own, say)
	ErrTooLarge       Status = 7  // a request or result exceeds a size limit
	ErrLimit          Status = 8  // a count limit was reached (registrations, handles)
	ErrInternal       Status = 9  // the host failed; the message says how
	ErrTimeout        Status = 10 // a host operation ran out of time
	ErrCanceled       Status = 11 // the call's context was cancelled
	ErrUnknownVersion Status = 12 // reserved: refusal of an unknown ABI version
)

var statusNames = map[Status]string{
	StatusOK: "ok", ErrBadPointer: "bad pointer", ErrBadUTF8: "bad UTF-8", ErrBadJSON: "bad JSON",
	ErrRule: "rule broken", ErrDenied: "denied", ErrNotFound: "not found", ErrTooLarge: "too large",
	ErrLimit: "limit reached", ErrInternal: "internal error", ErrTimeout: "timeout",
	ErrCanceled: "canceled", ErrUnknownVersion: "unknown ABI version",
}

func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return "status " + itoa(uint32(s))
}

func itoa(u uint32) string {
	if u == 0 {
		return "0"
	}
	var b [10]byte
	i := len(b)
	for u > 0 {
		i--
		b[i] = byte('0' + u%10)
		u /= 10
	}
	return string(b[i:])
}

// Pack makes a host function's result word.
func Pack(s Status, n uint32) uint64 { return uint64(s)<<32 | uint64(n) }

// Unpack splits a host function's result word.
func Unpack(r uint64) (Status, uint32) { return Status(r >> 32), uint32(r) }

// PackPtr makes an export's result word.
func PackPtr(ptr, n uint32) uint64 { return uint64(ptr)<<32 | uint64(n) }

// UnpackPtr splits an export's result word.
func UnpackPtr(r uint64) (ptr, n uint32) { return uint32(r >> 32), uint32(r) }

// Host function names. Funcs lists them with their request and response
// types; the host implements exactly these, and a test checks that the
// guest SDK imports exactly these.
const (
	FnTake               = "take"
	FnLog                = "log"
	FnSectionRegister    = "section_register"
	FnSectionUnregister  = "section_unregister"
	FnVariableRegister   = "variable_register"
	FnVariableUnregister = "variable_unregister"
	FnToolRegister       = "tool_register"
	FnToolUnregister     = "tool_unregister"
	FnEventSubscribe     = "event_subscribe"
	FnEventEmit          = "event_emit"
	FnCapabilities       = "capabilities_declare"
	FnStateGet           = "state_get"
	FnStateSet           = "state_set"
	FnEnvGet             = "env_get"
	FnExecRun            = "exec_run"
	FnExecStart          = "exec_start"
	FnExecPoll           = "exec_poll"
	FnExecKill           = "exec_kill"
	FnHTTPRequest        = "http_request"
	FnSessionEventAppend = "session_event_append"
	FnSubagentProviders  = "subagent_providers"
	FnSubagentRun        = "subagent_run"
)

// Func describes one host function.
type Func struct {
	Name string
	// Phase says when the function may be called.
	Phase Phase
	// Request and Response are zero values of the JSON messages, nil for
	// raw or empty ones. Documentation and tests use them.
	Request, Response any
	Doc               string
}

// Phase is when a host function may be called.
type Phase int

const (
	// AnyPhase: from any instance, at any time.
	AnyPhase Phase = iota
	// LoadInstance: only from the load-time instance (during dsh_init, or
	// while it handles an event that belongs to no agent); from a per-agent
	// instance ErrDenied.
	LoadInstance
)

// Funcs is the whole host-function table of ABI version 1.
var Funcs = []Func{
	{Name: FnTake, Doc: "take(ptr, n i32) -> i32 (a special signature): copy the pending oversized payload of the previous host call to ptr; returns n, or -1 if there is none or n differs."},
	{Name: FnLog, Request: LogRequest{}, Doc: "Log a message through the host's logger, tagged with the plugin's name."},
	{Name: FnSectionRegister, Phase: LoadInstance, Request: SectionRequest{}, Doc: "Register a prompt section: static text, or dynamic (the host calls dsh_section per assembly)."},
	{Name: FnSectionUnregister, Phase: LoadInstance, Request: NameRequest{}, Doc: "Remove a section this plugin registered."},
	{Name: FnVariableRegister, Phase: LoadInstance, Request: NameRequest{}, Doc: "Register a prompt variable; the host calls dsh_variable per assembly."},
	{Name: FnVariableUnregister, Phase: LoadInstance, Request: NameRequest{}, Doc: "Remove a variable this plugin registered."},
	{Name: FnToolRegister, Phase: LoadInstance, Request: ToolRequest{}, Doc: "Register a tool; the host calls dsh_tool to run it."},
	{Name: FnToolUnregister, Phase: LoadInstance, Request: NameRequest{}, Doc: "Remove a tool this plugin registered."},
	{Name: FnEventSubscribe, Phase: LoadInstance, Request: SubscribeRequest{}, Doc: "Subscribe to an event during dsh_init; the host calls dsh_event."},
	{Name: FnEventEmit, Request: EmitRequest{}, Doc: "Emit an event in the plugin's own namespace, plugin:<name>/<event>."},
	{Name: FnCapabilities, Phase: LoadInstance, Request: Capabilities{}, Doc: "Declare the capabilities the plugin needs; loading fails if they are not granted."},
	{Name: FnStateGet, Request: StateGetRequest{}, Response: StateGetResponse{}, Doc: "Read a value of the plugin's host-side state for the calling agent's session."},
	{Name: FnStateSet, Request: StateSetRequest{}, Doc: "Write a value of the plugin's host-side state for the calling agent's session; null deletes."},
	{Name: FnEnvGet, Request: NameRequest{}, Response: EnvGetResponse{}, Doc: "Read a host environment variable the plugin is granted."},
	{Name: FnExecRun, Request: ExecRequest{}, Response: ExecResult{}, Doc: "Run a command and wait for it (grants.exec). Blocks under the command's timeout, not the compute budget."},
	{Name: FnExecStart, Request: ExecRequest{}, Response: ExecStatus{}, Doc: "Start a background command (grants.exec); the response carries its id."},
	{Name: FnExecPoll, Request: TaskRequest{}, Response: ExecStatus{}, Doc: "Poll a background command: its output so far, or its result."},
	{Name: FnExecKill, Request: TaskRequest{}, Response: ExecStatus{}, Doc: "Kill a background command and everything it started."},
	{Name: FnHTTPRequest, Request: HTTPRequest{}, Response: HTTPResponse{}, Doc: "Make an HTTP(S) request to a granted host (grants.net); every redirect hop is checked."},
	{Name: FnSessionEventAppend, Request: SessionEventRequest{}, Doc: "Record an event of a granted type (grants.session_events) in the calling agent's session."},
	{Name: FnSubagentProviders, Response: SubagentProviders{}, Doc: "List the deployment's subagent providers with their facts."},
	{Name: FnSubagentRun, Request: SubagentRunRequest{}, Response: SubagentRunResponse{}, Doc: "Run a child agent on a granted provider (grants.subagents) from a tool call and wait for its end."},
}

// LogRequest is the request of log. Level is debug, info, warn or error.
type LogRequest struct {
	Level   string `json:"level"`
	Message string `json:"message"`
}

// SectionRequest is the request of section_register. A dynamic section's
// Text is ignored; the host asks dsh_section for it at each assembly.
type SectionRequest struct {
	Name    string `json:"name"`
	Order   int    `json:"order"`
	Text    string `json:"text,omitempty"`
	Dynamic bool   `json:"dynamic,omitempty"`
}

// NameRequest is the request of the functions that take only a name.
type NameRequest struct {
	Name string `json:"name"`
}

// ToolRequest is the request of tool_register. Parameters is a JSON Schema
// object.
type ToolRequest struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Subscription modes.
const (
	// ModeListen: the handler is told; its output is ignored.
	ModeListen = "listen"
	// ModeWaterfall: the handler returns the payload, modified or not.
	ModeWaterfall = "waterfall"
)

// SubscribeRequest is the request of event_subscribe.
type SubscribeRequest struct {
	Event string `json:"event"`
	Mode  string `json:"mode,omitempty"` // ModeListen (default) or ModeWaterfall
}

// EmitRequest is the request of event_emit.
type EmitRequest struct {
	Event   string          `json:"event"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// Capabilities is what a plugin declares it needs. Loading a plugin whose
// needs are not granted fails, naming the missing grant.
type Capabilities struct {
	FS   []FSNeed `json:"fs,omitempty"`
	Exec bool     `json:"exec,omitempty"`
	Net  []string `json:"net,omitempty"` // host names
	Env  []string `json:"env,omitempty"` // variable names
	// SessionEvents are the session event types the plugin appends with
	// session_event_append.
	SessionEvents []string `json:"session_events,omitempty"`
}

// FSNeed is one filesystem need: Path is "workspace" or an absolute path;
// Mode is "ro" or "rw".
type FSNeed struct {
	Path string `json:"path"`
	Mode string `json:"mode"`
}

// StateGetRequest is the request of state_get.
type StateGetRequest struct {
	Key string `json:"key"`
}

// StateGetResponse is the response of state_get.
type StateGetResponse struct {
	Found bool            `json:"found"`
	Value json.RawMessage `json:"value,omitempty"`
}

// StateSetRequest is the request of state_set; a null or absent Value
// deletes the key.
type StateSetRequest struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value,omitempty"`
}

// EnvGetResponse is the response of env_get.
type EnvGetResponse struct {
	Found bool   `json:"found"`
	Value string `json:"value,omitempty"`
}

// ExecRequest is the request of exec_run and exec_start. Exactly one of
// Command (run as bash -c) and Argv is set. Cwd must lie inside a granted
// fs root; empty means the first (the workspace, when granted).
type ExecRequest struct {
	Command   string   `json:"command,omitempty"`
	Argv      []string `json:"argv,omitempty"`
	Cwd       string   `json:"cwd,omitempty"`
	Stdin     string   `json:"stdin,omitempty"`
	TimeoutMs int64    `json:"timeout_ms,omitempty"`
	// SpillDir, when set, is an absolute directory inside a writable
	// granted fs root: a stream that outgrows the output cap is saved
	// there whole (up to MaxSpillBytes), and its ExecOutput.SpillPath
	// names the file.
	SpillDir string `json:"spill_dir,omitempty"`
}

// MaxSpillBytes bounds the file one stream of one command may spill; a
// stream longer than that has SpillTruncated set.
const MaxSpillBytes = 64 << 20

// ExecOutput is one captured stream. When the stream exceeded the cap,
// Data keeps its head and tail and Omitted bytes in between were dropped.
type ExecOutput struct {
	Data      string `json:"data"`
	Truncated bool   `json:"truncated,omitempty"`
	Omitted   int64  `json:"omitted,omitempty"`
	// OmittedAt is the offset in Data where the dropped bytes were (the
	// length of the head), when Truncated.
	OmittedAt int   `json:"omitted_at,omitempty"`
	Total     int64 `json:"total"`
	// SpillPath is the host path of the file holding the whole stream,
	// set when the request had SpillDir and the stream outgrew the cap.
	SpillPath string `json:"spill_path,omitempty"`
	// SpillTruncated: the stream outgrew MaxSpillBytes too, and the file
	// holds only its first MaxSpillBytes.
	SpillTruncated bool `json:"spill_truncated,omitempty"`
}

// ExecResult is how a command ended. ExitCode is -1 when a signal ended
// it.
type ExecResult struct {
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
	Canceled bool   `json:"canceled,omitempty"`
	// OutOfMemory: the commands reached grants.exec.memory and the
	// kernel's OOM killer killed one of their processes meanwhile.
	OutOfMemory bool       `json:"out_of_memory,omitempty"`
	Stdout      ExecOutput `json:"stdout"`
	Stderr      ExecOutput `json:"stderr"`
	DurationMs  int64      `json:"duration_ms"`
}

// TaskRequest names a background command.
type TaskRequest struct {
	ID string `json:"id"`
}

// ExecStatus is a background command's state; Result is partial while
// Running.
type ExecStatus struct {
	ID      string     `json:"id"`
	Running bool       `json:"running"`
	Result  ExecResult `json:"result"`
}

// HTTPRequest is the request of http_request. Body is sent as is;
// BodyBase64 is decoded first; at most one is set.
type HTTPRequest struct {
	Method     string            `json:"method,omitempty"`
	URL        string            `json:"url"`
	Headers    map[string]string `json:"headers,omitempty"`
	Body       string            `json:"body,omitempty"`
	BodyBase64 string            `json:"body_base64,omitempty"`
}

// HTTPResponse is the response of http_request. Body holds a UTF-8 body,
// BodyBase64 any other; Truncated says the body exceeded the granted cap.
type HTTPResponse struct {
	Status     int                 `json:"status"`
	URL        string              `json:"url"`
	Headers    map[string][]string `json:"headers,omitempty"`
	Body       string              `json:"body,omitempty"`
	BodyBase64 string              `json:"body_base64,omitempty"`
	Truncated  bool                `json:"truncated,omitempty"`
}

// SessionEventRequest is the request of session_event_append: an event of
// Type, granted to the plugin in grants.session_events, with Data, a JSON
// object, as its payload.
type SessionEventRequest struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// SubagentProvider is one provider in the response of subagent_providers.
// InheritsParentContext says whether its children see the parent's
// completed turns (a fork) or start fresh (a spawn).
type SubagentProvider struct {
	Name                  string `json:"name"`
	InheritsParentContext bool   `json:"inheritsParentContext"`
	OutputSchema          bool   `json:"outputSchema,omitempty"`
	ToolFilter            bool   `json:"toolFilter,omitempty"`
	MaxDepth              int    `json:"maxDepth,omitempty"`
}

// SubagentProviders is the response of subagent_providers, and the payload
// of the subagent/provider-added and subagent/provider-removed events a
// plugin receives (with one provider).
type SubagentProviders struct {
	Providers []SubagentProvider `json:"providers"`
}

// SubagentRunRequest is the request of subagent_run: the child's task in
// the words the model gave it.
type SubagentRunRequest struct {
	Provider    string `json:"provider"`
	Description string `json:"description"`
	Prompt      string `json:"prompt"`
}

// SubagentRunResponse is how the child ended: StopReason is "completed"
// when it finished its turn, and Text is its last assistant message.
type SubagentRunResponse struct {
	StopReason   string `json:"stop_reason"`
	Text         string `json:"text"`
	ChildSession string `json:"child_session,omitempty"`
}

// CallContext is the context JSON passed to dsh_section, dsh_variable,
// dsh_tool and dsh_event: the facts of the agent the call is for. Every
// field may be absent.
type CallContext struct {
	AgentID   string `json:"agentId,omitempty"`
	SessionID string `json:"sessionId,omitempty"`
	Model     string `json:"model,omitempty"`
	Cwd       string `json:"cwd,omitempty"`
	Depth     int    `json:"depth,omitempty"`
	Parent    string `json:"parent,omitempty"`
}

// Limits on what a guest may send.
const (
	MaxRequestBytes = 4 << 20  // one host-function request
	MaxOutputBytes  = 16 << 20 // one export's output
)
