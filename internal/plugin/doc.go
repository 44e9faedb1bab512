// Package plugin is dsh-wasm's plugin host: it loads WebAssembly plugins
// that speak the dsh:host/v1 ABI (package hostfns) and runs them on
// wazero.
//
// # Embedding
//
// New makes a Host over a prompt.Registry. Load, Reload and Unload manage
// plugins, each described by a Spec whose Grants are its whole policy,
// limits and environment included, resolved as a deployment file's are
// (SpecFromEntry builds one from a config entry); CallTool runs a tool for
// an agent, and the registry assembles the prompt from what the plugins
// registered.
// EndAgent closes an agent's instances and Close unloads every plugin. The
// examples walk through each step with the built-in plugins of package
// guests.
//
// # Instance model
//
// A plugin is compiled once per load (through the persistent compilation
// cache, so a warm load skips the compiler). Its instances are:
//
//   - The load-time instance. dsh_init runs in it once, with the plugin's
//     config, inside one registry update: what it registers is the
//     plugin's contribution, committed atomically when init returns, and
//     discarded if init fails. It lives until the plugin unloads and runs
//     the events that belong to no agent. Only it may register.
//   - One instance per agent, created lazily on the agent's first call
//     into the plugin (a provider, a tool or an event for that agent). It
//     gets the same config through dsh_setup, where registration calls
//     fail. It is never shared with another agent, and it is closed when
//     the agent ends (Host.EndAgent).
//
// Instances are created concurrently and safely; calls into one instance
// are serialised. An instance that traps or exceeds its compute budget is
// discarded, and the next call creates a fresh one. State that must
// outlive an instance lives on the host, scoped to (plugin, session),
// behind state_get and state_set.
//
// # Compute budget
//
// Every export call runs under the plugin's call timeout (init under its
// init timeout). The budget counts guest compute and the host's work for
// the guest; only waits another grant bounds (exec_run, http_request) are
// left out, outside init. A wall-clock cap (grants.limits.wall_timeout) counts
// everything. Unload, EndAgent and Close stop calls in progress instead
// of waiting for them, and a wait-for graph refuses call cycles between
// instances (ErrDeadlock). A
// watchdog goroutine per host (running only while calls happen) checks
// the calls in progress every few milliseconds; when a budget runs out or
// the caller's context ends, it sets the module's interrupt flag, the
// guest traps at its next check, and the call fails with ErrComputeBudget
// or "call cancelled". Modules that could not be instrumented are closed
// by wazero instead (WithCloseOnContextDone).
package plugin
