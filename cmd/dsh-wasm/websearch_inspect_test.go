package main

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestInspectWebSearchWithoutKey: plugin inspect of the coding agent's web
// plugin says why web_search is left out when the provider's key is not
// set, in its report's log and without failing; with the key, the tool
// and its section are there and the log is empty.
func TestInspectWebSearchWithoutKey(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	report := func() (tools []string, sections []string, log []string) {
		t.Helper()
		code, stdout, stderr := runCLI(t, "", "plugin", "inspect", "--config", exampleConfig("coding-agent"), "tool-web")
		if code != 0 || stderr != "" {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		var r struct {
			Tools    []struct{ Name string }
			Sections []struct{ Name string }
			Log      []string
		}
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("%v\n%s", err, stdout)
		}
		for _, x := range r.Tools {
			tools = append(tools, x.Name)
		}
		for _, x := range r.Sections {
			sections = append(sections, x.Name)
		}
		return tools, sections, r.Log
	}
	t.Setenv("DEEPSEEK_API_KEY", "")
	os.Unsetenv("DEEPSEEK_API_KEY")
	tools, sections, log := report()
	if !slices.Equal(tools, []string{"web_fetch"}) || slices.Contains(sections, "tool:web_search") {
		t.Errorf("without a key: tools %v, sections %v", tools, sections)
	}
	if want := "INFO web_search is not registered: the deepseek provider's key variable DEEPSEEK_API_KEY is not set"; !slices.Contains(log, want) {
		t.Errorf("log %q lacks %q", log, want)
	}

	t.Setenv("DEEPSEEK_API_KEY", "sk-inspect")
	tools, sections, log = report()
	if !slices.Equal(tools, []string{"web_search", "web_fetch"}) || !slices.Contains(sections, "tool:web_search") || len(log) != 0 {
		t.Errorf("with a key: tools %v, sections %v, log %q", tools, sections, log)
	}
	if strings.Contains(strings.Join(log, ""), "sk-inspect") {
		t.Errorf("the key is in the log")
	}
}
