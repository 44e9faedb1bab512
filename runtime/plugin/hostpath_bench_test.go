package plugin

import (
	"fmt"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/hostfns/jsonobj"
)

// BenchmarkLogRequest reads the log request hostfns/guest.Log writes, as
// hostLog does before it asks the logger: "plain" is the reader for the
// SDKs' shape, "parser" the general one every other request goes through.
func BenchmarkLogRequest(b *testing.B) {
	req := []byte(`{"level":"debug","message":"echo"}`)
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			if _, _, ok := readPlainLogRequest(req); !ok {
				b.Fatal("the SDK's request is not plain")
			}
		}
	})
	b.Run("parser", func(b *testing.B) {
		var o jsonobj.Obj
		var level []byte
		for b.Loop() {
			lv, _, err := readLogRequest(&o, req)
			if err != nil {
				b.Fatal(err)
			}
			level, _ = lv.AppendText(level[:0])
		}
	})
}

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
