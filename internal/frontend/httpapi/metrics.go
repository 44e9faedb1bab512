package httpapi

import (
	"fmt"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// metrics are the counters /metrics exposes in Prometheus' text format.
type metrics struct {
	running   atomic.Int64
	refused   atomic.Int64 // 429
	conflicts atomic.Int64 // 409
	toolCalls atomic.Int64
	toolMs    atomic.Int64 // tool call → result, summed

	mu    sync.Mutex
	turns map[string]int64 // by end kind
}

func newMetrics() *metrics { return &metrics{turns: map[string]int64{}} }

// observe counts what an event of a running turn says.
func (m *metrics) observe(e session.Event, calls map[string]int64) {
	switch e.Type {
	case session.TypeToolCall:
		if c, err := session.As[session.ToolCall](e); err == nil {
			m.toolCalls.Add(1)
			calls[c.CallID] = e.Time
		}
	case session.TypeToolResult:
		if r, err := session.As[session.ToolResult](e); err == nil {
			if t, ok := calls[r.CallID]; ok {
				m.toolMs.Add(e.Time - t)
				delete(calls, r.CallID)
			}
		}
	case session.TypeTurnEnd:
		if te, err := session.As[session.TurnEnd](e); err == nil {
			m.mu.Lock()
			m.turns[te.Reason.Kind]++
			m.mu.Unlock()
		}
	}
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	m := s.metrics
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintln(w, "# HELP dsh_turns_total Turns ended on this worker, by end kind.")
	fmt.Fprintln(w, "# TYPE dsh_turns_total counter")
	m.mu.Lock()
	kinds := make([]string, 0, len(m.turns))
	for k := range m.turns {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(w, "dsh_turns_total{kind=%q} %d\n", k, m.turns[k])
	}
	m.mu.Unlock()
	fmt.Fprintln(w, "# HELP dsh_turns_running Turns running on this worker.")
	fmt.Fprintln(w, "# TYPE dsh_turns_running gauge")
	fmt.Fprintf(w, "dsh_turns_running %d\n", m.running.Load())
	fmt.Fprintln(w, "# HELP dsh_turns_refused_total Prompts refused by a concurrency limit (429).")
	fmt.Fprintln(w, "# TYPE dsh_turns_refused_total counter")
	fmt.Fprintf(w, "dsh_turns_refused_total %d\n", m.refused.Load())
	fmt.Fprintln(w, "# HELP dsh_turns_conflict_total Prompts refused because a turn of the session ran (409).")
	fmt.Fprintln(w, "# TYPE dsh_turns_conflict_total counter")
	fmt.Fprintf(w, "dsh_turns_conflict_total %d\n", m.conflicts.Load())
	fmt.Fprintln(w, "# HELP dsh_tool_calls_total Tool calls made by turns on this worker.")
	fmt.Fprintln(w, "# TYPE dsh_tool_calls_total counter")
	fmt.Fprintf(w, "dsh_tool_calls_total %d\n", m.toolCalls.Load())
	fmt.Fprintln(w, "# HELP dsh_plugin_tool_seconds_total Time from tool call to tool result (plugin tool time), summed.")
	fmt.Fprintln(w, "# TYPE dsh_plugin_tool_seconds_total counter")
	fmt.Fprintf(w, "dsh_plugin_tool_seconds_total %.3f\n", float64(m.toolMs.Load())/1000)
	live := s.cfg.Deployment.PluginInstances()
	fmt.Fprintln(w, "# HELP dsh_plugin_instances_live Plugin instances open on this worker.")
	fmt.Fprintln(w, "# TYPE dsh_plugin_instances_live gauge")
	fmt.Fprintf(w, "dsh_plugin_instances_live %d\n", live)
}
