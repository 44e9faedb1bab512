package deploy_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/internal/deploytest"
	"github.com/dsh-wasm/dsh-wasm/internal/events"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/internal/syncbuf"
	"github.com/dsh-wasm/dsh-wasm/prompt"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
)

// staticSection is a testkit config registering one static section.
func staticSection(name, text string) map[string]any {
	return map[string]any{"sections": []map[string]any{{"name": name, "order": 150, "text": text}}}
}

// A static section that references a variable nobody provides would fail
// every turn of every agent: the deployment refuses to open instead,
// naming the plugin, the section and the variable, and leaves nothing
// running behind it. The harness's own sections are checked the same way.
func TestDanglingReferenceFailsNew(t *testing.T) {
	cases := []struct {
		name    string
		persona string
		plugins func(t *testing.T) []deploy.PluginSpec
		want    prompt.ReferenceError
	}{
		{"plugin section", "", func(t *testing.T) []deploy.PluginSpec {
			return []deploy.PluginSpec{
				testkit(t, "fine", staticSection("fine:s", "Fine.")),
				testkit(t, "dangler", staticSection("dangler:habits", "Prefer {{no_such_variable}}.")),
			}
		}, prompt.ReferenceError{Plugin: "dangler", Section: "dangler:habits", Variable: "no_such_variable"}},
		{"persona", "You run on {{no_such_platform}}.", func(t *testing.T) []deploy.PluginSpec {
			return []deploy.PluginSpec{testkit(t, "fine", staticSection("fine:s", "Fine."))}
		}, prompt.ReferenceError{Section: "deployment:persona", Variable: "no_such_platform"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			specs := c.plugins(t) // built before counting goroutines
			runtime.GC()
			before := runtime.NumGoroutine()
			d, err := deploy.New(context.Background(), deploy.Options{
				SessionsDir: t.TempDir(), Cache: deploytest.Cache(t),
				Persona: c.persona, Plugins: specs,
			})
			if err == nil {
				d.Close(context.Background())
				t.Fatal("New opened a deployment whose section references a variable nobody provides")
			}
			var re *prompt.ReferenceError
			if !errors.As(err, &re) || *re != c.want {
				t.Fatalf("New = %v, want a *prompt.ReferenceError (what an embedder can name) %+v", err, c.want)
			}
			if !errors.Is(err, prompt.ErrUnresolvedReference) {
				t.Errorf("error %v is not ErrUnresolvedReference", err)
			}
			for _, part := range []string{c.want.Section, "{{" + c.want.Variable + "}}", c.want.Plugin} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not name %q", err, part)
				}
			}
			deadline := time.Now().Add(5 * time.Second)
			for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if after := runtime.NumGoroutine(); after > before {
				buf := make([]byte, 1<<16)
				t.Fatalf("goroutines: %d before, %d after a refused New\n%s", before, after, buf[:runtime.Stack(buf, true)])
			}
		})
	}
}

// An assemble hook may supply a variable late (a late-bound model), so
// with one present a dangling reference is a warning, listed by Dangling,
// and the deployment opens; the strict render decides at each turn.
func TestDanglingReferenceOnlyWarnsWithAnAssembleHook(t *testing.T) {
	var logs syncbuf.Buffer
	hook := testkit(t, "hooker", map[string]any{
		"subscribe": []map[string]any{{"event": events.EventAssemble, "mode": "waterfall"}}})
	hook.Grants = &config.Grants{Events: []string{events.EventAssemble}}
	d := open(t, deploy.Options{
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
		Plugins: []deploy.PluginSpec{hook, testkit(t, "dangler", staticSection("dangler:habits", "Prefer {{late_variable}}."))},
	})
	ds := plugin.HostOf(d).Dangling()
	if len(ds) != 1 || ds[0].Variable != "late_variable" || ds[0].Section != "dangler:habits" {
		t.Fatalf("Dangling = %+v, want dangler:habits → late_variable", ds)
	}
	if got := logs.String(); !strings.Contains(got, "late_variable") || !strings.Contains(got, "level=WARN") {
		t.Errorf("no warning naming the variable; log:\n%s", got)
	}
}

// Once the deployment is open, a reload that would leave a reference
// without an owner is refused and changes nothing, and so is a plugin that
// registers from a manifest recorded by an earlier open (a lazy load,
// which runs no init) when what it references is gone.
func TestDanglingReferenceAfterOpen(t *testing.T) {
	ctx := context.Background()
	var nonce [4]byte
	rand.Read(nonce[:])
	sfx := "-" + hex.EncodeToString(nonce[:]) // fresh manifest keys

	provider := testkit(t, "provider"+sfx, map[string]any{"variables": []string{"shared_fact"}})
	user := testkit(t, "user"+sfx, staticSection("user:s", "Know {{shared_fact}}."))
	d := open(t, deploy.Options{Plugins: []deploy.PluginSpec{provider, user}})

	bad := testkit(t, "user"+sfx, staticSection("user:s", "Know {{gone_fact}}."))
	_, err := plugin.HostOf(d).Reload(ctx, deploy.HostSpec(bad))
	var re *plugin.ReferenceError
	if !errors.As(err, &re) || re.Variable != "gone_fact" || re.Plugin != "user"+sfx {
		t.Fatalf("Reload = %v, want a *plugin.ReferenceError for gone_fact", err)
	}
	if got := plugin.HostOf(d).Plugin("user" + sfx).Contribution().Sections; len(got) != 1 || !strings.Contains(got[0].Text, "{{shared_fact}}") {
		t.Errorf("after the refused reload the plugin's sections are %+v, want the old one", got)
	}
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// The user's manifest is recorded; opened alone it registers from it.
	_, err = deploy.New(ctx, deploy.Options{SessionsDir: t.TempDir(), Cache: deploytest.Cache(t), Plugins: []deploy.PluginSpec{user}})
	if !errors.As(err, &re) || re.Variable != "shared_fact" || re.Plugin != "user"+sfx {
		t.Fatalf("New with the manifest-loaded plugin alone = %v, want a *plugin.ReferenceError for shared_fact", err)
	}
}
