package plugin

import (
	"bytes"
	"encoding/base64"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

// A granted environment variable that dsh_init reads is often a key. The
// manifest written to the cache holds the sha256 of the answer, never the
// answer, in any spelling; a lazy load asks the host again, compares the
// digest, and a new load-time instance is answered with today's value. A
// changed value finds no manifest (the key holds the values' digest): the
// plugin loads eagerly and its guest sees the new value.
func TestManifestHoldsNoEnvironmentValue(t *testing.T) {
	const name = "DSH_TEST_MANIFEST_KEY"
	secret := "sk-manifest-" + strings.Repeat("7", 24)
	t.Setenv(name, secret)
	dir := t.TempDir()
	kit := map[string]any{
		"sections":    []map[string]any{{"name": "kit:dyn", "order": 130, "dynamic": true}},
		"init_probes": []map[string]any{{"fn": hostfns.FnEnvGet, "req": `{"name":"` + name + `"}`}},
	}
	spec := Spec{Name: "kit", Source: testkit(t), Config: cfg(t, kit), Grants: &config.Grants{Env: []string{name}}}
	record(t, dir, spec)

	ms := manifestsIn(t, dir)
	if len(ms) != 1 || len(ms[0].Calls) == 0 {
		t.Fatalf("manifests after the first load: %+v; want one that records the env_get", ms)
	}
	for _, c := range ms[0].Calls {
		if c.Fn == hostfns.FnEnvGet && (len(c.Resp) != 0 || c.RespSHA256 == "") {
			t.Errorf("the manifest records env_get's answer %q (digest %q); want only its digest", c.Resp, c.RespSHA256)
		}
	}
	spellings := [][]byte{[]byte(secret), []byte(base64.StdEncoding.EncodeToString([]byte(secret)))}
	for _, off := range []int{1, 2} { // base64 of the secret at any alignment inside a larger answer
		spellings = append(spellings, []byte(strings.TrimRight(base64.StdEncoding.EncodeToString(append(make([]byte, off), secret...)), "=")[4:]))
	}
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range spellings {
			if bytes.Contains(b, s) {
				t.Errorf("%s holds the granted variable's value (as %q)", path, s)
			}
		}
		return nil
	})

	// The same value: a lazy load, and the guest's re-run sees the value.
	h, p := loadAgain(t, dir, spec)
	if p.compiled.Load() {
		t.Fatal("the same value: an eager load, want a replay")
	}
	st := loadTimeState(t, p)
	if len(st.Probes) != 1 || !strings.Contains(st.Probes[0].Message, secret) {
		t.Fatalf("the re-run's env_get = %+v; want today's value", st.Probes)
	}
	h.Close(bg)

	// Another value: an eager load, and the guest sees the new one.
	t.Setenv(name, secret+"-rotated")
	_, p = loadAgain(t, dir, spec)
	if !p.compiled.Load() || p.Instances() != 1 {
		t.Fatalf("a rotated value: compiled %v, %d instances; want an eager load", p.compiled.Load(), p.Instances())
	}
	if st := loadTimeState(t, p); len(st.Probes) != 1 || !strings.Contains(st.Probes[0].Message, secret+"-rotated") {
		t.Fatalf("after rotation the guest's env_get = %+v", st.Probes)
	}
}
