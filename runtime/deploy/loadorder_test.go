package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/deploytest"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
)

// The plugins' modules are prepared concurrently, but they register in the
// configured order: sections of one order render in it, the plugin that
// claims a taken name is the later one, and the error names it by its
// position. A failed deployment leaves no goroutine behind.
func TestPluginsRegisterInTheConfiguredOrder(t *testing.T) {
	var specs []deploy.PluginSpec
	for i := range 5 {
		specs = append(specs, testkit(t, fmt.Sprintf("kit%d", i), map[string]any{
			"sections": []map[string]any{{"name": fmt.Sprintf("kit%d:s", i), "order": 500, "text": fmt.Sprintf("[%d]", i)}}}))
	}
	var want strings.Builder
	for i := range 5 {
		fmt.Fprintf(&want, "[%d]", i)
	}
	for range 3 {
		d := open(t, deploy.Options{Plugins: specs})
		asm, err := deploy.RegistryOf(d).Assemble(context.Background(), prompt.AssembleContext{Agent: &prompt.AgentFacts{ID: "a"}})
		if err != nil {
			t.Fatal(err)
		}
		var got strings.Builder
		for _, s := range asm.Sections {
			if strings.HasPrefix(s.Name, "kit") {
				got.WriteString(s.Text)
			}
		}
		if got.String() != want.String() {
			t.Fatalf("sections render as %s, want %s", got.String(), want.String())
		}
		if o := d.Owner("section", "kit3:s"); o != "plugin kit3" {
			t.Fatalf("owner of kit3:s: %q", o)
		}
	}

	runtime.GC()
	before := runtime.NumGoroutine()
	clash := testkit(t, "clash", map[string]any{"sections": []map[string]any{{"name": "kit1:s", "order": 1, "text": "x"}}})
	bad := append(append([]deploy.PluginSpec{}, specs[:3]...), clash, specs[3], specs[4])
	_, err := deploy.New(context.Background(), deploy.Options{SessionsDir: t.TempDir(), Cache: deploytest.Cache(t), Plugins: bad})
	if !errors.Is(err, plugin.ErrInit) || !strings.Contains(err.Error(), "deploy: plugin 4 (clash, ") ||
		!strings.Contains(err.Error(), prompt.ErrDuplicateSection.Error()) {
		t.Fatalf("New = %v, want plugin 4 (clash) refused for a taken section name", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("goroutines: %d before, %d after a failed New\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}
