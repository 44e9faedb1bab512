package dsh

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/hostfns/jsonobj"
	"github.com/dsh-wasm/dsh-wasm/internal/pluginstate"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/execjail"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/fsjail"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/netguard"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/tetratelabs/wazero/api"
)

// Host is what the implementations of dsh:host/v1 need of the plugin
// host, for the call in progress: the call itself (its context, phase,
// agent and bounded waits), and the plugin's contribution, grants, jails
// and managers. The plugin host implements it on its instance; nothing
// here keeps a Host past the function that got it, except the closures
// the registry calls later, which the host builds.
type Host interface {
	// The call in progress.

	// Context is the caller's context, carrying the agent.
	Context() context.Context
	// Call is the call's phase and export.
	Call() Call
	// Facts are the calling agent's, nil for a call that belongs to none.
	Facts() *prompt.AgentFacts
	// Scope is the session the call's state, exec tasks and session
	// events belong to ("": no agent's).
	Scope() string
	// Stopped is why the call was stopped, or nil.
	Stopped() error
	// BoundedWait starts a wait another grant bounds (left out of the
	// compute budget, not of the wall-clock cap) and returns the context
	// to wait under, which ends when the call is stopped; EndBoundedWait
	// ends it.
	BoundedWait() context.Context
	EndBoundedWait()
	// StartSubagentRun counts a child the call starts; false when the
	// call already started max.
	StartSubagentRun(max int) bool
	// Scratch is the instance's reusable parse state and its result
	// awaiting take.
	Scratch() *Scratch
	// Memory is the calling instance's guest memory.
	Memory() api.Memory
	// ChargeHost counts n bytes of host work against the call's host byte
	// budget (Limits().HostBytes); false when it would pass it, and
	// nothing is charged then.
	ChargeHost(n int64) bool

	// The plugin.

	// Name is the plugin's name.
	Name() string
	// Limits are the plugin's effective limits, in the host's units.
	Limits() Limits
	// Grants are the plugin's run-time grants; nil when it has none.
	Grants() *config.Grants
	// EnvGranted tells whether grants.env lists name.
	EnvGranted(name string) bool
	// Logger is the plugin's; RateLog runs log unless the plugin's log
	// rate is spent (n bytes).
	Logger() *slog.Logger
	RateLog(n int, log func())

	// The contribution: what the plugin registers, owned by the host.

	// HasExport tells whether the module exports name.
	HasExport(name string) bool
	// DeclareCapabilities adds to what the plugin declares it needs.
	DeclareCapabilities(hostfns.Capabilities)
	// CheckSectionOrder refuses an order the plugin is not granted.
	CheckSectionOrder(name string, order int) error
	// RegisterSection registers s; dynamic: its text comes from the
	// plugin's dsh_section per assembly. RegisterVariable registers a
	// variable whose value comes from dsh_variable; RegisterTool a tool
	// called through dsh_tool. Subscribe records a subscription the
	// function checked (and joins the assemble waterfall with a hook).
	// Unregister removes what the plugin itself registered. Each answers
	// as the host function does.
	RegisterSection(s prompt.Section, dynamic bool) (hostfns.Status, string)
	RegisterVariable(name string) (hostfns.Status, string)
	RegisterTool(t prompt.Tool) (hostfns.Status, string)
	Subscribe(r hostfns.SubscribeRequest) (hostfns.Status, string)
	Unregister(kind, name string) (hostfns.Status, string)
	// CheckWaterfallGrant refuses a waterfall the plugin is not granted.
	CheckWaterfallGrant(event string) error
	// Emit emits event on the host's bus under the call; an error that is
	// a *DeniedError is the host's refusal (a deadlock, say).
	Emit(event string, payload json.RawMessage) error

	// Grants at run time.

	// State is the host's plugin state store.
	State() pluginstate.Store
	// ExecManager is the exec manager of the call's session, created on
	// first use, or the refusal.
	ExecManager() (*execjail.Manager, hostfns.Status, string)
	// FSRoots are the call's granted fs roots.
	FSRoots() ([]fsjail.Mount, error)
	// HostState names the host-state directory path lies in, or "".
	HostState(path string) string
	// DiskQuota is the plugin's disk quota; nil: none.
	DiskQuota() *fsjail.Quota
	// KeepSpills keeps a background task's spill writers, by its id in
	// the call's session; Spills returns them (zero: none).
	KeepSpills(id string, s Spills)
	Spills(id string) Spills
	// Net is the plugin's HTTP client under its net grants; nil: none.
	Net() *netguard.Fetcher
	// SessionQuota is the session events quota of the call's session.
	SessionQuota() *SessionQuota
	// Subagents are the host's subagent providers; CallSubagents those
	// the call's context carries (a deployment's, for its tool calls).
	// nil: none.
	Subagents() Subagents
	CallSubagents() Subagents
}

// Call is the phase and export of the call in progress.
type Call struct {
	Init   bool   // in dsh_init
	Setup  bool   // in dsh_setup
	Export string // the export called
	// LoadTime: the instance is the plugin's load-time instance.
	LoadTime bool
}

// Limits are the limits the host functions enforce, in the host's units.
type Limits struct {
	MaxRegistrations int
	StateBytes       int64
	HostBytes        int64
	PromptBytes      int64
}

// Scratch is an instance's reusable state for parsing requests, and the
// result of its last host call when it did not fit the out buffer.
type Scratch struct {
	Req jsonobj.Obj
	Buf []byte
	// Pending is a result awaiting take; it is gone at the next host call.
	Pending []byte
}

// DeniedError is a refusal by the host (an event whose handlers would
// deadlock, say): the guest gets ErrDenied with its message.
type DeniedError struct{ Err error }

func (e *DeniedError) Error() string { return e.Err.Error() }
func (e *DeniedError) Unwrap() error { return e.Err }

// Subagents is what the host functions need of a deployment's subagent
// providers (the plugin host's Subagents).
type Subagents interface {
	Providers() []hostfns.SubagentProvider
	Run(ctx context.Context, parent prompt.AgentFacts, req hostfns.SubagentRunRequest) (hostfns.SubagentRunResponse, error)
}

// Impl implements one host function: it gets the validated request bytes
// and returns a response payload, or an error status and message. req is
// a view of guest memory, valid only until the function returns: an
// implementation that keeps any of it copies it (Decode does).
type Impl func(h Host, req []byte) ([]byte, hostfns.Status, string)

// Impls is the table of dsh:host/v1: each function's name (take aside)
// and its implementation, one file per group: log, capabilities,
// register (sections, variables, tools), event, state, env, exec, http,
// session (session events) and subagent.
var Impls = map[string]Impl{
	hostfns.FnLog:                hostLog,
	hostfns.FnSectionRegister:    hostSectionRegister,
	hostfns.FnSectionUnregister:  hostUnregister("section"),
	hostfns.FnVariableRegister:   hostVariableRegister,
	hostfns.FnVariableUnregister: hostUnregister("variable"),
	hostfns.FnToolRegister:       hostToolRegister,
	hostfns.FnToolUnregister:     hostUnregister("tool"),
	hostfns.FnEventSubscribe:     hostEventSubscribe,
	hostfns.FnEventEmit:          hostEventEmit,
	hostfns.FnCapabilities:       hostCapabilities,
	hostfns.FnStateGet:           hostStateGet,
	hostfns.FnStateSet:           hostStateSet,
	hostfns.FnEnvGet:             hostEnvGet,
	hostfns.FnExecRun:            hostExecRun,
	hostfns.FnExecStart:          hostExecStart,
	hostfns.FnExecPoll:           hostExecTask(false),
	hostfns.FnExecKill:           hostExecTask(true),
	hostfns.FnHTTPRequest:        hostHTTPRequest,
	hostfns.FnSessionEventAppend: hostSessionEventAppend,
	hostfns.FnSubagentProviders:  hostSubagentProviders,
	hostfns.FnSubagentRun:        hostSubagentRun,
}
