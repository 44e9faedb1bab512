package plugin

import "github.com/dsh-wasm/dsh-wasm/internal/plugin/internal/abi/dsh"

// Bounds are the limits a loaded plugin runs under and how much of its
// quotas its registrations use: what `dsh-wasm plugin inspect` shows and
// docs/SECURITY.md lists.
type Bounds struct {
	MemoryBytes uint64 `json:"memory_bytes"`
	// CallTimeout is the compute budget of a call: guest code and the
	// host's work for it; waits bounded by exec or net timeouts aside.
	CallTimeout string `json:"call_timeout"`
	InitTimeout string `json:"init_timeout"`
	// WallTimeout caps a call's wall-clock time, waits included.
	WallTimeout string `json:"wall_timeout"`
	// NetTimeout bounds one http_request (with a net grant).
	NetTimeout string `json:"net_timeout,omitempty"`
	// HostBytesPerCall caps what host functions read and produce for
	// one call.
	HostBytesPerCall int64 `json:"host_bytes_per_call"`
	// PromptBytes caps the plugin's prompt text; PromptBytesUsed is what
	// its static sections and its tools' names, descriptions and schemas
	// hold, whatever its ABI (contrib.register measures them).
	PromptBytes     int64 `json:"prompt_bytes"`
	PromptBytesUsed int64 `json:"prompt_bytes_used"`
	// LogBytesPerMinute caps its log records and stdio lines.
	LogBytesPerMinute int64 `json:"log_bytes_per_minute"`
	Registrations     int   `json:"registrations"`
	MaxRegistrations  int   `json:"max_registrations"`
	// StateBytesPerSession caps its host-side state in one session.
	StateBytesPerSession int64 `json:"state_bytes_per_session"`
	// SmallRequestBytes caps the requests of host functions that take a
	// name, a key or an id; they are refused before they are read.
	SmallRequestBytes int `json:"small_request_bytes"`
}

// Bounds reports the plugin's limits and quota use.
func (p *Plugin) Bounds() Bounds {
	l := p.limits
	c := p.contrib
	c.mu.Lock()
	regs, static := c.count(), c.static
	c.mu.Unlock()
	b := Bounds{
		MemoryBytes: uint64(l.MemoryPages) * 65536, CallTimeout: l.CallTimeout.String(), InitTimeout: l.InitTimeout.String(),
		WallTimeout: l.WallTimeout.String(), HostBytesPerCall: l.HostBytes, PromptBytes: l.PromptBytes, PromptBytesUsed: static,
		LogBytesPerMinute: l.LogBytes, Registrations: regs, MaxRegistrations: l.MaxRegistrations,
		StateBytesPerSession: l.StateBytes, SmallRequestBytes: dsh.SmallRequest,
	}
	if g := p.grants(); len(g.Net.AllowedHosts) > 0 {
		b.NetTimeout = g.Net.Timeout.String()
	}
	return b
}
