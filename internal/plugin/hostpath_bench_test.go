package plugin

import (
	"fmt"
	"testing"
)

// BenchmarkToolOwner resolves a tool among eight loaded plugins, each with
// a few registrations, the tool's in one of them: through the index
// (toolOwner), and by the scan it replaced.
func BenchmarkToolOwner(b *testing.B) {
	h := newHost(b)
	src := testkit(b)
	for i := range 8 {
		tools := []string{}
		if i == 5 {
			tools = []string{"echo"}
		}
		sections := []map[string]any{}
		for j := range 4 {
			sections = append(sections, map[string]any{"name": fmt.Sprintf("kit%d:%d", i, j), "order": 1, "text": "x"})
		}
		if _, err := h.Load(bg, Spec{Name: fmt.Sprintf("kit%d", i), Source: src, Config: cfg(b, map[string]any{"tools": tools, "sections": sections})}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("index", func(b *testing.B) {
		for b.Loop() {
			if h.toolOwner("echo") == nil {
				b.Fatal("echo not found")
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		scan := func(name string) *Plugin {
			h.mu.RLock()
			defer h.mu.RUnlock()
			for _, p := range h.plugins {
				if p.contrib.hasTool(name) {
					return p
				}
			}
			return nil
		}
		for b.Loop() {
			if scan("echo") == nil {
				b.Fatal("echo not found")
			}
		}
	})
}
