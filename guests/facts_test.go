package guests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones these tests name, whatever the machine has

	"github.com/dsh-wasm/dsh-wasm/internal/guestbuild"
	"github.com/dsh-wasm/dsh-wasm/internal/plugin"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

var (
	bg        = context.Background()
	testCache *plugin.Cache
)

// TestMain shares one on-disk compilation cache with the other packages'
// tests, so facts.wasm compiles once per machine, not once per host.
func TestMain(m *testing.M) {
	dir, err := guestbuild.CacheDir()
	if err == nil {
		testCache, err = plugin.NewCache(filepath.Join(dir, "wazero"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	testCache.Close(bg)
	os.Exit(code)
}

// loadFacts loads builtin:facts with config into a fresh host whose
// registry also holds a section with text tmpl.
func loadFacts(t *testing.T, config json.RawMessage, tmpl string) (*plugin.Host, error) {
	t.Helper()
	reg := prompt.NewRegistry(nil)
	if _, err := reg.RegisterSection(prompt.Section{Name: "test", Text: tmpl}); err != nil {
		t.Fatal(err)
	}
	h, err := plugin.New(plugin.Options{Registry: reg, Builtins: All(), Cache: testCache, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(bg) })
	_, err = h.Load(bg, plugin.Spec{Source: "builtin:facts", Config: config})
	return h, err
}

func render(h *plugin.Host, agent *prompt.AgentFacts) (string, error) {
	a, err := h.Registry().Assemble(bg, prompt.AssembleContext{Agent: agent})
	if err != nil {
		return "", err
	}
	return prompt.Render(a)
}

// dateBetween reports whether date is the date in loc at before or at
// after: a render that straddles midnight may see either day.
func dateBetween(date string, before, after time.Time, loc *time.Location) bool {
	return date == before.In(loc).Format(time.DateOnly) || date == after.In(loc).Format(time.DateOnly)
}

func TestFactsRenderDateAndPlatform(t *testing.T) {
	cfg := HostFacts()
	h, err := loadFacts(t, factsJSON(cfg), "{{date}} {{platform}}")
	if err != nil {
		t.Fatal(err)
	}
	wantPlatform := runtime.GOOS + "/" + runtime.GOARCH
	// Outside any agent (the load-time instance), then for an agent (a
	// per-agent instance set up through dsh_setup with the same config).
	for _, agent := range []*prompt.AgentFacts{nil, {ID: "a1", Session: "s1", Model: "m"}} {
		before := time.Now()
		got, err := render(h, agent)
		after := time.Now()
		if cfg.Timezone == "" {
			// This host's zone has no name the plugin could be told; its
			// date then has no value rather than a guessed one.
			if !errors.Is(err, prompt.ErrNoValue) || !strings.Contains(err.Error(), "{{date}}") {
				t.Fatalf("host zone unnamed: render = %q, %v; want {{date}} without a value", got, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		date, platform, ok := strings.Cut(got, " ")
		if !ok || platform != wantPlatform || !dateBetween(date, before, after, time.Local) {
			t.Fatalf("rendered %q; want the host's local date (%s) and %s", got, before.Format(time.DateOnly), wantPlatform)
		}
	}
}

func TestFactsDateFollowsConfiguredZone(t *testing.T) {
	// UTC+14 and UTC-11 are 25 hours apart: their dates always differ, so
	// a plugin that ignored the zone would fail one of the two.
	dates := map[string]string{}
	for _, zone := range []string{"Pacific/Kiritimati", "Pacific/Pago_Pago", "UTC"} {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		h, err := loadFacts(t, factsJSON(FactsConfig{Timezone: zone}), "{{date}}")
		if err != nil {
			t.Fatal(err)
		}
		before := time.Now()
		got, err := render(h, nil)
		after := time.Now()
		if err != nil {
			t.Fatalf("%s: %v", zone, err)
		}
		if !dateBetween(got, before, after, loc) {
			t.Fatalf("%s: date %q, want %s", zone, got, before.In(loc).Format(time.DateOnly))
		}
		dates[zone] = got
	}
	if dates["Pacific/Kiritimati"] == dates["Pacific/Pago_Pago"] {
		t.Fatalf("dates 25 hours apart are equal: %v", dates)
	}
}

func TestFactsWithoutConfigHaveNoValues(t *testing.T) {
	for _, cfg := range []string{"", `{}`, `{"platform":null,"timezone":null}`} {
		h, err := loadFacts(t, json.RawMessage(cfg), "{{date}}")
		if err != nil {
			t.Fatalf("config %q: %v", cfg, err)
		}
		a, err := h.Registry().Assemble(bg, prompt.AssembleContext{})
		if err != nil {
			t.Fatalf("config %q: %v", cfg, err)
		}
		for _, v := range []string{"date", "platform"} {
			if got, ok := a.Variables[v]; !ok || got.OK {
				t.Fatalf("config %q: %s = %+v (registered %v); want registered without a value", cfg, v, got, ok)
			}
		}
		if got, err := prompt.Render(a); !errors.Is(err, prompt.ErrNoValue) {
			t.Fatalf("config %q: rendered %q, %v; want no value", cfg, got, err)
		}
	}
	// Either fact alone.
	h, err := loadFacts(t, factsJSON(FactsConfig{Platform: "plan9/arm"}), "{{platform}}")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := render(h, nil); err != nil || got != "plan9/arm" {
		t.Fatalf("platform alone: %q, %v", got, err)
	}
}

func TestFactsRefuseBadConfig(t *testing.T) {
	tests := []struct{ config, msg string }{
		{`{"platfrom":"linux/amd64"}`, `unknown field "platfrom"`},
		{`[1]`, "cannot unmarshal array"},
		{`{"platform":42}`, "cannot unmarshal number"},
		{`{"platform":""}`, `platform "": empty`},
		{`{"platform":"linux"}`, "not of the form GOOS/GOARCH"},
		{`{"platform":"/amd64"}`, "not of the form GOOS/GOARCH"},
		{`{"platform":"linux/"}`, "not of the form GOOS/GOARCH"},
		{`{"platform":"Linux/amd64"}`, `unexpected character 'L'`},
		{`{"platform":"linux/amd64/v2"}`, `unexpected character '/'`},
		{`{"platform":"linux/amd64\n"}`, `unexpected character '\n'`},
		{`{"platform":"` + strings.Repeat("a", 40) + "/" + strings.Repeat("b", 40) + `"}`, "longer than 64 bytes"},
		{`{"timezone":"Local"}`, `timezone "Local"`},
		{`{"timezone":""}`, `timezone ""`},
		{`{"timezone":"Mars/Olympus_Mons"}`, `timezone "Mars/Olympus_Mons"`},
	}
	for _, tc := range tests {
		t.Run(tc.config, func(t *testing.T) {
			t.Parallel()
			_, err := loadFacts(t, json.RawMessage(tc.config), "")
			if !errors.Is(err, plugin.ErrInit) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %v; want an init failure containing %q", err, tc.msg)
			}
		})
	}
}

func TestBuiltinsListFacts(t *testing.T) {
	if got := plugin.Builtins(All()); !slices.Contains(got, "facts") {
		t.Fatalf("builtins %v lack facts", got)
	}
}

func TestHostFactsPlatform(t *testing.T) {
	if got, want := HostFacts().Platform, runtime.GOOS+"/"+runtime.GOARCH; got != want {
		t.Fatalf("platform %q, want %q", got, want)
	}
	if got := string(factsJSON(FactsConfig{})); got != "{}" {
		t.Fatalf("empty config encodes as %s", got)
	}
}

func TestZoneName(t *testing.T) {
	dir := t.TempDir()
	zoneFile := func(rel string) string {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("TZif"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	symlink := func(name, target string) string {
		p := filepath.Join(dir, name)
		if err := os.Symlink(target, p); err != nil {
			t.Skipf("symlinks unavailable: %v", err)
		}
		return p
	}
	textFile := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	tokyoFile := zoneFile("usr/share/zoneinfo/Asia/Tokyo")
	posixTokyo := zoneFile("usr/share/zoneinfo/posix/Asia/Tokyo")
	paris := zoneFile("usr/share/zoneinfo/Europe/Paris")
	local := time.FixedZone("Local", 9*3600) // what Go names a zone read from /etc/localtime
	absent := filepath.Join(dir, "absent")

	tests := []struct {
		name                string
		loc                 *time.Location
		localtime, timezone string
		want                string
	}{
		{"UTC fallback", time.UTC, absent, absent, "UTC"},
		{"TZ named a zone", tokyo, absent, absent, "Asia/Tokyo"},
		{"TZ named a file", time.FixedZone(tokyoFile, 9*3600), absent, absent, "Asia/Tokyo"},
		{"localtime symlink", local, symlink("lt1", tokyoFile), absent, "Asia/Tokyo"},
		{"localtime into posix/", local, symlink("lt2", posixTokyo), absent, "Asia/Tokyo"},
		{"localtime copied, /etc/timezone names it", local, textFile("lt3", "TZif"), textFile("tz1", "Asia/Tokyo\n"), "Asia/Tokyo"},
		{"symlink disagrees with the offsets", local, symlink("lt4", paris), absent, ""},
		{"stale /etc/timezone", local, textFile("lt5", "TZif"), textFile("tz2", "Europe/Paris\n"), ""},
		{"unknown name", local, textFile("lt6", "TZif"), textFile("tz3", "Nowhere/Land\n"), ""},
		{"nothing to go on", local, absent, absent, ""},
	}
	for _, tc := range tests {
		got, ok := zoneName(tc.loc, tc.localtime, tc.timezone)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: zoneName = %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
}

// factsJSON encodes c as the facts plugin's config (plugin.Spec.Config).
func factsJSON(c FactsConfig) json.RawMessage {
	b, _ := json.Marshal(c) // two strings: encoding cannot fail
	return b
}
