package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// Golden tests of what this package parses. Each testdata/entries/*.yaml
// (a plugin entry) and testdata/deployments/*.yaml (a deployment file)
// decodes to NAME.golden.json, defaults filled in; each file under an
// errors/ directory fails with NAME.golden.txt, the exact FILE:LINE text.
// After an intended change, rewrite them with
//
//	go test ./runtime/config -run Golden -update
//
// and read the diff.

var update = flag.Bool("update", false, "rewrite the golden files")

// goldenDir is the directory the deployment goldens live in; decoded paths
// under it are written as $DIR so the goldens hold no machine's paths.
const goldenDir = "testdata/deployments"

// TestDeploymentGoldens decodes every testdata/deployments/*.yaml and
// compares the result with NAME.golden.json.
func TestDeploymentGoldens(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no goldens: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			dep, err := LoadDeployment(f)
			if err != nil {
				t.Fatal(err)
			}
			got := goldenView(t, dep)
			checkGolden(t, strings.TrimSuffix(f, ".yaml")+".golden.json", got)
		})
	}
}

// TestDeploymentErrorGoldens decodes every file under errors/ and compares
// the error text, one problem a line, with NAME.golden.txt.
func TestDeploymentErrorGoldens(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "errors", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no goldens: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, err := LoadDeployment(f)
			if err == nil {
				t.Fatal("decoded without an error")
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %v is not ErrInvalidConfig", err)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, f+":") {
					t.Errorf("error line %q does not start with FILE:", line)
				}
			}
			checkGolden(t, strings.TrimSuffix(f, ".yaml")+".golden.txt", []byte(err.Error()+"\n"))
		})
	}
}

// goldenView renders a decoded deployment as indented JSON; plugin entries
// go through their YAML form, which spells sizes and durations as a person
// writes them.
func goldenView(t *testing.T, dep *Deployment) []byte {
	t.Helper()
	abs, err := filepath.Abs(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	if dep.Dir != abs {
		t.Errorf("Dir = %q, want %q", dep.Dir, abs)
	}
	type view struct {
		*Deployment
		Plugins []map[string]any `json:"plugins"`
	}
	v := view{Deployment: dep, Plugins: []map[string]any{}}
	for _, p := range dep.Plugins {
		b, err := yaml.Marshal(p.Entry)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]any{}
		if err := yaml.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if p.Name != "" {
			m["name"] = p.Name
		}
		v.Plugins = append(v.Plugins, m)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.ReplaceAll(b, []byte(filepath.Dir(abs)), []byte("$TESTDATA"))
	return append(b, '\n')
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run Golden -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestEntryGoldens decodes every testdata/entries/*.yaml plugin entry and
// compares it, defaults filled in, with NAME.golden.json; files under
// errors/ must fail with NAME.golden.txt.
func TestEntryGoldens(t *testing.T) {
	files, err := filepath.Glob("testdata/entries/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no goldens: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			e, err := Load(f, data)
			if err != nil {
				t.Fatal(err)
			}
			b, err := yaml.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			m := map[string]any{}
			if err := yaml.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			out, err := json.MarshalIndent(m, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, strings.TrimSuffix(f, ".yaml")+".golden.json", append(out, '\n'))
		})
	}
	files, err = filepath.Glob("testdata/entries/errors/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no error goldens: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Load(f, data)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Load = %v, want an ErrInvalidConfig", err)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, f+":") {
					t.Errorf("error line %q does not start with FILE:", line)
				}
			}
			checkGolden(t, strings.TrimSuffix(f, ".yaml")+".golden.txt", []byte(err.Error()+"\n"))
		})
	}
}
